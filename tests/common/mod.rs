//! Shared test helpers: the devices to run on, and tolerance checks.
#![allow(dead_code)]

use std::sync::Arc;
use wgtorch::data::{DataLoader, Dataset};
use wgtorch::{Device, Result, Tensor};

/// The CPU, plus the first GPU when there is one. With `CI` or `WGTORCH_REQUIRE_GPU=1` set, a
/// missing GPU fails the test instead of silently testing the CPU alone.
pub fn devices() -> Vec<Device> {
    let mut v = vec![Device::Cpu];
    match Device::gpu() {
        Ok(d) => v.push(d),
        Err(e) => {
            if require_gpu() {
                panic!("a GPU adapter is required here (CI or WGTORCH_REQUIRE_GPU set) but none was found: {e}");
            }
            eprintln!("note: no GPU adapter ({e}); GPU half of this test skipped");
        }
    }
    v
}

/// The names of the events nested, at any depth, under the first event named `scope` (a test's
/// `record_function`): other tests of the binary run ops meanwhile.
pub fn events_under(prof: &wgtorch::profiler::Profile, scope: &str) -> Vec<String> {
    let ev = prof.events();
    let Some(scope) = ev.iter().position(|e| e.name == scope) else {
        return Vec::new();
    };
    let under = |i: usize| {
        let mut p = ev[i].parent;
        while let Some(q) = p {
            if q == scope {
                return true;
            }
            p = ev[q].parent;
        }
        false
    };
    (0..ev.len())
        .filter(|&i| under(i))
        .map(|i| ev[i].name.clone())
        .collect()
}

/// Whether a missing GPU is a failure.
pub fn require_gpu() -> bool {
    std::env::var("CI")
        .map(|v| !v.is_empty() && v != "0" && v != "false")
        .unwrap_or(false)
        || std::env::var("WGTORCH_REQUIRE_GPU")
            .map(|v| v == "1")
            .unwrap_or(false)
}

/// The GPU, if any (failing under CI when absent).
pub fn gpu() -> Option<Device> {
    devices().into_iter().find(|d| d.is_gpu())
}

/// Assert `a` and `b` agree within `atol + rtol * |b|`, elementwise.
pub fn assert_close(what: &str, a: &[f64], b: &[f64], rtol: f64, atol: f64) {
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: lengths differ ({} vs {})",
        a.len(),
        b.len()
    );
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs();
        assert!(
            ok,
            "{what}: element {i}: {x} vs {y} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Values of a tensor as f64.
pub fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().expect("read back")
}

/// A numeric knob from the environment (a fuzz's iteration count or seed), or `default` when it
/// is unset or not a number.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Serialises tests that seed the process-wide default generator and need its exact sequence
/// (model initialisation): the test harness runs tests on several threads, and the generator is
/// global, as PyTorch's is.
pub fn seed_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Matmuls over every pair of operand layouts (rows / transposed), edge sizes, K that is and is
/// not a multiple of 4, offset views and a broadcast batch: `gpu` against the CPU.
pub fn check_matmul_layouts(gpu: &Device) -> wgtorch::Result<()> {
    wgtorch::manual_seed(4);
    let cpu = Device::Cpu;
    for (b, m, k, n) in [
        (2, 8, 12, 4),
        (1, 5, 8, 7),
        (3, 12, 6, 8),
        (1, 4, 4, 1),
        (2, 16, 20, 12),
        (1, 70, 36, 68),
        // Past a 128x128 tile both ways, with edges.
        (1, 140, 36, 136),
    ] {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            for off in [0, 4] {
                let a = if ta {
                    Tensor::randn([b, k + off, m], gpu)?
                        .narrow(1, off, k)?
                        .transpose(1, 2)?
                } else {
                    Tensor::randn([b, m, k + off], gpu)?.narrow(2, off, k)?
                };
                let w = if tb {
                    Tensor::randn([n, k], gpu)?.t()?
                } else {
                    Tensor::randn([b, k, n], gpu)?
                };
                let want = a.to(&cpu)?.matmul(&w.to(&cpu)?)?;
                let got = a.matmul(&w)?;
                assert_close(
                    &format!("{b}x{m}x{k}x{n} ta={ta} tb={tb} off={off}"),
                    &vals(&got),
                    &vals(&want),
                    1e-4,
                    1e-4,
                );
            }
        }
    }
    Ok(())
}

/// The fraction of `test` that `forward`'s logits classify right (argmax over dim 1), in
/// batches of 128 on `dev`. Call it under `no_grad`, with the model in eval mode.
pub fn accuracy(
    test: Arc<dyn Dataset>,
    dev: &Device,
    forward: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<f64> {
    let (mut hits, mut n) = (0.0, 0);
    for batch in DataLoader::new(test, 128, dev)?.epoch(0) {
        let (x, y) = batch?;
        hits += forward(&x)?
            .argmax(Some(1), false)?
            .eq(&y)?
            .sum_all()?
            .item()?;
        n += y.numel();
    }
    Ok(hits / n as f64)
}
