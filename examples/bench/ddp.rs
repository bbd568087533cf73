//! `bench --ddp`: the SimpleCNN training step on 1 rank (no DDP) and on 2 ranks under
//! `mpirun` (DDP, each rank one thread and its own batch of 64), with the all-reduce time per
//! step and how much of it the backward pass hides, next to PyTorch's DDP (Gloo, 1 thread per
//! rank) on the same machine from `bench/pytorch_bench.py --ddp`. Needs `--features mpi`.

use std::process::Command;
use std::time::Instant;
use wgtorch::distributed::{self as dist, DdpOptions, DistributedDataParallel};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::{Device, Result, Tensor};

/// One configuration run under mpirun: rank 0's JSON line.
fn launch(np: usize, plain: bool, bucket_mb: f64, steps: usize) -> Result<serde_json::Value> {
    let exe = std::env::current_exe().map_err(|e| wgtorch::Error::msg(e.to_string()))?;
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &np.to_string(),
    ])
    .args(["--mca", "btl", "self,vader", "--bind-to", "core"])
    .arg(exe)
    .args(["--ddp-worker", "--steps", &steps.to_string()])
    .args(["--bucket-mb", &bucket_mb.to_string()])
    .env("RAYON_NUM_THREADS", "1");
    if plain {
        cmd.arg("--plain");
    }
    let out = cmd
        .output()
        .map_err(|e| wgtorch::Error::msg(format!("mpirun (Open MPI) not found: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with('{'));
    match (out.status.success(), line) {
        (true, Some(l)) => serde_json::from_str(l).map_err(|e| wgtorch::Error::msg(e.to_string())),
        _ => Err(wgtorch::Error::msg(format!(
            "mpirun -np {np} failed: {}\n{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ))),
    }
}

/// What each rank runs (`--ddp-worker`): `steps` timed SimpleCNN steps after 3 warm-up ones.
pub fn worker(steps: usize, plain: bool, bucket_mb: f64) -> Result<()> {
    let pg = dist::init_process_group()?;
    let dev = Device::Cpu;
    wgtorch::manual_seed(0);
    let x = Tensor::randn([64, 3, 32, 32], &dev)?;
    let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64], &dev)?;
    let model = SimpleCnn::new(&dev)?;
    let ddp = if plain {
        None
    } else {
        let opts = DdpOptions {
            bucket_cap_mb: bucket_mb,
            ..Default::default()
        };
        Some(DistributedDataParallel::new_with(
            SimpleCnn::new(&dev)?,
            opts,
        )?)
    };
    let params = match &ddp {
        Some(d) => d.module().parameters(),
        None => model.parameters(),
    };
    let mut opt = Adam::new(params, 1e-3)?;
    let mut times = Vec::new();
    for i in 0..steps + 3 {
        if i == 3 {
            dist::barrier()?;
            if let Some(d) = &ddp {
                d.take_comm_stats();
            }
        }
        let t0 = Instant::now();
        let out = match &ddp {
            Some(d) => d.forward(&x)?,
            None => model.forward(&x)?,
        };
        let loss = F::cross_entropy(&out, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        loss.item()?;
        if i >= 3 {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    let stats = ddp
        .as_ref()
        .map(|d| d.take_comm_stats())
        .unwrap_or_default();
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e3 / steps as f64;
    if pg.rank() == 0 {
        println!(
            "{}",
            serde_json::json!({
                "ranks": pg.world_size(),
                "step_ms": times[times.len() / 2] * 1e3,
                "all_reduce_ms": per(stats.all_reduce_time),
                "exposed_ms": per(stats.exposed_time),
                "copy_ms": per(stats.copy_time),
                "overlap": stats.overlap(),
                "buckets": ddp.as_ref().map_or(0, |d| d.buckets().len()),
            })
        );
    }
    Ok(())
}

/// The `--ddp` table.
pub fn bench(steps: usize, pytorch: Option<serde_json::Value>) -> Result<()> {
    let one = launch(1, true, 25.0, steps)?;
    let base = one["step_ms"].as_f64().unwrap_or(f64::NAN);
    println!(
        "SimpleCNN training step, batch 64 per rank, 1 thread per rank, {steps} steps (median)"
    );
    println!("| ranks | buckets | step (ms) | img/s | scaling efficiency | all-reduce ms/step | hidden behind backward | PyTorch DDP (Gloo) step (ms) | PyTorch efficiency |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let pt1 = pytorch
        .as_ref()
        .and_then(|p| p["one_rank_step_ms"].as_f64());
    let pt2 = pytorch
        .as_ref()
        .and_then(|p| p["two_rank_step_ms"].as_f64());
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    println!(
        "| 1 (no DDP) | - | {base:.1} | {:.0} | - | - | - | {} | - |",
        64e3 / base,
        fmt(pt1)
    );
    let mut json = serde_json::Map::new();
    json.insert("one_rank".into(), one.clone());
    for bucket_mb in [25.0, 1.0] {
        let two = launch(2, false, bucket_mb, steps)?;
        let ms = two["step_ms"].as_f64().unwrap_or(f64::NAN);
        // Weak scaling: twice the samples per step; efficiency = time(1) / time(2).
        let eff = base / ms;
        let pt = if bucket_mb == 25.0 { pt2 } else { None };
        let pt_eff = match (pt1, pt) {
            (Some(a), Some(b)) => format!("{:.0}%", a / b * 100.0),
            _ => "-".into(),
        };
        println!(
            "| 2 | {} × ≤{bucket_mb} MiB | {ms:.1} | {:.0} | {:.0}% | {:.2} | {:.0}% | {} | {pt_eff} |",
            two["buckets"],
            2.0 * 64e3 / ms,
            eff * 100.0,
            two["all_reduce_ms"].as_f64().unwrap_or(f64::NAN),
            two["overlap"].as_f64().unwrap_or(0.0) * 100.0,
            fmt(pt),
        );
        json.insert(format!("two_ranks_bucket_{bucket_mb}mb"), two);
    }
    if let Some(p) = pytorch {
        json.insert("pytorch".into(), p);
    }
    let path = "bench-ddp-results.json";
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(json)).unwrap_or_default();
    std::fs::write(path, text).ok();
    println!("\nwrote {path}");
    Ok(())
}
