//! Throughput table: matmul GFLOP/s (f32, 256 to 1024) and elementwise GB/s, on the CPU and on the
//! GPU adapter found. `cargo run --release --example bench` (median of several runs each).

use std::time::Instant;
use wgtorch::{Device, Result, Tensor};

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
    Ok(())
}
