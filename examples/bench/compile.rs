//! `bench -- --compile`: the SimpleCNN's inference (batch 64, evaluation mode, no_grad) eager
//! and through `wgtorch::compile::compile_module`, alternating call by call in one process so
//! that the host's noise falls on both alike; GPU dispatches per call for each.

use super::{median, sync};
use std::time::Instant;
use wgtorch::compile::compile_module;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::ModuleExt;
use wgtorch::{Device, Result, Tensor};

fn dispatches(dev: &Device) -> Result<u64> {
    Ok(match dev {
        Device::Gpu(n) => wgtorch::backend::gpu::context(*n)?.stats().dispatches,
        Device::Cpu => 0,
    })
}

pub fn compile_bench(
    devs: &[Device],
    reps: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    println!(
        "\nCompiled inference, SimpleCNN, batch 64 (eval, no_grad): medians of {reps} calls each, eager and compiled alternating"
    );
    println!("| device | eager (ms) | compiled (ms) | time ratio | dispatches per call, eager / compiled |");
    println!("|---|---|---|---|---|");
    for dev in devs {
        wgtorch::manual_seed(0);
        let mut cnn = SimpleCnn::new(dev)?;
        cnn.eval();
        let fast = compile_module(&cnn);
        let x = Tensor::randn([64, 3, 32, 32], dev)?;
        let _ng = wgtorch::no_grad();
        let diff = fast
            .forward(&x)?
            .sub(&cnn.forward(&x)?)?
            .abs()?
            .amax([0, 1], false)?
            .item()?;
        let (mut eager, mut compiled) = (Vec::new(), Vec::new());
        let (mut de, mut dc) = (0, 0);
        for _ in 0..reps {
            for (is_compiled, ts, d) in
                [(false, &mut eager, &mut de), (true, &mut compiled, &mut dc)]
            {
                sync(dev)?;
                let d0 = dispatches(dev)?;
                let t0 = Instant::now();
                let y = if is_compiled {
                    fast.forward(&x)?
                } else {
                    cnn.forward(&x)?
                };
                sync(dev)?;
                ts.push(t0.elapsed().as_secs_f64());
                *d = dispatches(dev)? - d0;
                drop(y);
            }
        }
        let (e, c) = (median(eager) * 1e3, median(compiled) * 1e3);
        let d = if dev.is_gpu() {
            format!("{de} / {dc}")
        } else {
            "-".into()
        };
        println!(
            "| {} | {e:.2} | {c:.2} | {:.2} | {d} |",
            dev.describe(),
            c / e
        );
        let s = fast.stats();
        assert_eq!(s.graphs, 1, "one signature, one graph");
        json.insert(
            format!(
                "compile_simple_cnn_{}",
                if dev.is_gpu() { "gpu" } else { "cpu" }
            ),
            serde_json::json!({
                "eager_ms": e, "compiled_ms": c, "max_abs_diff": diff,
                "dispatches_eager": de, "dispatches_compiled": dc,
                "cache_hits": s.cache_hits,
            }),
        );
    }
    Ok(())
}
