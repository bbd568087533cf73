//! `bench -- --compile`: the SimpleCNN's inference (batch 64, evaluation mode, no_grad) eager
//! and through `wgtorch::compile::compile_module`, alternating call by call in one process so
//! that the host's noise falls on both alike; GPU dispatches per call for each. Then training
//! steps (forward, loss, backward, SGD) with the module eager and compiled, alternating step by
//! step: minGPT's MLP block (its `NewGELU` written as ops, as minGPT writes it) and a 2-layer
//! transformer encoder classifier.

use super::{median, sync};
use std::time::Instant;
use wgtorch::compile::compile_module;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{
    functional as F, Activation, Forward, Linear, Module, ModuleExt, TransformerEncoderLayer,
    TransformerLayerOptions,
};
use wgtorch::optim::{Optimizer, Sgd};
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
    inference_rows(devs, reps, json)?;
    train_rows(devs, json)
}

fn inference_rows(
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

/// minGPT's `MLP` block with its residual: `x + c_proj(NewGELU(c_fc(x)))`, NewGELU written as
/// minGPT writes it, `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`: nine elementwise ops that a
/// compiled graph runs as one kernel forward and one per input backward.
#[derive(Module)]
struct MinGptMlp {
    c_fc: Linear,
    c_proj: Linear,
}

impl Forward for MinGptMlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.c_fc.forward(x)?;
        let inner = h
            .add(&h.pow_scalar(3.0)?.mul_scalar(0.044715)?)?
            .mul_scalar((2.0 / std::f64::consts::PI).sqrt())?;
        let gelu = h.mul_scalar(0.5)?.mul(&inner.tanh()?.add_scalar(1.0)?)?;
        x.add(&self.c_proj.forward(&gelu)?)
    }
}

/// Two post-norm encoder layers (d 128, 4 heads, feed-forward 512, no dropout, batch first) and a
/// linear head on the mean over the sequence.
#[derive(Module)]
struct EncoderClassifier {
    l1: TransformerEncoderLayer,
    l2: TransformerEncoderLayer,
    head: Linear,
}

impl Forward for EncoderClassifier {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.l1.forward(x, Default::default())?;
        let y = self.l2.forward(&y, Default::default())?;
        self.head.forward(&y.mean_dims([1], false)?)
    }
}

/// Median step times, eager and compiled, alternating; dispatches of the last step of each; the
/// difference of the first losses (the same weights).
fn steps<M: Forward + Module>(
    model: &M,
    x: &Tensor,
    loss: &dyn Fn(&Tensor) -> Result<Tensor>,
    reps: usize,
) -> Result<[f64; 5]> {
    let dev = x.device();
    let fast = compile_module(model);
    let mut opt = Sgd::new(model.parameters(), 1e-3)?;
    // The first call compiles.
    let first = [
        loss(&model.forward(x)?)?.item()?,
        loss(&fast.forward(x)?)?.item()?,
    ];
    let (mut eager, mut compiled, mut d) = (Vec::new(), Vec::new(), [0, 0]);
    // One untimed step each: the GEMM tuner's first trials.
    for rep in 0..=reps {
        for (k, ts) in [&mut eager, &mut compiled].into_iter().enumerate() {
            sync(&dev)?;
            let d0 = dispatches(&dev)?;
            let t0 = Instant::now();
            opt.zero_grad();
            let y = if k == 1 {
                fast.forward(x)?
            } else {
                model.forward(x)?
            };
            let l = loss(&y)?;
            l.backward()?;
            opt.step()?;
            sync(&dev)?;
            if rep > 0 {
                ts.push(t0.elapsed().as_secs_f64());
            }
            d[k] = dispatches(&dev)? - d0;
        }
    }
    let s = fast.stats();
    assert_eq!((s.graphs, s.eager_calls), (1, 0), "{}", fast.explain());
    Ok([
        median(eager) * 1e3,
        median(compiled) * 1e3,
        d[0] as f64,
        d[1] as f64,
        (first[0] - first[1]).abs(),
    ])
}

fn train_rows(
    devs: &[Device],
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    println!("\nCompiled training steps (forward, loss, backward, SGD), eager and compiled alternating: medians");
    println!("| device | model | steps | eager (ms) | compiled (ms) | time ratio | dispatches per step, eager / compiled | first loss, difference |");
    println!("|---|---|---|---|---|---|---|---|");
    for dev in devs {
        let reps = if dev.is_gpu() { 3 } else { 9 };
        wgtorch::manual_seed(0);
        let mlp = MinGptMlp {
            c_fc: Linear::new(128, 512, dev)?,
            c_proj: Linear::new(512, 128, dev)?,
        };
        let x = Tensor::randn([512, 128], dev)?;
        let target = Tensor::randn([512, 128], dev)?;
        let mse = |y: &Tensor| F::mse_loss(y, &target);
        let opts = TransformerLayerOptions {
            dim_feedforward: 512,
            dropout: 0.0,
            batch_first: true,
            activation: Activation::Gelu,
            ..Default::default()
        };
        let enc = EncoderClassifier {
            l1: TransformerEncoderLayer::with_options(128, 4, opts, dev)?,
            l2: TransformerEncoderLayer::with_options(128, 4, opts, dev)?,
            head: Linear::new(128, 10, dev)?,
        };
        let seqs = Tensor::randn([32, 64, 128], dev)?;
        let labels: Vec<i64> = (0..32).map(|i| i % 10).collect();
        let labels = Tensor::from_vec(labels, [32], dev)?;
        let ce = |y: &Tensor| F::cross_entropy(y, &labels);
        let rows = [
            (
                "mingpt_mlp",
                "minGPT MLP block [512, 128]",
                steps(&mlp, &x, &mse, reps)?,
            ),
            (
                "encoder_classifier",
                "transformer encoder classifier [32, 64, 128]",
                steps(&enc, &seqs, &ce, reps)?,
            ),
        ];
        for (key, what, [e, c, de, dc, diff]) in rows {
            let d = if dev.is_gpu() {
                format!("{de} / {dc}")
            } else {
                "-".into()
            };
            println!(
                "| {} | {what} | {reps} | {e:.1} | {c:.1} | {:.2} | {d} | {diff:.1e} |",
                dev.describe(),
                c / e
            );
            json.insert(
                format!(
                    "compile_train_{key}_{}",
                    if dev.is_gpu() { "gpu" } else { "cpu" }
                ),
                serde_json::json!({
                    "eager_ms": e, "compiled_ms": c, "dispatches_eager": de,
                    "dispatches_compiled": dc, "first_loss_diff": diff,
                }),
            );
        }
    }
    Ok(())
}
