//! The benchmark table: matmul GFLOP/s (f32 256 to 2048; bf16 on the CPU, on AMX where it has it), conv2d forward+backward, elementwise
//! and row-reduction GB/s next to the CPU's triad and read bandwidth, and the SimpleCNN training step (f32 and autocast) on the CPU and the GPU adapter found,
//! with per-step GPU counters; then, when `import torch` works in `$WGTORCH_BENCH_PYTHON` (default
//! `python3`), the same work in PyTorch (at rayon's thread count) and numpy from
//! `bench/pytorch_bench.py`, as ratios; the sequence-model rows (log_softmax `[700, 18328]`
//! forward+backward, a word-LM LSTM training step, a nanoGPT-sized transformer step) on the CPU,
//! next to PyTorch in interleaved rounds; the ONNX inference rows (ResNet-18 at 1×3×224×224 and a
//! 4-layer transformer encoder, batch 1, seq 128, through `wgtorch::onnx` on the CPU and the GPU
//! adapter, next to onnxruntime's CPU latency at the same thread count, with the outputs' max abs
//! diff; the models are written into `target/onnx-bench/` on first use, see `bench/onnx.rs`); and
//! on a CPU adapter, the GEMM tiles its tuner chose for each GEMM bucket met (the SimpleCNN
//! step's forward, input-gradient and weight-gradient products among them), with the default's
//! and the chosen tile's GFLOP/s (`bench/gemm_tiles.rs`; the bench tunes into a cache of its own,
//! `target/bench-gemm-tiles/`, with room to tune everything); and the GPU's cold start: a fresh
//! process (this binary with `--cold-start`, Mesa's shader cache disabled) timing device creation
//! and its first two SimpleCNN training steps, with an empty GEMM tuning cache and with the bench's
//! (`--cold-start --profile` alone: the first step's GPU time per kernel against a warm step's).
//! Writes `bench-results.json`. Medians of several runs; measure on an idle machine.
//!
//! `cargo run --release --example bench`
//!
//! `--seq [--rounds N]` runs only the sequence-model rows (N rounds, default 3), writing
//! `bench-seq-results.json`. `--seq-case log_softmax|word_lm|nanogpt [--reps N] [--device
//! cpu|gpu]` times one of them alone (wgtorch only), for a profiler.
//!
//! `--onnx [--reps N]` runs only the ONNX inference rows (N timed runs on the CPU and in
//! onnxruntime, default 15; 5 on a GPU), writing `bench-onnx-results.json`. `--onnx-case
//! resnet18|transformer_encoder_4l [--reps N] [--device cpu|gpu] [--profile]` times one model
//! alone (wgtorch only), for a profiler; `--profile` prints `wgtorch::profiler`'s per-op tables.
//! `--cnn-case f32|f16|bf16 [--reps N] [--device cpu|gpu]` times the SimpleCNN training step
//! alone (autocast for the half types), for a profiler. `--membw [--reps N]` runs only the
//! memory-bound CPU rows: a triad and a read stream (the machine's bandwidth, plain loops), and
//! add, mul_scalar, relu, row sums and row amax of 2^22 f32 as a share of it (`bench/membw.rs`).
//!
//! `--compile [--reps N]` times the SimpleCNN's inference (batch 64, evaluation mode) eager and
//! through `wgtorch::compile::compile_module`, alternating, on the CPU and the GPU adapter, with
//! the GPU dispatches per call; then training steps (the SimpleCNN, a word-LM LSTM, minGPT's MLP
//! block, a transformer encoder classifier) eager and compiled, with the first compiled step's
//! time, the GPU dispatches and pool peak, and on the CPU in rounds interleaved with PyTorch eager
//! and `torch.compile` (`bench/compile.rs`), writing `bench-compile-results.json`.
//!
//! `--soak N [--batch B] [--device cpu|gpu]` instead runs N SimpleCNN training steps (batch B,
//! default 64; the embedded digits through a DataLoader) on each device, printing resident memory
//! (VmRSS), the host pool and the GPU pool after warm-up, every tenth of the run and at the end,
//! and the growth in %: a long run must stay flat.
//!
//! `--ddp [--steps N]` (built with `--features mpi`, Open MPI's `mpirun` on the PATH) times the
//! SimpleCNN step on 1 rank and on 2 ranks with DistributedDataParallel (1 thread per rank),
//! with the all-reduce time and overlap, next to PyTorch's DDP; writes `bench-ddp-results.json`.

#[path = "bench/compile.rs"]
mod compile;
#[cfg(feature = "mpi")]
#[path = "bench/ddp.rs"]
mod ddp;
#[path = "bench/gemm_peers.rs"]
mod gemm_peers;
#[path = "bench/gemm_tiles.rs"]
mod gemm_tiles;
#[path = "bench/membw.rs"]
mod membw;
#[path = "bench/onnx.rs"]
mod onnx;
#[path = "bench/seq.rs"]
mod seq;
#[path = "bench/soak.rs"]
mod soak;

use std::time::Instant;
use wgtorch::amp::{self, GradScaler};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::{DType, Device, Result, Tensor};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn sync(dev: &Device) -> Result<()> {
    if let Device::Gpu(n) = dev {
        wgtorch::backend::gpu::context(*n)?.synchronize()?;
    }
    Ok(())
}

fn time(dev: &Device, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    gemm_tiles::settle(dev, &mut f)?;
    sync(dev)?;
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        f()?;
        sync(dev)?;
        ts.push(t0.elapsed().as_secs_f64());
    }
    Ok(median(ts))
}

/// One SimpleCNN training step's time and, on a GPU, what it cost: dispatches, submits, pipelines
/// created after the first step, and the pool's peak bytes.
struct Step {
    ms: f64,
    /// With `profiled`: the median of the same step under the profiler.
    profiled_ms: Option<f64>,
    /// Pool bytes held by live tensors after the first step and after the timed ones.
    in_use: (u64, u64),
    dispatches: u64,
    submits: u64,
    new_pipelines: u64,
    peak: u64,
}

/// `profiled`: each timed step is followed by one under `wgtorch::profiler` (shapes, memory and
/// GPU kernels recorded; the profiler started before and stopped after it, outside the timing),
/// so that the machine's drift hits both; `Step::profiled_ms` is their median. The counters are
/// the plain steps'.
fn cnn_step(dev: &Device, half: Option<DType>, profiled: bool, reps: usize) -> Result<Step> {
    wgtorch::manual_seed(0);
    let model = SimpleCnn::new(dev)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let mut scaler = GradScaler::new();
    scaler.enabled = half == Some(DType::F16);
    let x = Tensor::randn([64, 3, 32, 32], dev)?;
    let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64], dev)?;
    let ctx = match dev {
        Device::Gpu(n) => Some(wgtorch::backend::gpu::context(*n)?),
        Device::Cpu => None,
    };
    let mut step = || -> Result<()> {
        let loss = {
            let _ac = half.map(|h| amp::autocast(dev, h));
            F::cross_entropy(&model.forward(&x)?, &y)?
        };
        opt.zero_grad();
        scaler.scale(&loss)?.backward()?;
        scaler.step(&mut opt)?;
        scaler.update()?;
        loss.item()?;
        Ok(())
    };
    step()?;
    gemm_tiles::settle(dev, &mut step)?;
    if let Some(c) = &ctx {
        c.synchronize()?;
        c.reset_peak();
    }
    let stats = || ctx.as_ref().map(|c| c.stats()).unwrap_or_default();
    let before = stats();
    let (mut ts, mut pts) = (Vec::new(), Vec::new());
    // The plain steps' dispatches and submits (each step ends with a readback, so its work is
    // submitted within it).
    let (mut dispatches, mut submits) = (0, 0);
    for _ in 0..reps {
        let s0 = stats();
        let t0 = Instant::now();
        step()?;
        ts.push(t0.elapsed().as_secs_f64());
        let s1 = stats();
        dispatches += s1.dispatches - s0.dispatches;
        submits += s1.submits - s0.submits;
        if profiled {
            let p = wgtorch::profiler::Profiler::start(wgtorch::profiler::ProfileOptions {
                record_shapes: true,
                profile_memory: true,
                ..Default::default()
            })?;
            let t0 = Instant::now();
            step()?;
            pts.push(t0.elapsed().as_secs_f64());
            let prof = p.stop();
            assert!(!prof.events().is_empty(), "the profiler recorded the step");
        }
    }
    if let Some(c) = &ctx {
        c.synchronize()?;
    }
    let after = stats();
    let r = reps as u64;
    Ok(Step {
        ms: median(ts) * 1e3,
        profiled_ms: profiled.then(|| median(pts) * 1e3),
        in_use: (before.bytes_in_use, after.bytes_in_use),
        dispatches: dispatches / r,
        submits: submits / r,
        new_pipelines: after.pipelines_created - before.pipelines_created,
        peak: after.peak_bytes,
    })
}

/// The Python that runs `bench/pytorch_bench.py`: `$WGTORCH_BENCH_PYTHON` (e.g. a virtual
/// environment's `bin/python`), else `python3` on the PATH.
fn python() -> String {
    std::env::var("WGTORCH_BENCH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Run `bench/pytorch_bench.py` with `args` at rayon's thread count; its JSON line, or None
/// (with the reason on stderr) when PyTorch is not importable.
fn pytorch_with(args: &[&str]) -> Option<serde_json::Value> {
    peer(args, "PyTorch comparison")
}

/// Run `bench/pytorch_bench.py` with `args` at rayon's thread count; its JSON line, or None
/// when it fails (a module it needs is not importable), printing `({what} skipped: reason)`.
fn peer(args: &[&str], what: &str) -> Option<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/pytorch_bench.py");
    let threads = rayon::current_num_threads().to_string();
    let out = std::process::Command::new(python())
        .arg(script)
        .args(["--threads", &threads])
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "({what} skipped: {})",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("python3 failed")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn pytorch() -> Option<serde_json::Value> {
    pytorch_with(&[])
}

/// One f32 training step of the SimpleCNN on a batch, ending with the loss's readback.
fn train_step(model: &SimpleCnn, opt: &mut Adam, x: &Tensor, y: &Tensor) -> Result<()> {
    let loss = F::cross_entropy(&model.forward(x)?, y)?;
    opt.zero_grad();
    loss.backward()?;
    opt.step()?;
    loss.item()?;
    Ok(())
}

/// `--cold-start`: device creation and the first two training steps of this fresh process, as JSON.
/// With `--profile`, a table instead: each GPU kernel's time in the first step against a warm
/// step's (the GPU profiler's timestamps), which shows where a cold start goes on an adapter that
/// compiles at first dispatch (llvmpipe JIT-compiles a pipeline when it first runs, not in
/// `create_compute_pipeline`).
fn cold_start() -> Result<()> {
    let t0 = Instant::now();
    let dev = Device::gpu()?;
    let ctx = wgtorch::backend::gpu::context(0)?;
    let init = t0.elapsed().as_secs_f64();
    wgtorch::manual_seed(0);
    let model = SimpleCnn::new(&dev)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let x = Tensor::randn([64, 3, 32, 32], &dev)?;
    let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64], &dev)?;
    let mut step = || train_step(&model, &mut opt, &x, &y);
    if std::env::args().any(|a| a == "--profile") {
        use wgtorch::profiler::{profile, ProfileOptions, ProfilerActivity};
        let opts = || ProfileOptions {
            activities: ProfilerActivity::ALL,
            ..Default::default()
        };
        let first = profile(opts(), |_| step())?.key_averages();
        let warm = profile(opts(), |_| step())?.key_averages();
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut rows: Vec<_> = first.rows().iter().filter(|r| r.gpu_kernel).collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.self_gpu_time_total_ns));
        println!("| kernel | launches | first step, ms | warm step, ms | difference, ms |");
        println!("|---|---|---|---|---|");
        for r in rows {
            let w = warm.get(&r.name).map_or(0, |w| w.self_gpu_time_total_ns);
            let (f, w) = (ms(r.self_gpu_time_total_ns), ms(w));
            println!(
                "| {} | {} | {f:.1} | {w:.1} | {:.1} |",
                r.name,
                r.count,
                f - w
            );
        }
        let (f, w) = (
            first.self_gpu_time_total_ns(),
            warm.self_gpu_time_total_ns(),
        );
        println!(
            "GPU time: first step {:.0} ms, warm step {:.0} ms; {} pipelines created",
            ms(f),
            ms(w),
            ctx.stats().pipelines_created
        );
        return Ok(());
    }
    step()?;
    let total = t0.elapsed().as_secs_f64();
    let pipelines = ctx.stats().pipelines_created;
    // The second step: where the GEMM tuner's background compiles begin.
    let t1 = Instant::now();
    step()?;
    let second = t1.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({"init_s": init, "first_step_done_s": total, "pipelines": pipelines, "second_step_s": second})
    );
    Ok(())
}

/// Run `--cold-start` in a fresh process (no shader cache; the GEMM tuning cache in `tiles`)
/// and return its JSON line.
fn measure_cold_start(tiles: &std::path::Path) -> Option<serde_json::Value> {
    let t0 = Instant::now();
    let out = std::process::Command::new(std::env::current_exe().ok()?)
        .arg("--cold-start")
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .env("WGTORCH_CACHE_DIR", tiles)
        .output()
        .ok()?;
    let wall = t0.elapsed().as_secs_f64();
    let mut v: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).ok()?;
    v["process_wall_s"] = wall.into();
    Some(v)
}

/// A command-line error.
fn usage(msg: String) -> wgtorch::Error {
    wgtorch::Error::InvalidArgument { op: "bench", msg }
}

/// The value after `flag` on the command line, parsed (None when the flag is absent).
fn arg<T: std::str::FromStr>(flag: &str) -> Option<std::result::Result<T, String>> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    Some(
        args.get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a value")),
    )
}

/// `--device cpu|gpu` (the CPU when absent).
fn device_arg() -> Result<Device> {
    match arg::<String>("--device")
        .transpose()
        .map_err(usage)?
        .as_deref()
    {
        None | Some("cpu") => Ok(Device::Cpu),
        Some("gpu") => Device::gpu(),
        Some(other) => Err(usage(format!("--device takes cpu or gpu, got {other}"))),
    }
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--ddp-worker" || a == "--ddp") {
        let steps = arg::<usize>("--steps").unwrap_or(Ok(20)).map_err(usage)?;
        #[cfg(feature = "mpi")]
        {
            if std::env::args().any(|a| a == "--ddp-worker") {
                let mb = arg::<f64>("--bucket-mb")
                    .unwrap_or(Ok(25.0))
                    .map_err(usage)?;
                return ddp::worker(steps, std::env::args().any(|a| a == "--plain"), mb);
            }
            return ddp::bench(
                steps,
                pytorch_with(&["--ddp", "--steps", &steps.to_string()]),
            );
        }
        #[cfg(not(feature = "mpi"))]
        return Err(usage(format!(
            "--ddp needs MPI: cargo run --release --features mpi --example bench -- --ddp (steps {steps})"
        )));
    }
    if std::env::args().any(|a| a == "--cold-start") {
        return cold_start();
    }
    gemm_tiles::start();
    if let Some(steps) = arg::<usize>("--soak") {
        let batch = arg::<usize>("--batch").unwrap_or(Ok(64)).map_err(usage)?;
        let which = arg::<String>("--device").transpose().map_err(usage)?;
        let steps = steps.map_err(usage)?;
        if let Some(other) = which.as_deref().filter(|d| !matches!(*d, "cpu" | "gpu")) {
            return Err(usage(format!("--device takes cpu or gpu, got {other}")));
        }
        if matches!(which.as_deref(), None | Some("cpu")) {
            soak::soak(&Device::Cpu, steps, batch)?;
        }
        if matches!(which.as_deref(), None | Some("gpu")) {
            soak::soak(&Device::gpu()?, steps, batch)?;
        }
        return Ok(());
    }
    if let Some(case) = arg::<String>("--seq-case") {
        // One sequence case alone, wgtorch only: for a profiler (`perf record`).
        let case = case.map_err(usage)?;
        let reps = arg::<usize>("--reps").unwrap_or(Ok(20)).map_err(usage)?;
        let dev = device_arg()?;
        let s = match case.as_str() {
            "log_softmax" => seq::log_softmax_case(&dev, reps)?,
            "word_lm" => seq::word_lm_step(&dev, reps)?,
            "nanogpt" => seq::gpt_step(&dev, reps)?,
            other => {
                return Err(usage(format!(
                    "--seq-case takes log_softmax, word_lm or nanogpt, got {other}"
                )))
            }
        };
        println!(
            "{case} on {}: median {:.2} ms over {reps} steps",
            dev.describe(),
            s * 1e3
        );
        return Ok(());
    }
    if let Some(case) = arg::<String>("--cnn-case") {
        // The SimpleCNN training step alone (batch 64, Adam), wgtorch only: for a profiler.
        let case = case.map_err(usage)?;
        let reps = arg::<usize>("--reps").unwrap_or(Ok(20)).map_err(usage)?;
        let half = match case.as_str() {
            "f32" => None,
            "f16" => Some(DType::F16),
            "bf16" => Some(DType::BF16),
            other => {
                return Err(usage(format!(
                    "--cnn-case takes f32, f16 or bf16, got {other}"
                )))
            }
        };
        let dev = device_arg()?;
        let s = cnn_step(&dev, half, false, reps.max(1))?;
        println!(
            "SimpleCNN step {case} on {}: median {:.2} ms over {reps} steps",
            dev.describe(),
            s.ms
        );
        return Ok(());
    }
    if std::env::args().any(|a| a == "--membw") {
        // The memory-bound rows alone, CPU only.
        let reps = arg::<usize>("--reps").unwrap_or(Ok(15)).map_err(usage)?;
        let name = format!("cpu ({} threads, rayon)", rayon::current_num_threads());
        println!("| device | work | size | time (ms) | throughput |\n|---|---|---|---|---|");
        return membw::cpu_rows(&name, reps.max(1), &mut serde_json::Map::new());
    }
    if let Some(case) = arg::<String>("--onnx-case") {
        let case = case.map_err(usage)?;
        let reps = arg::<usize>("--reps").unwrap_or(Ok(20)).map_err(usage)?;
        let dev = device_arg()?;
        let profile = std::env::args().any(|a| a == "--profile");
        return onnx::onnx_case(&case, &dev, reps.max(1), profile);
    }
    // The section-only modes: each writes its own results file.
    type Section =
        fn(&[Device], usize, &mut serde_json::Map<String, serde_json::Value>) -> Result<()>;
    let sections: [(&str, &str, usize, Section); 3] = [
        ("--onnx", "bench-onnx-results.json", 15, onnx::onnx_bench),
        (
            "--compile",
            "bench-compile-results.json",
            15,
            compile::compile_bench,
        ),
        ("--seq", "bench-seq-results.json", 3, |_, rounds, json| {
            seq::seq_bench(rounds, json)
        }),
    ];
    for (flag, path, default, run) in sections {
        if std::env::args().any(|a| a == flag) {
            let count = if flag == "--seq" {
                "--rounds"
            } else {
                "--reps"
            };
            let n = arg::<usize>(count).unwrap_or(Ok(default)).map_err(usage)?;
            let mut devs = vec![Device::Cpu];
            if let Ok(g) = Device::gpu() {
                devs.push(g);
            }
            let mut json = serde_json::Map::new();
            run(&devs, n.max(1), &mut json)?;
            let text = serde_json::to_string_pretty(&serde_json::Value::Object(json));
            std::fs::write(path, text.unwrap_or_default()).ok();
            println!("\nwrote {path}");
            return Ok(());
        }
    }
    let mut devs = vec![Device::Cpu];
    if let Ok(g) = Device::gpu() {
        devs.push(g);
    }
    let mut json = serde_json::Map::new();
    println!("| device | work | size | time (ms) | throughput |");
    println!("|---|---|---|---|---|");
    for dev in &devs {
        let name = dev.describe();
        let mut rec = serde_json::Map::new();
        for n in [256usize, 512, 1024, 2048] {
            if dev.is_gpu() && n == 2048 {
                continue; // minutes on a software adapter
            }
            let a = Tensor::randn([n, n], dev)?;
            let b = Tensor::randn([n, n], dev)?;
            // Enough CPU repetitions for a stable median (single runs swing with thread wake-ups).
            let reps = match (dev.is_gpu(), n) {
                (true, n) if n >= 1024 => 3,
                (true, _) => 7,
                (false, n) if n >= 2048 => 5,
                (false, _) => 15,
            };
            let t = time(dev, reps, || a.matmul(&b).map(|_| ()))?;
            let gf = 2.0 * (n * n * n) as f64 / t / 1e9;
            rec.insert(format!("matmul_gflops_{n}"), gf.into());
            println!(
                "| {name} | matmul f32 | {n}³ | {:.2} | {gf:.1} GFLOP/s |",
                t * 1e3
            );
        }
        if !dev.is_gpu() {
            // bf16 operands, f32 sums, a bf16 result: AMX tiles where the CPU has them, else
            // the f32 kernels on widened operands.
            let how = if wgtorch::backend::cpu::bf16_on_amx() {
                "AMX"
            } else {
                "widened to f32"
            };
            for n in [256usize, 512, 1024, 2048] {
                let a = Tensor::randn([n, n], dev)?.to_dtype(DType::BF16)?;
                let b = Tensor::randn([n, n], dev)?.to_dtype(DType::BF16)?;
                let t = time(dev, if n >= 2048 { 5 } else { 15 }, || {
                    a.matmul(&b).map(|_| ())
                })?;
                let gf = 2.0 * (n * n * n) as f64 / t / 1e9;
                rec.insert(format!("matmul_bf16_gflops_{n}"), gf.into());
                println!(
                    "| {name} | matmul bf16 ({how}) | {n}³ | {:.2} | {gf:.1} GFLOP/s |",
                    t * 1e3
                );
            }
        }
        let img = Tensor::randn([64, 32, 16, 16], dev)?;
        let w = Tensor::randn([64, 32, 3, 3], dev)?.requires_grad_(true);
        let t = time(dev, 3, || {
            F::conv2d_with(
                &img,
                &w,
                None,
                F::Conv2dFuncOptions {
                    padding: [1, 1].into(),
                    ..Default::default()
                },
            )?
            .sum_all()?
            .backward()?;
            w.set_grad(None);
            Ok(())
        })?;
        rec.insert("conv2d_fwd_bwd_ms".into(), (t * 1e3).into());
        println!(
            "| {name} | conv2d fwd+bwd | [64,32,16,16] * [64,32,3,3] | {:.2} | - |",
            t * 1e3
        );
        if let Device::Gpu(i) = *dev {
            membw::gpu_rows(&name, i, &mut rec)?;
        } else {
            membw::cpu_rows(&name, 15, &mut rec)?;
        }
        json.insert(name, rec.into());
    }
    gemm_peers::rows();
    println!();
    println!("| device | SimpleCNN train step (batch 64, Adam) | ms/step | img/s | dispatches | submits | new pipelines | pool peak (MiB) | pool in use, step 1 -> last (MiB) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut cpu_step = None;
    let mut overhead = Vec::new();
    for dev in &devs {
        for (label, half) in [
            ("f32", None),
            ("autocast f16 + GradScaler", Some(DType::F16)),
            ("autocast bf16", Some(DType::BF16)),
        ] {
            // The f32 step alternates with the same step under the profiler (more pairs on the
            // CPU, where the difference is small next to the noise).
            let profiled = half.is_none();
            let reps = match (dev.is_gpu(), profiled) {
                (true, _) => 3,
                (false, true) => 15,
                (false, false) => 5,
            };
            let s = cnn_step(dev, half, profiled, reps)?;
            if !dev.is_gpu() && half.is_none() {
                cpu_step = Some(s.ms);
            }
            let mut rows = vec![(label.to_string(), s.ms)];
            if let Some(p) = s.profiled_ms {
                overhead.push((dev.describe(), 100.0 * (p / s.ms - 1.0)));
                rows.push((
                    format!("{label} under the profiler (shapes, memory, GPU kernels)"),
                    p,
                ));
            }
            let gpu = dev.is_gpu();
            let field = |v: u64| if gpu { v.to_string() } else { "-".into() };
            let mib = |b: u64| format!("{:.1}", b as f64 / (1 << 20) as f64);
            let (peak, in_use) = if gpu {
                (
                    mib(s.peak),
                    format!("{} -> {}", mib(s.in_use.0), mib(s.in_use.1)),
                )
            } else {
                ("-".into(), "-".into())
            };
            for (label, ms) in rows {
                println!(
                    "| {} | {label} | {ms:.1} | {:.0} | {} | {} | {} | {peak} | {in_use} |",
                    dev.describe(),
                    64.0 / (ms / 1e3),
                    field(s.dispatches),
                    field(s.submits),
                    field(s.new_pipelines)
                );
                json.insert(format!("{} step {label}", dev.describe()), serde_json::json!({ "ms": ms, "dispatches": s.dispatches, "submits": s.submits, "new_pipelines": s.new_pipelines, "pool_peak_bytes": s.peak, "pool_in_use_bytes": [s.in_use.0, s.in_use.1] }));
            }
        }
    }
    for (dev, pct) in &overhead {
        println!(
            "profiler overhead on {dev}: {pct:+.1}% per step (target: at most +10% on the CPU)"
        );
        json.insert(
            format!("{dev} profiler overhead pct"),
            serde_json::json!(pct),
        );
    }
    gemm_tiles::rows(&mut json);
    if let Some(gpu) = devs.iter().find(|d| d.is_gpu()) {
        // Where a tuned GPU step goes, kernel by kernel (the profiler's timestamps).
        wgtorch::manual_seed(0);
        let model = SimpleCnn::new(gpu)?;
        let mut opt = Adam::new(model.parameters(), 1e-3)?;
        let x = Tensor::randn([64, 3, 32, 32], gpu)?;
        let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64], gpu)?;
        let mut step = || train_step(&model, &mut opt, &x, &y);
        step()?;
        gemm_tiles::settle(gpu, &mut step)?;
        gemm_tiles::step_split(gpu, step)?;
    }
    if devs.iter().any(|d| d.is_gpu()) {
        // With an empty GEMM tuning cache (the child's second step queues candidates for the
        // background compiler), then with this run's (every GEMM of the step tuned: the child
        // runs the default tiles while it compiles the tuned ones from the second step on).
        let empty = std::path::Path::new("target").join("bench-gemm-tiles-empty");
        let _ = std::fs::remove_dir_all(&empty);
        for (label, dir) in [("empty", empty), ("warm", gemm_tiles::cache_dir())] {
            if let Some(c) = measure_cold_start(&dir) {
                println!(
                    "\nGPU cold start (fresh process, Mesa shader cache disabled, {label} GEMM tuning cache): device {:.2} s, first SimpleCNN step done at {:.2} s ({} pipelines compiled), second step {:.2} s, process wall {:.2} s",
                    c["init_s"].as_f64().unwrap_or(f64::NAN),
                    c["first_step_done_s"].as_f64().unwrap_or(f64::NAN),
                    c["pipelines"],
                    c["second_step_s"].as_f64().unwrap_or(f64::NAN),
                    c["process_wall_s"].as_f64().unwrap_or(f64::NAN)
                );
                json.insert(format!("gpu_cold_start_{label}_tuning_cache"), c);
            }
        }
    }
    if let Some(pt) = pytorch() {
        println!();
        println!(
            "PyTorch {} (CPU, {} threads) and numpy {} in the same run:",
            pt["torch"],
            rayon::current_num_threads(),
            pt["numpy"]
        );
        let ours = &json["cpu (2 threads, rayon)"];
        for n in ["256", "512", "1024", "2048"] {
            let (o, t, np) = (
                ours[format!("matmul_gflops_{n}")].as_f64(),
                pt["matmul_gflops"][n].as_f64(),
                pt["numpy_matmul_gflops"][n].as_f64(),
            );
            if let (Some(o), Some(t), Some(np)) = (o, t, np) {
                println!("  matmul {n}³: wgtorch {o:.1}, PyTorch {t:.1}, numpy {np:.1} GFLOP/s -> {:.2}x PyTorch, {:.2}x numpy", o / t, o / np);
            }
        }
        for n in ["256", "512", "1024", "2048"] {
            if let (Some(o), Some(t)) = (
                ours[format!("matmul_bf16_gflops_{n}")].as_f64(),
                pt["matmul_bf16_gflops"][n].as_f64(),
            ) {
                println!(
                    "  matmul bf16 {n}³: wgtorch {o:.1}, PyTorch {t:.1} GFLOP/s -> {:.2}x PyTorch",
                    o / t
                );
            }
        }
        for (key, what) in [
            ("add_gbs", "add"),
            ("mul_scalar_gbs", "mul_scalar"),
            ("relu_gbs", "relu"),
            ("sum_rows_gbs", "row sums"),
            ("amax_rows_gbs", "row amax"),
        ] {
            if let (Some(o), Some(t)) = (ours[key].as_f64(), pt[key].as_f64()) {
                println!(
                    "  {what} 2^22 f32: wgtorch {o:.1}, PyTorch {t:.1} GB/s -> {:.2}x PyTorch",
                    o / t
                );
            }
        }
        if let (Some(o), Some(t)) = (
            ours["conv2d_fwd_bwd_ms"].as_f64(),
            pt["conv2d_fwd_bwd_ms"].as_f64(),
        ) {
            println!(
                "  conv2d fwd+bwd: wgtorch {o:.1} ms, PyTorch {t:.1} ms -> time ratio {:.2}",
                o / t
            );
        }
        if let (Some(o), Some(t)) = (cpu_step, pt["cnn_step_ms"].as_f64()) {
            println!(
                "  SimpleCNN step: wgtorch {o:.1} ms, PyTorch {t:.1} ms -> time ratio {:.2}",
                o / t
            );
        }
        json.insert("pytorch".into(), pt);
    }
    seq::seq_bench(3, &mut json)?;
    onnx::onnx_bench(&devs, 15, &mut json)?;
    let path = "bench-results.json";
    std::fs::write(
        path,
        serde_json::to_string_pretty(&serde_json::Value::Object(json)).unwrap_or_default(),
    )
    .ok();
    println!("\nwrote {path}");
    Ok(())
}
