//! The main job: train the SimpleCNN. With no arguments it trains on the embedded handwritten
//! digits (brought to 3×32×32) on the best device; `--data DIR` trains on CIFAR-10 instead.
//!
//! `cargo run --release --example train_cnn -- --help`
//!
//! Data-parallel over MPI (built with `--features mpi`):
//! `mpirun -np 2 target/release/examples/train_cnn --ddp` (each rank trains on its share of
//! every batch; only rank 0 prints epochs and writes checkpoints).

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use wgtorch::amp::{self, GradScaler};
use wgtorch::compile_module;
use wgtorch::data::{random_split, Cifar10, DataLoader, Dataset, Digits};
#[cfg(feature = "mpi")]
use wgtorch::distributed::{self as dist, DistributedDataParallel, ReduceOp};
use wgtorch::io::Checkpoint;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::profiler::{self, ProfileOptions, Profiler, Schedule, SortBy};
use wgtorch::{DType, Device, Error, Result, Tensor};

const CIFAR_URL: &str = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
const CIFAR_SHA256: &str = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd";

#[derive(Parser, Debug)]
#[command(about = "Train the SimpleCNN (digits by default, CIFAR-10 with --data)")]
struct Args {
    /// CIFAR-10 binary directory (data_batch_*.bin, test_batch.bin); digits when absent.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Download CIFAR-10 into --data first (checksum verified).
    #[arg(long)]
    download: bool,
    /// Archive URL for --download.
    #[arg(long, default_value = CIFAR_URL)]
    url: String,
    /// cpu, gpu or auto.
    #[arg(long, default_value = "auto")]
    device: String,
    #[arg(long, default_value_t = 6)]
    epochs: usize,
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Save a checkpoint here after every epoch (atomically).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from this checkpoint.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Write a PNG of the loss and accuracy curves here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Mixed precision: autocast (f16 by default) with a GradScaler.
    #[arg(long)]
    amp: bool,
    /// Half type for --amp: f16 or bf16.
    #[arg(long, default_value = "f16")]
    amp_dtype: String,
    /// Stop an epoch after this many batches (quick runs and tests).
    #[arg(long)]
    max_batches: Option<usize>,
    /// Data-parallel over MPI: run under `mpirun -np N` (needs `--features mpi`). The batch
    /// size stays the global one: each of the N ranks takes batch-size / N of every batch.
    #[arg(long)]
    ddp: bool,
    /// Profile training steps 4 to 6 of the first epoch (after 2 idle steps and 1 warm-up
    /// step): print the profiler's table and write a Chrome trace here (open it in Perfetto).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// After training, export the model as ONNX here (opset 18, dynamic batch; atomically).
    #[arg(long)]
    export_onnx: Option<PathBuf>,
    /// Run the model's forward pass through `wgtorch::compile_module` (a checked graph per
    /// batch shape; backward and Adam as usual), and print what it compiled.
    #[arg(long)]
    compile: bool,
}

fn main() {
    let args = Args::parse();
    let ddp = args.ddp;
    if let Err(e) = run(args) {
        #[cfg(feature = "mpi")]
        if ddp && dist::is_initialized() {
            // The other ranks would wait for this one: end the whole job, naming this rank.
            eprintln!("rank {}: error: {e}", dist::rank().unwrap_or(0));
            dist::abort(1);
        }
        let _ = ddp;
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The model, alone or wrapped for data-parallel training.
enum Net {
    Plain(SimpleCnn),
    #[cfg(feature = "mpi")]
    Ddp(DistributedDataParallel<SimpleCnn>),
}

impl Net {
    fn module(&self) -> &SimpleCnn {
        match self {
            Net::Plain(m) => m,
            #[cfg(feature = "mpi")]
            Net::Ddp(d) => d.module(),
        }
    }
    fn module_mut(&mut self) -> &mut SimpleCnn {
        match self {
            Net::Plain(m) => m,
            #[cfg(feature = "mpi")]
            Net::Ddp(d) => d.module_mut(),
        }
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Net::Plain(m) => m.forward(x),
            #[cfg(feature = "mpi")]
            Net::Ddp(d) => d.forward(x),
        }
    }
}

/// This process's rank and the world size: (0, 1) without `--ddp`.
#[cfg(feature = "mpi")]
fn init_ddp(on: bool) -> Result<Option<dist::ProcessGroup>> {
    on.then(dist::init_process_group).transpose()
}
#[cfg(not(feature = "mpi"))]
fn init_ddp(on: bool) -> Result<Option<()>> {
    if on {
        return Err(Error::msg(
            "--ddp needs MPI: build with `cargo build --release --features mpi --example \
             train_cnn`, then run `mpirun -np 2 target/release/examples/train_cnn --ddp`",
        ));
    }
    Ok(None)
}

/// Whether GPU adapter `n` exists and is driven through the same API as adapter 0.
fn same_api_adapter(n: usize) -> bool {
    use wgtorch::backend::gpu::context;
    match (context(0), context(n)) {
        (Ok(a), Ok(b)) => a.backend() == b.backend(),
        _ => false,
    }
}

/// Sum `v` over the ranks (itself without `--ddp`).
fn global_sum(v: f64, pg_on: bool) -> Result<f64> {
    #[cfg(feature = "mpi")]
    if pg_on {
        let t = Tensor::from_vec(vec![v], [1], &Device::Cpu)?;
        dist::all_reduce(&t, ReduceOp::Sum)?;
        return t.item();
    }
    let _ = pg_on;
    Ok(v)
}

fn run(args: Args) -> Result<()> {
    if args.compile && args.ddp {
        return Err(Error::InvalidArgument {
            op: "--compile",
            msg: "compiled training runs in one process: drop --ddp or --compile".into(),
        });
    }
    let pg = init_ddp(args.ddp)?;
    #[cfg(feature = "mpi")]
    let (rank, world, local_rank, local_world) = pg.as_ref().map_or((0, 1, 0, 1), |p| {
        (
            p.rank(),
            p.world_size(),
            p.local_rank(),
            p.local_world_size(),
        )
    });
    #[cfg(not(feature = "mpi"))]
    let (rank, world, local_rank, local_world) = (0usize, 1usize, 0usize, 1usize);
    if pg.is_some() && std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // As torchrun sets OMP_NUM_THREADS: the ranks on one machine share its cores instead
        // of each starting a thread per core.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads((cores / local_world).max(1))
            .build_global();
    }
    let distributed = pg.is_some();
    let main_rank = rank == 0;
    let dev = match args.device.as_str() {
        "cpu" => Device::Cpu,
        // One rank per GPU: the machine's ranks take its adapters in turn, all adapter 0 when
        // there is only one (a later adapter on another API, such as GL, is the same GPU again).
        "gpu" if local_rank > 0 && same_api_adapter(local_rank) => Device::Gpu(local_rank),
        "gpu" => Device::gpu()?,
        "auto" => Device::best(),
        other => {
            return Err(Error::InvalidArgument {
                op: "--device",
                msg: format!("expected cpu, gpu or auto, got {other}"),
            })
        }
    };
    if distributed {
        println!("rank {rank} of {world}: device {}", dev.describe());
    } else {
        println!("device: {}", dev.describe());
    }
    wgtorch::manual_seed(args.seed);
    let (train, test): (Arc<dyn Dataset>, Arc<dyn Dataset>) = match &args.data {
        None => {
            let all: Arc<dyn Dataset> = Arc::new(Digits::load()?);
            let (tr, te) = random_split(all, 0.8, args.seed)?;
            if main_rank {
                println!(
                    "data: embedded digits, {} train / {} test (held-out 20%)",
                    tr.len(),
                    te.len()
                );
            }
            (Arc::new(tr), Arc::new(te))
        }
        Some(dir) => {
            let dir = if args.download {
                wgtorch::data::download_cifar10(&args.url, dir, Some(CIFAR_SHA256))?
            } else {
                dir.clone()
            };
            let (tr, te) = (Cifar10::new(&dir, true)?, Cifar10::new(&dir, false)?);
            println!(
                "data: CIFAR-10 from {}, {} train / {} test",
                dir.display(),
                tr.len(),
                te.len()
            );
            (Arc::new(tr), Arc::new(te))
        }
    };
    let loader = if distributed {
        if args.batch_size < world {
            return Err(Error::arg(
                "--batch-size",
                format!(
                    "{} is less than one sample per rank ({world} ranks)",
                    args.batch_size
                ),
            ));
        }
        // PyTorch's recipe: each rank takes its share of the global batch, from its share of
        // the data set (a DistributedSampler shuffled with the same seed on every rank).
        #[cfg(feature = "mpi")]
        {
            use wgtorch::data::{DistributedSampler, DistributedSamplerOptions};
            let opts = DistributedSamplerOptions {
                seed: args.seed,
                ..Default::default()
            };
            let sampler = DistributedSampler::new(train.len(), opts)?;
            DataLoader::new(train, args.batch_size / world, &dev)?.sampler(sampler)
        }
        #[cfg(not(feature = "mpi"))]
        unreachable!("init_ddp refused --ddp")
    } else {
        DataLoader::new(train, args.batch_size, &dev)?.shuffle(args.seed)
    };
    let test_loader = DataLoader::new(test.clone(), 256, &dev)?;

    let amp_dtype = match args.amp_dtype.as_str() {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        other => {
            return Err(Error::InvalidArgument {
                op: "--amp-dtype",
                msg: format!("expected f16 or bf16, got {other}"),
            })
        }
    };
    // bf16 has f32's range: PyTorch users run it without a scaler, and so do we.
    let mut scaler = GradScaler::new();
    scaler.enabled = args.amp && amp_dtype == DType::F16;
    let mut model = SimpleCnn::new(&dev)?;
    let mut start = 0;
    let mut history: Vec<(f64, f64)> = Vec::new();
    let mut resumed = None;
    if let Some(p) = &args.resume {
        let ck = Checkpoint::load(p, &dev)?;
        model.load_state_dict(&ck.model, true)?;
        wgtorch::with_default_generator(|g| g.set_state(ck.rng));
        start = ck.epoch;
        for e in 0..start {
            let get = |k: &str| {
                ck.metrics
                    .iter()
                    .find(|(n, _)| *n == format!("{k}.{e}"))
                    .map(|(_, v)| *v)
            };
            if let (Some(l), Some(a)) = (get("train_loss"), get("test_acc")) {
                history.push((l, a));
            }
        }
        if main_rank {
            println!("resumed from {} at epoch {start}", p.display());
        }
        resumed = Some(ck.optim);
    }
    #[cfg(feature = "mpi")]
    let mut model = if distributed {
        // Every rank starts from rank 0's weights (broadcast here).
        Net::Ddp(DistributedDataParallel::new(model)?)
    } else {
        Net::Plain(model)
    };
    #[cfg(not(feature = "mpi"))]
    let mut model = Net::Plain(model);
    let mut opt = Adam::new(model.module().parameters(), args.lr)?;
    if let Some(state) = &resumed {
        opt.load_state_dict(state)?;
    }
    if main_rank {
        println!(
            "model: SimpleCNN, {} parameters; Adam lr {}; batch {}{}",
            model.module().num_parameters(),
            args.lr,
            args.batch_size,
            if args.amp {
                format!(
                    "; autocast {amp_dtype}{}",
                    if scaler.enabled { " + GradScaler" } else { "" }
                )
            } else {
                String::new()
            }
        );
    }

    let mut prof = match &args.profile {
        Some(_) => Some(Profiler::start(ProfileOptions {
            record_shapes: true,
            profile_memory: true,
            schedule: Some(Schedule {
                wait: 2,
                warmup: 1,
                active: 3,
                repeat: 1,
                ..Default::default()
            }),
            ..Default::default()
        })?),
        None => None,
    };
    for epoch in start..args.epochs {
        model.module_mut().train();
        // Per epoch: the compiled module borrows the model, which the evaluation below switches
        // to eval mode (a new signature for any module whose forward depends on it).
        let fast = args.compile.then(|| compile_module(model.module()));
        let n_batches = args.max_batches.unwrap_or(usize::MAX).min(loader.len());
        let bar = if main_rank {
            ProgressBar::new(n_batches as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("epoch {msg} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(format!("{}/{}", epoch + 1, args.epochs));
        let t0 = Instant::now();
        let (mut loss_sum, mut seen): (Option<Tensor>, usize) = (None, 0);
        for batch in loader.epoch(epoch).take(n_batches) {
            let (x, y) = batch?;
            let _step = profiler::record_function("train_step");
            let loss = {
                let _ac = args.amp.then(|| amp::autocast(&dev, amp_dtype));
                let logits = match &fast {
                    Some(f) => f.forward(&x)?,
                    None => model.forward(&x)?,
                };
                F::cross_entropy(&logits, &y)?
            };
            opt.zero_grad();
            scaler.scale(&loss)?.backward()?;
            scaler.step(&mut opt)?;
            scaler.update()?;
            let l = loss.detach().mul_scalar(y.numel() as f64)?;
            loss_sum = Some(match loss_sum {
                Some(s) => s.add(&l)?,
                None => l,
            });
            seen += y.numel();
            bar.inc(1);
            drop(_step);
            if let Some(p) = &prof {
                p.step();
            }
        }
        if let (Some(p), Some(path)) = (prof.take(), &args.profile) {
            let p = p.stop();
            if main_rank {
                bar.suspend(|| report_profile(&p, path))?;
            }
        }
        let loss_sum = match loss_sum {
            Some(s) => s.item()?,
            None => f64::NAN,
        };
        // Over every rank's samples.
        let seen = global_sum(seen as f64, distributed)?;
        let train_loss = global_sum(loss_sum, distributed)? / seen.max(1.0);
        let secs = t0.elapsed().as_secs_f64();
        bar.finish_and_clear();
        if let (Some(f), true) = (fast, main_rank) {
            let s = f.stats();
            println!(
                "compiled: {} graphs, {} cache hits, {} eager calls{}",
                s.graphs,
                s.cache_hits,
                s.eager_calls,
                f.explain()
                    .eager
                    .first()
                    .map(|(_, why)| format!(" ({why})"))
                    .unwrap_or_default()
            );
        }
        model.module_mut().eval();
        let acc = accuracy(model.module(), &test_loader, args.amp.then_some(amp_dtype))?;
        #[cfg(feature = "mpi")]
        let comm = match &model {
            Net::Ddp(d) => {
                let s = d.take_comm_stats();
                format!(
                    "  all-reduce {:.1} ms/step, {:.0}% hidden behind backward",
                    s.all_reduce_time.as_secs_f64() * 1e3 / s.steps.max(1) as f64,
                    s.overlap() * 100.0
                )
            }
            Net::Plain(_) => String::new(),
        };
        #[cfg(not(feature = "mpi"))]
        let comm = String::new();
        if !main_rank {
            history.push((train_loss, acc));
            continue; // only rank 0 reports and writes checkpoints
        }
        println!(
            "epoch {:>2}/{}: train loss {train_loss:.4}  test acc {:.2}%  {:.0} img/s{comm}",
            epoch + 1,
            args.epochs,
            acc * 100.0,
            seen / secs
        );
        history.push((train_loss, acc));
        if let Some(p) = &args.checkpoint {
            let mut metrics = Vec::new();
            for (e, (l, a)) in history.iter().enumerate() {
                metrics.push((format!("train_loss.{e}"), *l));
                metrics.push((format!("test_acc.{e}"), *a));
            }
            Checkpoint {
                model: model.module().state_dict(),
                optim: opt.state_dict(),
                scheduler: vec![],
                epoch: epoch + 1,
                rng: wgtorch::with_default_generator(|g| g.state()),
                metrics,
            }
            .save(p)?;
        }
        if let Some(p) = &args.plot {
            plot(p, &history)?;
        }
    }
    if let (Some(path), true) = (&args.export_onnx, main_rank) {
        let m = model.module();
        let example = Tensor::zeros([1, 3, 32, 32], &dev)?;
        let opts = wgtorch::onnx::ExportOptions::default();
        wgtorch::onnx::export_with(m, &[example], |xs| Ok(vec![m.forward(&xs[0])?]), path, opts)?;
        println!("exported the model to {} (ONNX opset 18, input.0 [batch, 3, 32, 32] -> output.0 [batch, 10])", path.display());
    }
    Ok(())
}

fn accuracy(model: &SimpleCnn, loader: &DataLoader, amp: Option<DType>) -> Result<f64> {
    let _ac = amp.map(|d| amp::autocast(&loader.device, d));
    let _g = wgtorch::no_grad();
    let mut correct: Option<Tensor> = None;
    let mut total = 0;
    for batch in loader.epoch(0) {
        let (x, y) = batch?;
        let hits = model
            .forward(&x)?
            .argmax(Some(1), false)?
            .eq(&y)?
            .sum_all()?;
        correct = Some(match correct {
            Some(c) => c.add(&hits)?,
            None => hits,
        });
        total += y.numel();
    }
    Ok(correct.map(|c| c.item()).transpose()?.unwrap_or(0.0) / total.max(1) as f64)
}

/// Loss (left) and accuracy (right) curves as a PNG, drawn with the image crate.
fn plot(path: &std::path::Path, history: &[(f64, f64)]) -> Result<()> {
    let (w, h) = (640u32, 260u32);
    let mut img = image::RgbImage::from_pixel(w, h, image::Rgb([255, 255, 255]));
    let panels = [
        (10u32, [200u8, 40, 40], 0usize),
        (330u32, [40, 90, 200], 1usize),
    ];
    for (x0, color, which) in panels {
        let (pw, ph, y0) = (300u32, 220u32, 20u32);
        for x in x0..x0 + pw {
            img.put_pixel(x, y0 + ph, image::Rgb([0, 0, 0]));
        }
        for y in y0..=y0 + ph {
            img.put_pixel(x0, y, image::Rgb([0, 0, 0]));
        }
        let vals: Vec<f64> = history
            .iter()
            .map(|p| if which == 0 { p.0 } else { p.1 })
            .collect();
        let (lo, hi) = if which == 1 {
            (0.0, 1.0)
        } else {
            (0.0, vals.iter().cloned().fold(1e-9, f64::max))
        };
        let pt = |i: usize, v: f64| {
            let x = x0 as f64
                + if vals.len() > 1 {
                    i as f64 / (vals.len() - 1) as f64
                } else {
                    0.5
                } * (pw - 1) as f64;
            let y = (y0 + ph) as f64 - ((v - lo) / (hi - lo)).clamp(0.0, 1.0) * (ph - 1) as f64;
            (x, y)
        };
        for i in 0..vals.len() {
            let (xa, ya) = pt(i, vals[i]);
            let (xb, yb) = if i + 1 < vals.len() {
                pt(i + 1, vals[i + 1])
            } else {
                (xa, ya)
            };
            for s in 0..=100 {
                let t = s as f64 / 100.0;
                let (x, y) = ((xa + (xb - xa) * t) as i64, (ya + (yb - ya) * t) as i64);
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (-1, 0), (0, -1)] {
                    let (px, py) = (x + dx, y + dy);
                    if px >= 0 && py >= 0 && (px as u32) < w && (py as u32) < h {
                        img.put_pixel(px as u32, py as u32, image::Rgb(color));
                    }
                }
            }
        }
    }
    let mut bytes = Vec::new();
    img.write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )
    .map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    wgtorch::io::write_atomic(path, &bytes)
}

/// The profiler's table (by total CPU time, then grouped by input shape, then by GPU time on a
/// GPU) and its trace.
fn report_profile(p: &profiler::Profile, path: &std::path::Path) -> Result<()> {
    let steps = p
        .events()
        .iter()
        .filter(|e| e.name.starts_with("ProfilerStep#"))
        .count();
    if steps == 0 {
        return Err(Error::msg(
            "--profile records steps 4 to 6 of the first epoch: run at least 4 batches",
        ));
    }
    println!(
        "profile of {steps} training steps:\n{}",
        p.key_averages().table(SortBy::CpuTimeTotal, 20)
    );
    println!(
        "by input shape:\n{}",
        p.key_averages_by_input_shape()
            .table(SortBy::SelfCpuTimeTotal, 12)
    );
    if !p.gpu_kernels().is_empty() || !p.gpu_time_unavailable().is_empty() {
        println!(
            "by self GPU time (the kernels, and the ops that launched them):\n{}",
            p.key_averages().table(SortBy::SelfGpuTimeTotal, 12)
        );
    }
    p.export_chrome_trace(path)?;
    println!("trace written to {} (open it in Perfetto)", path.display());
    Ok(())
}
