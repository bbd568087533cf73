//! The GEMM tiles the tuner chose on a CPU adapter (`wgtorch::backend::gpu::tune`): one row per
//! tuned bucket (kernel, shape rounded up to powers of two), with the GEMM that tuned it, the
//! tile chosen, and the default's and the chosen tile's GFLOP/s as the tuner measured them.

use wgtorch::backend::gpu::{kernels::Tile, tune};

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

/// The table of what was tuned on GPU 0, into `json` too.
pub fn rows(json: &mut serde_json::Map<String, serde_json::Value>) {
    let tuned = tune::tuned_gemm_tiles(0);
    if tuned.is_empty() {
        return;
    }
    println!("\n| GEMM bucket (kernel, m, n, k, batches) | tuned on [m, n, k, batches] | tile | default {} GFLOP/s | tuned GFLOP/s | speed-up |", Tile::DEFAULT);
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (key, t) in tuned {
        let flop = 2.0 * t.dims.iter().product::<usize>() as f64;
        let us = |tile: Tile| t.times_us.iter().find(|c| c.0 == tile).and_then(|c| c.1);
        let (Some(d), Some(c)) = (us(Tile::DEFAULT), us(t.tile)) else {
            continue;
        };
        let gf = |us: f64| flop / us / 1e3;
        println!(
            "| {key} | {:?} | {} | {:.2} | {:.2} | {:.2}x |",
            t.dims,
            t.tile,
            gf(d),
            gf(c),
            d / c
        );
        rows.push(serde_json::json!({"bucket": key, "dims": t.dims, "tile": t.tile.to_string(), "default_us": d, "tuned_us": c}));
    }
    json.insert("gpu_gemm_tiles".into(), rows.into());
}
