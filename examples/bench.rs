//! Throughput table: matmul GFLOP/s (f32, 256 to 1024) and elementwise GB/s, on the CPU and on the
//! GPU adapter found. `cargo run --release --example bench` (median of several runs each).

use std::time::Instant;
use wgtorch::amp::{self, GradScaler};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, Module, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::{DType, Device, Result, Tensor};

/// Median SimpleCNN training step (batch 64, Adam) and, on a GPU, the pool's peak bytes during it.
fn cnn_step(dev: &Device, half: Option<DType>, reps: usize) -> Result<(f64, Option<u64>)> {
    wgtorch::manual_seed(0);
    let model = SimpleCnn::new(dev)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let mut scaler = GradScaler::new();
    scaler.enabled = half == Some(DType::F16);
    let x = Tensor::randn([64, 3, 32, 32], dev)?;
    let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i32>>(), [64], dev)?;
    let ctx = match dev {
        Device::Gpu(n) => Some(wgtorch::backend::gpu::context(*n)?),
        Device::Cpu => None,
    };
    let mut step = || -> Result<()> {
        let loss = {
            let _ac = half.map(|h| amp::autocast(dev, h));
            F::cross_entropy(&model.forward(&x)?, &y, F::Reduction::Mean, -100, 0.0)?
        };
        opt.zero_grad();
        scaler.scale(&loss)?.backward()?;
        scaler.step(&mut opt)?;
        scaler.update();
        loss.item()?;
        Ok(())
    };
    step()?;
    if let Some(c) = &ctx {
        c.synchronize()?;
        c.reset_peak();
    }
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        step()?;
        ts.push(t0.elapsed().as_secs_f64());
    }
    Ok((median(ts), ctx.map(|c| c.stats().peak_bytes)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time(dev: &Device, reps: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<f64> {
    f()?.sum_all()?.item()?; // warm-up: pipelines compiled, buffers pooled
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let y = f()?;
        if let Device::Gpu(n) = dev {
            let _ = y;
            wgtorch::backend::gpu::context(*n)?.synchronize()?;
        }
        ts.push(t0.elapsed().as_secs_f64());
    }
    Ok(median(ts))
}

fn main() -> Result<()> {
    let mut devs = vec![Device::Cpu];
    if let Ok(g) = Device::gpu() {
        devs.push(g);
    }
    println!("| device | op | size | time (ms) | throughput |");
    println!("|---|---|---|---|---|");
    // The CPU GEMM crate was picked by measuring: gemm (used) against matrixmultiply, f32, 2 threads.
    for n in [256usize, 512, 1024] {
        let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut c = vec![0f32; n * n];
        let mut ts = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            // SAFETY: row-major n×n buffers of the right length.
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    n,
                    n,
                    1.0,
                    a.as_ptr(),
                    n as isize,
                    1,
                    a.as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            ts.push(t0.elapsed().as_secs_f64());
        }
        let t = median(ts);
        println!("| cpu (matrixmultiply crate, for comparison) | matmul f32 | {n}³ | {:.2} | {:.1} GFLOP/s |", t * 1e3, 2.0 * (n * n * n) as f64 / t / 1e9);
    }
    for dev in &devs {
        let name = dev.describe();
        for n in [256usize, 512, 1024] {
            let a = Tensor::randn([n, n], dev)?;
            let b = Tensor::randn([n, n], dev)?;
            let reps = if dev.is_gpu() && n == 1024 { 3 } else { 7 };
            let t = time(dev, reps, || a.matmul(&b))?;
            let gflops = 2.0 * (n * n * n) as f64 / t / 1e9;
            println!(
                "| {name} | matmul f32 | {n}³ | {:.2} | {gflops:.1} GFLOP/s |",
                t * 1e3
            );
        }
        let n = 1 << 22;
        let a = Tensor::randn([n], dev)?;
        let b = Tensor::randn([n], dev)?;
        let t = time(dev, 7, || a.add(&b))?;
        println!(
            "| {name} | add f32 | 2^22 | {:.2} | {:.1} GB/s |",
            t * 1e3,
            3.0 * 4.0 * n as f64 / t / 1e9
        );
        let t = time(dev, 7, || a.exp())?;
        println!(
            "| {name} | exp f32 | 2^22 | {:.2} | {:.1} GB/s |",
            t * 1e3,
            2.0 * 4.0 * n as f64 / t / 1e9
        );
    }
    println!();
    println!(
        "| device | SimpleCNN train step (batch 64, Adam) | ms/step | img/s | pool peak (MiB) |"
    );
    println!("|---|---|---|---|---|");
    for dev in &devs {
        let reps = if dev.is_gpu() { 3 } else { 5 };
        for (label, half) in [
            ("f32", None),
            ("autocast f16 + GradScaler", Some(DType::F16)),
            ("autocast bf16", Some(DType::BF16)),
        ] {
            let (t, peak) = cnn_step(dev, half, reps)?;
            let peak = peak
                .map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
                .unwrap_or_else(|| "-".into());
            println!(
                "| {} | {label} | {:.1} | {:.0} | {peak} |",
                dev.describe(),
                t * 1e3,
                64.0 / t
            );
        }
    }
    Ok(())
}
