//! Long runs stay flat: the host pool, the GPU pool and the process's memory do not grow step by
//! step once a training loop is warm.
//!
//! The pools are process-wide and the other tests of this binary allocate in parallel, so each
//! test here runs its body alone in a child process of this binary (`alone`), on one rayon thread
//! (how many column buffers a convolution's parallel tasks hold at once depends on scheduling;
//! with one thread every step allocates exactly the same).

use crate::common;
use std::process::Command;
use wgtorch::backend::cpu::pool;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::{Device, Result, Tensor};

const CHILD: &str = "WGTORCH_TEST_ALONE";

/// True in the child process running `test` alone; in the parent, runs it there (one rayon
/// thread), fails if it failed, and returns false.
fn alone(test: &str) -> bool {
    if std::env::var(CHILD).is_ok_and(|t| t == test) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{test} (alone): {text}"
    );
    false
}

/// Resident memory of this process, from /proc (None elsewhere).
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    kb.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

/// A SimpleCNN with Adam on `dev` and a fixed batch of `batch` images; each call of the returned
/// closure is one training step.
fn trainer(dev: &Device, batch: usize) -> Result<impl FnMut() -> Result<()>> {
    wgtorch::manual_seed(0);
    let model = SimpleCnn::new(dev)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let x = Tensor::randn([batch, 3, 32, 32], dev)?;
    let y = Tensor::from_vec((0..batch as i32).map(|i| i % 10).collect(), [batch], dev)?;
    Ok(move || {
        let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        loss.item()?;
        Ok(())
    })
}

/// Defect: the CPU pool grew by 73,728 bytes (conv2.weight's gradient, allocated outside the pool
/// and returned to it) every training step, 62.5 -> 205.9 MB RSS over 2,000 steps.
#[test]
fn cpu_pool_flat_over_training_steps() -> Result<()> {
    if !alone("leaks::cpu_pool_flat_over_training_steps") {
        return Ok(());
    }
    let (warm, steps) = (10, 100);
    let mut step = trainer(&Device::Cpu, 2)?;
    for _ in 0..warm {
        step()?;
    }
    let (p0, rss0) = (pool::stats(), rss_bytes());
    for _ in 0..steps {
        step()?;
    }
    let (p1, rss1) = (pool::stats(), rss_bytes());
    eprintln!("pool {p0:?} -> {p1:?}; rss {rss0:?} -> {rss1:?}");
    // The leak added 100 * 73,728 bytes here.
    assert_eq!(
        p1.cached_bytes, p0.cached_bytes,
        "host pool grew over {steps} steps: {p0:?} -> {p1:?}"
    );
    assert_eq!(
        (p1.misses, p1.released),
        (p0.misses, p0.released),
        "host pool allocated or dropped buffers after warm-up: {p0:?} -> {p1:?}"
    );
    if let (Some(a), Some(b)) = (rss0, rss1) {
        assert!(b <= a + (4 << 20), "RSS grew {a} -> {b} over {steps} steps");
    }
    Ok(())
}

/// Buffers the pool did not lend (`Tensor::from_vec`, e.g. a data loader's batch every step) go
/// back to the allocator instead of piling up in the pool.
#[test]
fn cpu_pool_releases_buffers_it_did_not_lend() -> Result<()> {
    if !alone("leaks::cpu_pool_releases_buffers_it_did_not_lend") {
        return Ok(());
    }
    let n = 1 << 16;
    let before = pool::stats();
    for _ in 0..20 {
        drop(Tensor::from_vec(vec![1f32; n], [n], &Device::Cpu)?);
    }
    let after = pool::stats();
    assert_eq!(after.cached_bytes, before.cached_bytes, "{after:?}");
    assert_eq!(after.released - before.released, 20, "{after:?}");
    // Buffers the pool lent still come back and are reused.
    drop(Tensor::full([n], 2.0, &Device::Cpu)?);
    assert_eq!(pool::stats().cached_bytes, before.cached_bytes + n * 4);
    let hits = pool::stats().hits;
    let t = Tensor::full([n], 3.0, &Device::Cpu)?;
    assert_eq!(pool::stats().hits, hits + 1);
    assert!(t.to_vec::<f32>()?.iter().all(|&v| v == 3.0));
    Ok(())
}

/// The GPU pool (bytes in use and cached) is flat over training steps on the adapter too.
#[test]
fn gpu_pool_flat_over_training_steps() -> Result<()> {
    let Some(dev) = common::gpu() else {
        return Ok(());
    };
    if !alone("leaks::gpu_pool_flat_over_training_steps") {
        return Ok(());
    }
    let Device::Gpu(n) = dev else { return Ok(()) };
    let ctx = wgtorch::backend::gpu::context(n)?;
    let mut step = trainer(&dev, 2)?;
    for _ in 0..3 {
        step()?;
    }
    ctx.synchronize()?;
    let (g0, p0) = (ctx.stats(), pool::stats());
    for _ in 0..10 {
        step()?;
    }
    ctx.synchronize()?;
    let (g1, p1) = (ctx.stats(), pool::stats());
    assert_eq!(g1.bytes_in_use, g0.bytes_in_use, "GPU bytes in use grew");
    assert!(
        g1.bytes_in_use + g1.bytes_cached <= g0.bytes_in_use + g0.bytes_cached,
        "GPU pool grew: {g0:?} -> {g1:?}"
    );
    assert!(
        p1.cached_bytes <= p0.cached_bytes,
        "host pool grew during GPU steps: {p0:?} -> {p1:?}"
    );
    Ok(())
}
