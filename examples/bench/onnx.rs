//! The bench's ONNX inference rows: ResNet-18 at 1×3×224×224 and a transformer encoder (4 layers,
//! d_model 256, 4 heads, ff 2048, batch 1, seq 128) loaded with `wgtorch::onnx` and run on the
//! CPU and the GPU adapter, next to onnxruntime's CPU latency at the same thread count
//! (`pytorch_bench.py --onnx`, in the same run), with the largest difference between wgtorch's
//! outputs and onnxruntime's (and PyTorch's reference) printed (`bench --onnx`, `--onnx-case`).
//!
//! Latency is host inputs to host outputs (a GPU run includes the upload and the readback, as
//! onnxruntime's includes taking and returning numpy arrays): the median of `reps` runs after
//! warm-up runs (the GPU's first run compiles its pipelines).
//!
//! The models (45 MB and 20 MB) are not in the repository: when they are missing the bench writes
//! them into `target/onnx-bench/` (or `$WGTORCH_ONNX_BENCH_DIR`) with
//! `tools/golden/onnx_models.py --bench-dir`, which needs torch, torchvision, onnx, onnxruntime,
//! onnxscript and safetensors in the bench's Python; without them the rows are skipped with a note.

use super::{median, peer, python, sync, usage};
use std::path::{Path, PathBuf};
use std::time::Instant;
use wgtorch::profiler::{self, ProfileOptions, SortBy};
use wgtorch::{onnx, Device, Result, Tensor};

/// The models: file stem and table label.
pub(crate) const MODELS: [(&str, &str); 2] = [
    ("resnet18", "ResNet-18, 1×3×224×224"),
    (
        "transformer_encoder_4l",
        "transformer encoder (4 layers, d 256, 4 heads), 1×128",
    ),
];

/// Warm-up runs before the timed ones on the CPU (the same as `pytorch_bench.py`'s for
/// onnxruntime).
const WARMUP: usize = 3;
/// Warm-up runs on a GPU: the first compiles the pipelines, the next is already steady.
const GPU_WARMUP: usize = 1;
/// Timed runs on a GPU adapter (a software one takes seconds per ResNet-18 run).
const GPU_REPS: usize = 5;

/// Where the models are cached: `$WGTORCH_ONNX_BENCH_DIR`, else `target/onnx-bench/`.
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("WGTORCH_ONNX_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/onnx-bench"))
}

fn model_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.onnx"))
}

fn io_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.io.safetensors"))
}

fn present(dir: &Path) -> bool {
    MODELS
        .iter()
        .all(|(n, _)| model_path(dir, n).is_file() && io_path(dir, n).is_file())
}

/// The models in `dir`, written there by `tools/golden/onnx_models.py --bench-dir` when one is
/// missing (into `DIR.partial`, renamed when complete, so an interrupted run leaves no truncated
/// model behind); `Err(why)` when they cannot be.
pub(crate) fn ensure_models(dir: &Path) -> std::result::Result<(), String> {
    if present(dir) {
        return Ok(());
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/golden/onnx_models.py");
    eprintln!(
        "(writing the ONNX bench models into {} with {} {script} --bench-dir: once, some seconds)",
        dir.display(),
        python()
    );
    let t0 = Instant::now();
    // `--only` with a name that is no test model's and `--out-dir` the same folder: only the
    // benchmark models are built (otherwise the script rebuilds all of tests/onnx/ first).
    let out = std::process::Command::new(python())
        .arg(script)
        .arg("--bench-dir")
        .arg(&partial)
        .arg("--out-dir")
        .arg(&partial)
        .args(["--only", "bench-models-only"])
        .output();
    let failed = match &out {
        Err(e) => Some(format!("cannot run {}: {e}", python())),
        Ok(o) if !o.status.success() || !present(&partial) => Some(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("no models written")
                .to_string(),
        ),
        Ok(_) => None,
    };
    if let Some(why) = failed {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(format!(
            "the models are not in {} and {script} could not write them ({why}; it needs torch, torchvision, onnx, onnxruntime, onnxscript and safetensors in {})",
            dir.display(),
            python()
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&partial, dir)
        .map_err(|e| format!("cannot move the models into place: {e}"))?;
    eprintln!("(wrote them in {:.0} s)", t0.elapsed().as_secs_f64());
    Ok(())
}

/// A loaded model with its inputs (on the host, from `NAME.io.safetensors`) and PyTorch's
/// reference outputs.
struct Case {
    model: onnx::Model,
    load_ms: f64,
    inputs: Vec<Tensor>,
    reference: Vec<(String, Tensor)>,
}

impl Case {
    fn load(dir: &Path, name: &str, dev: &Device) -> Result<Case> {
        let t0 = Instant::now();
        let model = onnx::Model::load(model_path(dir, name), dev)?;
        let load_ms = t0.elapsed().as_secs_f64() * 1e3;
        let io = wgtorch::io::load(io_path(dir, name), &Device::Cpu)?;
        let inputs = model
            .inputs()
            .iter()
            .map(|s| {
                io.iter()
                    .find(|(n, _)| *n == s.name)
                    .map(|(_, t)| t.clone())
                    .ok_or_else(|| usage(format!("{name}.io.safetensors has no input {s}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Case {
            model,
            load_ms,
            inputs,
            reference: io,
        })
    }

    /// One inference, host inputs to host outputs, by output name.
    fn run(&self) -> Result<Vec<(String, Tensor)>> {
        let outs = self.model.run(&self.inputs)?;
        let names = self.model.outputs().into_iter().map(|s| s.name);
        names
            .zip(outs)
            .map(|(n, t)| Ok((n, t.to(&Device::Cpu)?)))
            .collect()
    }

    /// `warmup` runs, then the median of `reps` timed ones (seconds) and the last outputs.
    fn time(
        &self,
        dev: &Device,
        warmup: usize,
        reps: usize,
    ) -> Result<(f64, Vec<(String, Tensor)>)> {
        for _ in 0..warmup {
            self.run()?;
        }
        sync(dev)?;
        let (mut ts, mut last) = (Vec::new(), Vec::new());
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            last = self.run()?;
            sync(dev)?;
            ts.push(t0.elapsed().as_secs_f64());
        }
        Ok((median(ts), last))
    }
}

/// The largest `|ours − theirs|` over the outputs `theirs` holds (NaN against NaN counts as
/// equal; a missing output, a shape mismatch or a lone NaN is infinite).
fn max_abs_diff(ours: &[(String, Tensor)], theirs: &[(String, Tensor)]) -> Result<f64> {
    let mut max = 0.0f64;
    for (name, o) in ours {
        let Some((_, t)) = theirs.iter().find(|(n, _)| n == name) else {
            return Ok(f64::INFINITY);
        };
        if o.shape() != t.shape() {
            return Ok(f64::INFINITY);
        }
        for (x, y) in o.to_f64_vec()?.into_iter().zip(t.to_f64_vec()?) {
            if x.is_nan() && y.is_nan() {
                continue;
            }
            let d = (x - y).abs();
            max = max.max(if d.is_nan() { f64::INFINITY } else { d });
        }
    }
    Ok(max)
}

fn fmt_diff(d: Option<f64>) -> String {
    d.map_or("-".into(), |d| format!("{d:.1e}"))
}

/// The ONNX rows on `devs` (`reps` timed runs on the CPU and in onnxruntime, [`GPU_REPS`] on a
/// GPU), printed as a table and recorded under `json["onnx"]`; a note instead when the models
/// cannot be had, and "-" in onnxruntime's columns when it cannot run.
pub(crate) fn onnx_bench(
    devs: &[Device],
    reps: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let dir = cache_dir();
    if let Err(why) = ensure_models(&dir) {
        println!("\nONNX inference rows skipped: {why}");
        json.insert("onnx".into(), serde_json::json!({ "skipped": why }));
        return Ok(());
    }
    let reps = reps.max(1);
    // wgtorch's runs, all models and devices: (model, device, load ms, latency ms, outputs, diff
    // against PyTorch).
    let mut ours = Vec::new();
    for (name, _) in MODELS {
        for dev in devs {
            let case = Case::load(&dir, name, dev)?;
            let (warmup, n) = if dev.is_gpu() {
                (GPU_WARMUP, GPU_REPS)
            } else {
                (WARMUP, reps)
            };
            let (s, outs) = case.time(dev, warmup, n)?;
            let vs_pytorch = max_abs_diff(&outs, &case.reference)?;
            ours.push((name, dev, case.load_ms, s * 1e3, outs, vs_pytorch));
        }
    }
    let threads = rayon::current_num_threads();
    let ort = peer(
        &[
            "--onnx",
            &dir.to_string_lossy(),
            "--reps",
            &reps.to_string(),
        ],
        "onnxruntime comparison",
    );
    let ort_outputs = |name: &str| -> Option<Vec<(String, Tensor)>> {
        ort.as_ref()?;
        wgtorch::io::load(dir.join(format!("{name}.ort.safetensors")), &Device::Cpu).ok()
    };
    let ort_version = ort
        .as_ref()
        .and_then(|o| o["onnxruntime"].as_str())
        .unwrap_or("-")
        .to_string();
    let ort_note = if ort.is_some() {
        format!("; onnxruntime {ort_version} CPU at {threads} threads in the same run")
    } else {
        String::new()
    };
    println!(
        "\nONNX inference, batch 1: host inputs to host outputs, medians of {reps} runs after {WARMUP} warm-up runs ({GPU_REPS} after {GPU_WARMUP} on a GPU){ort_note}"
    );
    println!("| model | runtime | latency (ms) | time ratio to onnxruntime CPU | max abs diff vs onnxruntime | max abs diff vs PyTorch |");
    println!("|---|---|---|---|---|---|");
    let mut models = serde_json::Map::new();
    for (name, label) in MODELS {
        let theirs = ort.as_ref().map(|o| &o["models"][name]);
        let ort_ms = theirs.and_then(|t| t["ms"].as_f64());
        let ort_outs = ort_outputs(name);
        let mut rec = serde_json::Map::new();
        for (_, dev, load_ms, ms, outs, vs_pytorch) in ours.iter().filter(|o| o.0 == name) {
            let vs_ort = ort_outs
                .as_ref()
                .map(|t| max_abs_diff(outs, t))
                .transpose()?;
            let ratio = ort_ms.map_or("-".into(), |t| format!("{:.2}", ms / t));
            println!(
                "| {label} | wgtorch {} | {ms:.1} | {ratio} | {} | {} |",
                dev.describe(),
                fmt_diff(vs_ort),
                fmt_diff(Some(*vs_pytorch))
            );
            rec.insert(
                dev.describe(),
                serde_json::json!({
                    "ms": ms,
                    "load_ms": load_ms,
                    "time_ratio_to_onnxruntime": ort_ms.map(|t| ms / t),
                    "max_abs_diff_onnxruntime": vs_ort,
                    "max_abs_diff_pytorch": vs_pytorch,
                }),
            );
        }
        match (theirs, ort_ms) {
            (Some(t), Some(ms)) => {
                let d = t["pytorch_max_abs_diff"].as_f64();
                println!(
                    "| {label} | onnxruntime {ort_version} CPU ({threads} threads) | {ms:.1} | 1.00 | - | {} |",
                    fmt_diff(d)
                );
                rec.insert("onnxruntime".into(), t.clone());
            }
            _ => println!("| {label} | onnxruntime CPU | - | - | - | - |"),
        }
        models.insert(name.into(), rec.into());
    }
    if ort.is_none() {
        println!("(no onnxruntime figures: `bench/pytorch_bench.py --onnx` failed in {}, which needs torch, onnxruntime and safetensors; the note above says why)", python());
    }
    json.insert(
        "onnx".into(),
        serde_json::json!({
            "threads": threads,
            "reps": reps,
            "gpu_reps": GPU_REPS,
            "warmup": WARMUP,
            "gpu_warmup": GPU_WARMUP,
            "onnxruntime": ort.as_ref().map(|o| o["onnxruntime"].clone()),
            "models": models,
        }),
    );
    Ok(())
}

/// `--onnx-case NAME`: one model alone on `dev`, wgtorch only (for `perf record`); with
/// `profile`, the timed runs under `wgtorch::profiler`, whose tables (by op, and by op and input
/// shape) it prints.
pub(crate) fn onnx_case(name: &str, dev: &Device, reps: usize, profile: bool) -> Result<()> {
    let dir = cache_dir();
    // Also any other model put there with its io file (e.g. a golden one, to profile it).
    let placed = dir.join(format!("{name}.onnx")).is_file();
    if !placed && !MODELS.iter().any(|(n, _)| *n == name) {
        let names: Vec<&str> = MODELS.iter().map(|(n, _)| *n).collect();
        return Err(usage(format!(
            "--onnx-case takes {} (or NAME with NAME.onnx and NAME.io.safetensors in {}), got {name}",
            names.join(" or "),
            dir.display()
        )));
    }
    ensure_models(&dir).map_err(usage)?;
    let case = Case::load(&dir, name, dev)?;
    let warmup = if dev.is_gpu() { GPU_WARMUP } else { WARMUP };
    let (s, _) = case.time(dev, warmup, reps)?;
    println!(
        "{name} on {}: median {:.2} ms over {reps} runs (load {:.0} ms)",
        dev.describe(),
        s * 1e3,
        case.load_ms
    );
    if profile {
        let opts = ProfileOptions {
            record_shapes: true,
            ..Default::default()
        };
        let prof = profiler::profile(opts, |_| {
            for _ in 0..reps {
                let _run = profiler::record_function("onnx_run");
                case.run()?;
                sync(dev)?;
            }
            Ok(())
        })?;
        let sort = if dev.is_gpu() {
            SortBy::SelfGpuTimeTotal
        } else {
            SortBy::SelfCpuTimeTotal
        };
        println!("{}", prof.key_averages().table(sort, 15));
        println!("{}", prof.key_averages_by_input_shape().table(sort, 15));
    }
    Ok(())
}
