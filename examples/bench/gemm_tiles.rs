//! The GEMM tiles the tuner chose on the GPU (`wgtorch::backend::gpu::tune`): one row per
//! tuned bucket (kernel, shape rounded up to powers of two), with the GEMM that tuned it, the
//! tile chosen, and the default's and the chosen tile's GFLOP/s as the tuner measured them.

use wgtorch::backend::gpu::{kernels::Tile, tune};
use wgtorch::{Device, Result};

/// Where the bench keeps its tuning cache (its own, so that a run starts from an empty one and
/// the cold-start rows can measure both an empty and a warm cache).
pub fn cache_dir() -> std::path::PathBuf {
    std::path::Path::new("target").join("bench-gemm-tiles")
}

/// Start this process with an empty cache of its own and room to tune every GEMM it meets.
pub fn start() {
    let dir = cache_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("WGTORCH_CACHE_DIR", &dir);
    tune::set_tuning_budget(std::time::Duration::from_secs(300));
}

/// Run `f` until the tuner is done with the GEMMs it launches on `dev` (nothing on the CPU): wait
/// for the background compiles, run again, until two runs in a row tune nothing new (30 at
/// most), so that the timed runs after it all run tuned.
pub fn settle(dev: &Device, mut f: impl FnMut() -> Result<()>) -> Result<()> {
    let Device::Gpu(n) = *dev else {
        return Ok(());
    };
    let mut unchanged = 0;
    for _ in 0..30 {
        let before = tune::tuned_gemm_tiles(n).len();
        tune::wait_for_compiles(n)?;
        f()?;
        unchanged = if tune::tuned_gemm_tiles(n).len() == before {
            unchanged + 1
        } else {
            0
        };
        if unchanged == 2 {
            break;
        }
    }
    Ok(())
}

/// One (tuned) step of `step` on `gpu` under the profiler: its kernels by GPU time, and how much
/// of the step they fill.
pub fn step_split(gpu: &Device, mut step: impl FnMut() -> Result<()>) -> Result<()> {
    use wgtorch::profiler::{profile, ProfileOptions, ProfilerActivity, SortBy};
    let opts = ProfileOptions {
        activities: ProfilerActivity::ALL,
        ..Default::default()
    };
    let t0 = std::time::Instant::now();
    let prof = profile(opts, |_| step())?;
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    let avg = prof.key_averages();
    println!(
        "\nA tuned SimpleCNN step on {} by kernel (one profiled step: {:.0} ms of kernels in {wall:.0} ms):",
        gpu.describe(),
        avg.self_gpu_time_total_ns() as f64 / 1e6
    );
    println!("{}", avg.table(SortBy::SelfGpuTimeTotal, 12));
    Ok(())
}

/// The table of what was tuned on GPU 0, into `json` too.
pub fn rows(json: &mut serde_json::Map<String, serde_json::Value>) {
    let tuned = tune::tuned_gemm_tiles(0);
    if tuned.is_empty() {
        return;
    }
    println!("\n| GEMM bucket (kernel, m, n, k, batches) | tuned on [m, n, k, batches] | tile (default) | default GFLOP/s | tuned GFLOP/s | speed-up |");
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    let mut clocks = std::collections::BTreeSet::new();
    for (key, t) in tuned {
        let flop = 2.0 * t.dims.iter().product::<usize>() as f64;
        let us = |tile: Tile| t.times_us.iter().find(|c| c.0 == tile).and_then(|c| c.1);
        // The tuner times the adapter's default first.
        let Some(default) = t.times_us.first().map(|c| c.0) else {
            continue;
        };
        let (Some(d), Some(c)) = (us(default), us(t.tile)) else {
            continue;
        };
        let gf = |us: f64| flop / us / 1e3;
        println!(
            "| {key} | {:?} | {} ({default}) | {:.2} | {:.2} | {:.2}x |",
            t.dims,
            t.tile,
            gf(d),
            gf(c),
            d / c
        );
        rows.push(serde_json::json!({"bucket": key, "dims": t.dims, "tile": t.tile.to_string(), "default_us": d, "tuned_us": c, "timestamps": t.timestamps}));
        clocks.insert(if t.timestamps {
            "timestamp queries (the kernels' own time)"
        } else {
            "the wall clock (no timestamp queries)"
        });
    }
    println!(
        "timed by {}",
        clocks.into_iter().collect::<Vec<_>>().join(" and ")
    );
    json.insert("gpu_gemm_tiles".into(), rows.into());
}
