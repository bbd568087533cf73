//! The bench's `--soak` mode: many SimpleCNN training steps with the process's resident memory,
//! the host pool and the GPU pool printed along the way, to show that memory stays flat.

use super::{sync, train_step, usage};
use std::sync::Arc;
use std::time::Instant;
use wgtorch::backend::cpu::pool;
use wgtorch::data::{DataLoader, Digits};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::ModuleExt;
use wgtorch::optim::Adam;
use wgtorch::{Device, Result};

/// Resident memory of this process in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// What a soak watches: resident memory, the host pool's cached bytes, the GPU pool's bytes in
/// use and cached.
#[derive(Clone, Copy)]
struct Memory {
    rss: u64,
    host_pool: u64,
    gpu_in_use: u64,
    gpu_cached: u64,
}

impl Memory {
    fn now(dev: &Device) -> Result<Memory> {
        sync(dev)?;
        let gpu = match dev {
            Device::Gpu(n) => wgtorch::backend::gpu::context(*n)?.stats(),
            Device::Cpu => Default::default(),
        };
        Ok(Memory {
            rss: rss_bytes(),
            host_pool: pool::stats().cached_bytes as u64,
            gpu_in_use: gpu.bytes_in_use,
            gpu_cached: gpu.bytes_cached,
        })
    }
    fn fields(&self) -> [u64; 4] {
        [self.rss, self.host_pool, self.gpu_in_use, self.gpu_cached]
    }
}

/// `--soak`: `steps` SimpleCNN training steps of batch `batch` on `dev`, memory printed after
/// warm-up, every tenth of the run and at the end.
pub(crate) fn soak(dev: &Device, steps: usize, batch: usize) -> Result<()> {
    let mib = |b: u64| format!("{:.1}", b as f64 / (1 << 20) as f64);
    wgtorch::manual_seed(0);
    let model = SimpleCnn::new(dev)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let loader = DataLoader::new(Arc::new(Digits::load()?), batch, dev)?
        .shuffle(0)
        .drop_last(true);
    if loader.is_empty() {
        return Err(usage(format!(
            "--batch {batch} is larger than the data set"
        )));
    }
    let mut batches = (0..).flat_map(|e| loader.epoch(e));
    let mut step = || -> Result<()> {
        let (x, y) = batches.next().ok_or_else(|| usage("no batches".into()))??;
        train_step(&model, &mut opt, &x, &y)
    };
    let warm = (steps / 20).clamp(1, 50);
    for _ in 0..warm {
        step()?;
    }
    println!(
        "\nsoak on {}: {steps} SimpleCNN steps, batch {batch}, Adam (after {warm} warm-up steps)",
        dev.describe()
    );
    println!("| step | ms/step | RSS (MiB) | host pool (MiB) | GPU pool in use (MiB) | GPU pool cached (MiB) |");
    println!("|---|---|---|---|---|---|");
    let row = |i: usize, ms: Option<f64>, m: &Memory| {
        let [a, b, c, d] = m.fields().map(mib);
        let ms = ms.map_or("-".into(), |t| format!("{t:.1}"));
        println!("| {i} | {ms} | {a} | {b} | {c} | {d} |");
    };
    let start = Memory::now(dev)?;
    row(0, None, &start);
    let every = (steps / 10).max(1);
    let (mut t0, mut last) = (Instant::now(), 0);
    for i in 1..=steps {
        step()?;
        if i % every == 0 || i == steps {
            let ms = t0.elapsed().as_secs_f64() * 1e3 / (i - last) as f64;
            row(i, Some(ms), &Memory::now(dev)?);
            (t0, last) = (Instant::now(), i);
        }
    }
    let end = Memory::now(dev)?;
    let growth = |a: u64, b: u64| match a {
        0 if b == 0 => "0 B (flat)".to_string(),
        0 => format!("+{} MiB", mib(b)),
        _ => format!("{:+.2}%", (b as f64 - a as f64) / a as f64 * 100.0),
    };
    let [r, h, u, c] = [0, 1, 2, 3].map(|k| growth(start.fields()[k], end.fields()[k]));
    println!("growth after warm-up: RSS {r}, host pool {h}, GPU pool in use {u}, cached {c}");
    Ok(())
}
