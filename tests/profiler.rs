//! The profiler on a SimpleCNN training step (CPU and the GPU adapter): events and their
//! nesting, call counts, GPU kernels timed by the adapter, the key-averages table, the Chrome
//! trace as Trace Event Format JSON, memory against the GPU pool's own counters, transfers,
//! pipeline compiles, call stacks, an adapter without timestamps, the schedule and misuse. The
//! profiler is process-wide, so these tests take one lock.

mod common;

use std::sync::Mutex;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{self, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::profiler::{
    self, EventKind, ProfileOptions, Profiler, ProfilerActivity, Schedule, SortBy,
};
use wgtorch::{DType, Device, Result, Tensor};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn train_step(m: &SimpleCnn, opt: &mut Adam, x: &Tensor, y: &Tensor) -> Result<()> {
    opt.zero_grad();
    let loss = nn::functional::cross_entropy(&m.forward(x)?, y)?;
    loss.backward()?;
    opt.step()
}

/// Checks the trace the way a viewer reads it: JSON, the required fields per phase, complete
/// events with non-negative durations, timestamps in order per track, every flow arrow's start
/// and end present and in time order.
fn check_trace(json: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(json).expect("the trace is JSON");
    let evs = v["traceEvents"].as_array().expect("traceEvents array");
    let mut last_ts: std::collections::HashMap<(u64, u64), f64> = Default::default();
    let mut flows: std::collections::HashMap<u64, (Option<f64>, Option<f64>)> = Default::default();
    for e in evs {
        let ph = e["ph"].as_str().expect("ph");
        assert!(
            e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(),
            "{e}"
        );
        match ph {
            "M" => assert!(e["args"]["name"].is_string(), "{e}"),
            "X" => {
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                let prev = last_ts.insert(key, ts).unwrap_or(0.0);
                assert!(ts >= prev, "timestamps go back on a track: {e}");
            }
            "C" => assert!(e["args"]["Total Allocated"].is_i64(), "{e}"),
            "s" | "f" => {
                let id = e["id"].as_u64().expect("a flow event has an id");
                let ts = e["ts"].as_f64().expect("a flow event has a ts");
                let f = flows.entry(id).or_default();
                if ph == "s" {
                    assert!(f.0.replace(ts).is_none(), "flow {id} starts twice");
                } else {
                    assert_eq!(e["bp"], "e", "{e}");
                    assert!(f.1.replace(ts).is_none(), "flow {id} ends twice");
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (id, f) in flows {
        let (Some(s), Some(t)) = f else {
            panic!("flow {id} is missing an end: {f:?}");
        };
        assert!(s <= t, "flow {id} goes back in time");
    }
    v
}

fn assert_columns(table: &str, columns: &[&str]) {
    for col in columns {
        assert!(table.contains(col), "{col} missing:\n{table}");
    }
}

/// The GPU adapter's context, when the device is a GPU.
fn context(dev: &Device) -> Option<std::sync::Arc<wgtorch::backend::gpu::GpuContext>> {
    match dev {
        Device::Gpu(n) => Some(wgtorch::backend::gpu::context(*n).expect("context")),
        Device::Cpu => None,
    }
}

#[test]
fn a_training_step_on_every_device() -> Result<()> {
    let _l = lock();
    for dev in common::devices() {
        wgtorch::manual_seed(0);
        let m = SimpleCnn::new(&dev)?;
        let mut opt = Adam::new(m.parameters(), Default::default())?;
        let x = Tensor::randn([4, 3, 32, 32], &dev)?;
        let y = Tensor::from_vec(vec![1i64, 2, 3, 4], [4], &dev)?;
        train_step(&m, &mut opt, &x, &y)?; // warm-up, outside the profile
        let opts = ProfileOptions {
            record_shapes: true,
            profile_memory: true,
            ..Default::default()
        };
        let prof = profiler::profile(opts, |_| {
            for _ in 0..2 {
                let _s = profiler::record_function("train_step");
                train_step(&m, &mut opt, &x, &y)?;
            }
            Ok(())
        })?;
        let ev = prof.events();
        let count = |name: &str| ev.iter().filter(|e| e.name == name).count();
        // Per step: 2 convolutions forward and backward, 3 relus, 2 linears, one loss and one
        // optimizer step, each backward node under the backward pass.
        assert_eq!(count("train_step"), 2, "{dev}");
        assert_eq!(count("conv2d"), 4, "{dev}");
        assert_eq!(count("conv2d_backward"), 4, "{dev}");
        assert_eq!(count("relu"), 6, "{dev}");
        assert_eq!(count("linear"), 4, "{dev}");
        assert_eq!(count("max_pool2d"), 4, "{dev}");
        assert_eq!(count("cross_entropy"), 2, "{dev}");
        assert_eq!(count("backward"), 2, "{dev}");
        assert_eq!(count("Optimizer.step#Adam.step"), 2, "{dev}");
        assert_eq!(count("Optimizer.zero_grad"), 2, "{dev}");
        for e in ev.iter().filter(|e| e.kind == EventKind::Backward) {
            let parent = &ev[e.parent.expect("a backward node has a parent")];
            assert_eq!(parent.name, "backward", "{}", e.name);
        }
        let conv = ev.iter().find(|e| e.name == "conv2d").unwrap();
        assert_eq!(conv.input_shapes, [vec![4, 3, 32, 32], vec![32, 3, 3, 3]]);
        assert_eq!(conv.input_dtypes, [DType::F32, DType::F32]);
        assert_eq!(conv.device, Some(dev));
        assert_eq!(ev[conv.parent.unwrap()].name, "train_step");
        // Children lie within their parents, and a parent's time covers its children's.
        let mut child_sum = vec![0u64; ev.len()];
        for e in ev {
            if let Some(p) = e.parent {
                let p_ev = &ev[p];
                assert!(e.start_ns >= p_ev.start_ns, "{} in {}", e.name, p_ev.name);
                assert!(
                    e.start_ns + e.dur_ns <= p_ev.start_ns + p_ev.dur_ns,
                    "{} ends after {}",
                    e.name,
                    p_ev.name
                );
                child_sum[p] += e.dur_ns;
            }
        }
        for (e, c) in ev.iter().zip(&child_sum) {
            assert!(e.dur_ns >= *c, "{}: {} < children {}", e.name, e.dur_ns, c);
        }
        let steps = prof.key_averages();
        let step = steps.get("train_step").unwrap();
        assert_eq!(step.count, 2);
        assert!(step.cpu_time_total_ns <= prof.total_ns());
        assert!(step.self_cpu_time_total_ns < step.cpu_time_total_ns);

        let table = steps.table(SortBy::CpuTimeTotal, 12);
        assert_columns(
            &table,
            &[
                "Name",
                "Self CPU %",
                "Self CPU",
                "CPU total %",
                "CPU total",
                "CPU time avg",
                "# of Calls",
                "Self CPU time total:",
            ],
        );
        // Sorted by total time, the step scopes come first.
        let first_row = table.lines().nth(3).unwrap();
        assert!(first_row.trim_start().starts_with("train_step"), "{table}");
        let gpu_total_line = usize::from(dev.is_gpu());
        assert_eq!(
            table.lines().count(),
            3 + 12 + 2 + gpu_total_line,
            "{table}"
        );
        let by_shape = prof.key_averages_by_input_shape().table(SortBy::Count, 0);
        assert!(
            by_shape.contains("Input Shapes")
                && by_shape.contains("[[4, 3, 32, 32], [32, 3, 3, 3]]"),
            "{by_shape}"
        );

        // GPU kernels: timed by lavapipe, each under the op that launched it, after its start;
        // together no longer than the profile.
        let kernels = prof.gpu_kernels();
        if dev.is_gpu() {
            assert!(
                prof.gpu_time_unavailable().is_empty(),
                "lavapipe has timestamps"
            );
            assert!(!kernels.is_empty());
            for k in kernels {
                let op = &ev[k.op.expect("every kernel ran under an event")];
                assert!(k.dur_ns > 0, "{} took no time", k.name);
                assert!(k.start_ns >= op.start_ns, "{} before {}", k.name, op.name);
                assert_eq!(k.device, dev);
            }
            let busy: u64 = kernels.iter().map(|k| k.dur_ns).sum();
            assert!(busy <= prof.total_ns(), "{busy} > {}", prof.total_ns());
            for w in kernels.windows(2) {
                assert!(
                    w[1].start_ns >= w[0].start_ns + w[0].dur_ns,
                    "kernels overlap"
                );
            }
            let conv = steps.get("conv2d").unwrap();
            let conv_bwd = steps.get("conv2d_backward").unwrap();
            assert!(conv.gpu_time_total_ns > 0 && conv_bwd.gpu_time_total_ns > 0);
            // conv2d launches its kernel itself: its self GPU time is the kernel's.
            assert!(conv.self_gpu_time_total_ns > 0);
            assert!(conv.self_gpu_time_total_ns <= conv.gpu_time_total_ns);
            // (train_step launches a few kernels itself, e.g. backward's seed gradient.)
            assert!(step.self_gpu_time_total_ns < step.gpu_time_total_ns);
            assert!(step.gpu_time_total_ns >= conv.gpu_time_total_ns);
            assert_eq!(steps.self_gpu_time_total_ns(), busy);
            let table = steps.table(SortBy::SelfGpuTimeTotal, 5);
            assert_columns(
                &table,
                &[
                    "Self GPU",
                    "Self GPU %",
                    "GPU total",
                    "GPU time avg",
                    "Self GPU time total:",
                ],
            );
            let top = table.lines().nth(3).unwrap().trim_start();
            let most = steps.rows().iter().map(|r| r.self_gpu_time_total_ns).max();
            assert!(
                steps
                    .rows()
                    .iter()
                    .any(|r| Some(r.self_gpu_time_total_ns) == most
                        && top.starts_with(&r.name[..r.name.len().min(40)])),
                "sorted by self GPU time, the longest-running row comes first:\n{table}"
            );
            // Every kernel's time is in the self GPU time of the op that launched it.
            let launched: u64 = steps
                .rows()
                .iter()
                .filter(|r| !r.gpu_kernel)
                .map(|r| r.self_gpu_time_total_ns)
                .sum();
            assert_eq!(launched, busy);
        } else {
            assert!(kernels.is_empty());
            assert!(!steps.table(SortBy::CpuTimeTotal, 0).contains("Self GPU"));
        }

        let v = check_trace(&prof.chrome_trace());
        let evs = v["traceEvents"].as_array().unwrap();
        let x_events = evs.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(x_events, ev.len() + kernels.len());
        let arrows = evs.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(arrows, kernels.len(), "one arrow per kernel");
        if dev.is_gpu() {
            let k = evs.iter().find(|e| e["cat"] == "kernel").unwrap();
            assert!(k["args"]["Launched by"].is_string(), "{k}");
        }
        let conv_json = evs.iter().find(|e| e["name"] == "conv2d").unwrap();
        assert_eq!(
            conv_json["args"]["Input Dims"][0],
            serde_json::json!([4, 3, 32, 32])
        );
        let mem_track = format!("Memory {dev}");
        assert!(evs
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == mem_track.as_str()));

        let path = std::env::temp_dir().join(format!(
            "wgtorch-profiler-test-{}-{}.json",
            std::process::id(),
            dev.to_string().replace(':', "")
        ));
        prof.export_chrome_trace(&path)?;
        let written = std::fs::read_to_string(&path).expect("trace written");
        std::fs::remove_file(&path).ok();
        check_trace(&written);
    }
    Ok(())
}

#[test]
fn memory_of_a_known_tensor_is_exact() -> Result<()> {
    let _l = lock();
    for dev in common::devices() {
        let opts = ProfileOptions {
            profile_memory: true,
            ..Default::default()
        };
        let ctx = context(&dev);
        if let Some(c) = &ctx {
            c.synchronize()?;
            c.reset_peak();
        }
        let at_start = ctx.as_ref().map_or(0, |c| c.stats().bytes_in_use as i64);
        let prof = profiler::profile(opts, |_| {
            let kept = {
                let _s = profiler::record_function("alloc");
                Tensor::zeros([1000, 3], &dev)? // 12,000 bytes of f32
            };
            let _s = profiler::record_function("free");
            drop(kept);
            Ok(())
        })?;
        let avg = prof.key_averages();
        let (alloc, free) = (avg.get("alloc").unwrap(), avg.get("free").unwrap());
        let (a, f) = if dev.is_gpu() {
            (alloc.gpu_memory_usage, free.self_gpu_memory_usage)
        } else {
            (alloc.cpu_memory_usage, free.self_cpu_memory_usage)
        };
        if dev.is_gpu() {
            // GPU buffers come in pooled size classes: at least the tensor's bytes.
            assert!(a >= 12_000, "{a}");
        } else {
            assert_eq!(a, 12_000);
        }
        assert_eq!(f, -a, "{dev}: the free gives back what the alloc took");
        let table = avg.table(SortBy::CpuMemoryUsage, 0);
        let col = if dev.is_gpu() {
            "Self GPU Mem"
        } else {
            "Self CPU Mem"
        };
        assert!(table.contains(col), "{table}");
        if !dev.is_gpu() {
            assert!(table.contains("11.72 Kb"), "{table}");
        }
        let samples = prof.memory_samples();
        let last = samples.iter().rev().find(|s| s.device == dev).unwrap();
        assert_eq!(
            last.bytes, at_start,
            "{dev}: allocated and freed inside the profile"
        );
        assert_eq!(prof.peak_memory(dev), Some(at_start + a));
        assert_eq!(
            alloc.peak_cpu_memory + alloc.peak_gpu_memory,
            a,
            "the op's peak"
        );
        if let Some(c) = &ctx {
            // The GPU counter is the pool's own: its peak is what stats() reports.
            assert_eq!(prof.peak_memory(dev), Some(c.stats().peak_bytes as i64));
        }
    }
    Ok(())
}

/// The op-level details on a GPU: the bytes each event uploads and reads back, the pipeline
/// compiles, GPU-only activity and call stacks; then the same without timestamp queries (a
/// fresh process with `WGTORCH_NO_TIMESTAMPS`, where every pipeline is compiled anew).
#[test]
fn transfers_compiles_stacks_and_an_adapter_without_timestamps() -> Result<()> {
    let _l = lock();
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let untimed = std::env::var("WGTORCH_NO_TIMESTAMPS").is_ok();
    let opts = ProfileOptions {
        with_stack: true,
        ..Default::default()
    };
    let prof = profiler::profile(opts, |_| {
        let t = {
            let _s = profiler::record_function("up");
            Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], &gpu)?
        };
        let _s = profiler::record_function("down");
        // A kernel no other test compiles: a fresh pipeline in this process.
        assert_eq!(sine_of(&t)?.to_vec::<f32>()?.len(), 3);
        Ok(())
    })?;
    let avg = prof.key_averages();
    assert_eq!(avg.get("up").unwrap().bytes_uploaded, 12);
    assert_eq!(avg.get("down").unwrap().bytes_read_back, 12);
    // (The tuner's compile thread may record compiles of its own meanwhile: other tests'
    // GEMM candidates.)
    let compile = prof
        .events()
        .iter()
        .find(|e| e.name == "pipeline_compile" && e.detail.as_deref() == Some("unary_sin_f32"))
        .expect("the first sin compiles its pipeline");
    assert_eq!(compile.kind, EventKind::Runtime);
    let sin = prof.events().iter().find(|e| e.name == "sin").unwrap();
    assert!(
        sin.stack.first().is_some_and(|f| f.contains("sine_of")),
        "the innermost caller outside wgtorch is this test's function: {:?}",
        sin.stack
    );
    let table = avg.table(SortBy::CpuTimeTotal, 0);
    if untimed {
        assert!(prof.gpu_kernels().is_empty());
        let why = prof.gpu_time_unavailable().join("; ");
        assert!(why.contains("has no timestamp queries"), "{why}");
        assert!(
            table.contains("n/a") && table.contains("GPU time unavailable"),
            "{table}"
        );
    } else {
        assert!(prof.gpu_kernels().iter().any(|k| k.name == "unary_sin_f32"));
        // GPU activity alone: kernels only, each still naming no event.
        let prof = profiler::profile(
            ProfileOptions {
                activities: &[ProfilerActivity::Gpu],
                ..Default::default()
            },
            |_| {
                gpu_exp(&gpu)?;
                Ok(())
            },
        )?;
        assert!(prof.events().is_empty());
        assert!(!prof.gpu_kernels().is_empty());
        assert!(prof.gpu_kernels().iter().all(|k| k.op.is_none()));
        // A profiler dropped while its kernels wait in the unsubmitted batch: the next
        // profiler still gets its own kernels of that batch.
        let abandoned = Profiler::start(ProfileOptions::default())?;
        let y = Tensor::ones([4], &gpu)?.exp()?;
        drop(abandoned);
        let prof = profiler::profile(ProfileOptions::default(), |_| {
            y.neg()?.to_vec::<f32>()?;
            Ok(())
        })?;
        let names: Vec<&str> = prof.gpu_kernels().iter().map(|k| k.name.as_str()).collect();
        assert!(
            names.iter().any(|n| n.starts_with("unary_neg")),
            "{names:?}"
        );
        assert!(
            !names.iter().any(|n| n.starts_with("unary_exp")),
            "{names:?}"
        );
        // Now the same test in a process whose adapter has no timestamp queries.
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "transfers_compiles_stacks_and_an_adapter_without_timestamps",
                "--test-threads=1",
            ])
            .env("WGTORCH_NO_TIMESTAMPS", "1")
            .output()
            .expect("the test binary runs");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Stopping waits for the GPU to read its timestamps, but an out-of-range index that a
    // kernel found meanwhile is still reported, by the next readback as always.
    let x = Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], &gpu)?;
    let idx = Tensor::from_vec(vec![0i32, 7], [2], &gpu)?;
    let mut picked = None;
    profiler::profile(ProfileOptions::default(), |_| {
        picked = Some(x.index_select(0, &idx)?);
        Ok(())
    })?;
    let e = picked.unwrap().to_vec::<f32>().unwrap_err();
    assert!(e.to_string().contains("index 7 is out of bounds"), "{e}");

    let bad = Profiler::start(ProfileOptions {
        activities: &[],
        ..Default::default()
    })
    .unwrap_err();
    assert!(bad.to_string().contains("activities is empty"), "{bad}");
    Ok(())
}

/// A caller frame that optimisation keeps (test binaries have no debug info for inlined frames).
#[inline(never)]
fn sine_of(t: &Tensor) -> Result<Tensor> {
    std::hint::black_box(t.sin()) // not a tail call either
}

fn gpu_exp(gpu: &Device) -> Result<Vec<f32>> {
    Tensor::ones([4], gpu)?.exp()?.to_vec::<f32>()
}

#[test]
fn schedule_records_only_the_active_steps() -> Result<()> {
    let _l = lock();
    let x = Tensor::ones([8], &Device::Cpu)?;
    let schedule = Some(Schedule {
        skip_first: 1,
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 1,
    });
    let p = Profiler::start(ProfileOptions {
        schedule,
        ..Default::default()
    })?;
    for _ in 0..8 {
        x.exp()?;
        p.step();
    }
    let prof = p.stop();
    // skip, wait, warmup, active, active, then done (repeat 1)
    let steps: Vec<&str> = prof
        .events()
        .iter()
        .filter(|e| e.name.starts_with("ProfilerStep#"))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(steps, ["ProfilerStep#3", "ProfilerStep#4"]);
    for e in prof.events().iter().filter(|e| e.name == "exp") {
        assert!(prof.events()[e.parent.unwrap()]
            .name
            .starts_with("ProfilerStep#"));
    }
    assert_eq!(prof.key_averages().get("exp").unwrap().count, 2);
    Ok(())
}

#[test]
fn misuse_is_an_error_and_nothing_is_recorded_when_off() -> Result<()> {
    let _l = lock();
    let x = Tensor::ones([8], &Device::Cpu)?;
    let p = Profiler::start(ProfileOptions::default())?;
    let again = Profiler::start(ProfileOptions::default()).unwrap_err();
    assert!(again.to_string().contains("already running"), "{again}");
    {
        let _scope = profiler::record_function("outer");
        let _inner = profiler::record_function("inner");
        x.exp()?;
    }
    let prof = p.stop();
    let names: Vec<&str> = prof.events().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["outer", "inner", "exp"]);
    assert_eq!(prof.events()[2].parent, Some(1));
    assert_eq!(prof.events()[1].parent, Some(0));

    // Off: a scope and an op record nothing, and a new profiler starts clean.
    {
        let _scope = profiler::record_function("unseen");
        x.exp()?;
    }
    let bad = Profiler::start(ProfileOptions {
        schedule: Some(Schedule::default()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        bad.to_string().contains("active must be at least 1"),
        "{bad}"
    );
    // The closure's error comes back, and the profiler is stopped after it.
    let err = profiler::profile(ProfileOptions::default(), |_| {
        x.matmul(&x.reshape([2, 4])?)?;
        Ok(())
    })
    .unwrap_err();
    assert!(err.to_string().contains("matmul"), "{err}");
    let prof = profiler::profile(ProfileOptions::default(), |_| Ok(()))?;
    assert!(prof.events().is_empty(), "{:?}", prof.events());
    // A profiler dropped without stop() frees the slot too.
    drop(Profiler::start(ProfileOptions::default())?);
    Profiler::start(ProfileOptions::default())?.stop();
    Ok(())
}
