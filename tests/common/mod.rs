//! Shared test helpers: the devices to run on, and tolerance checks.
#![allow(dead_code)]

use wgtorch::{Device, Tensor};

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

/// Serialises tests that seed the process-wide default generator and need its exact sequence
/// (model initialisation): the test harness runs tests on several threads, and the generator is
/// global, as PyTorch's is.
pub fn seed_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
