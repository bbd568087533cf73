//! The profiler on a SimpleCNN training step (CPU and the GPU adapter): events and their
//! nesting, call counts, the key-averages table, the Chrome trace as Trace Event Format JSON,
//! memory, the schedule and misuse. The profiler is process-wide, so these tests take one lock.

mod common;

use std::sync::Mutex;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{self, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::profiler::{self, EventKind, ProfileOptions, Profiler, Schedule, SortBy};
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
/// events with non-negative durations, timestamps in order per track, children inside their
/// parents.
fn check_trace(json: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(json).expect("the trace is JSON");
    let evs = v["traceEvents"].as_array().expect("traceEvents array");
    let mut last_ts: std::collections::HashMap<(u64, u64), f64> = Default::default();
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
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    v
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
        for col in [
            "Name",
            "Self CPU %",
            "Self CPU",
            "CPU total %",
            "CPU total",
            "CPU time avg",
            "# of Calls",
            "Self CPU time total:",
        ] {
            assert!(table.contains(col), "{col} missing:\n{table}");
        }
        // Sorted by total time, the step scopes come first.
        let first_row = table.lines().nth(3).unwrap();
        assert!(first_row.trim_start().starts_with("train_step"), "{table}");
        assert_eq!(table.lines().count(), 3 + 12 + 2, "{table}");
        let by_shape = prof.key_averages_by_input_shape().table(SortBy::Count, 0);
        assert!(
            by_shape.contains("Input Shapes")
                && by_shape.contains("[[4, 3, 32, 32], [32, 3, 3, 3]]"),
            "{by_shape}"
        );

        let v = check_trace(&prof.chrome_trace());
        let evs = v["traceEvents"].as_array().unwrap();
        let x_events = evs.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(x_events, ev.len());
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
            last.bytes, 0,
            "{dev}: allocated and freed inside the profile"
        );
        assert_eq!(samples.iter().map(|s| s.bytes).max(), Some(a));
    }
    Ok(())
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
