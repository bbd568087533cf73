//! Grad mode (`no_grad`, `enable_grad`) and anomaly mode, per thread as in PyTorch.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    static ANOMALY: Cell<bool> = const { Cell::new(false) };
}

/// Whether ops record the graph on this thread.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Restores the previous grad mode when dropped.
#[must_use = "grad mode is restored when the guard drops"]
pub struct GradModeGuard {
    prev: bool,
}

impl GradModeGuard {
    /// Set grad mode to `enabled` until the guard drops.
    pub fn new(enabled: bool) -> Self {
        let prev = GRAD_ENABLED.with(|g| g.replace(enabled));
        GradModeGuard { prev }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev));
    }
}

/// Disable graph recording until the guard drops (`with torch.no_grad():`).
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu).unwrap().requires_grad_(true);
/// let y = {
///     let _g = wgtorch::no_grad();
///     w.mul_scalar(2.0).unwrap()
/// };
/// assert!(!y.requires_grad());
/// ```
pub fn no_grad() -> GradModeGuard {
    GradModeGuard::new(false)
}

/// Run `f` with graph recording off (the closure form of [`no_grad`]).
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu).unwrap().requires_grad_(true);
/// let y = wgtorch::autograd::no_grad_scope(|| w.exp()).unwrap();
/// assert!(!y.requires_grad());
/// ```
pub fn no_grad_scope<R>(f: impl FnOnce() -> R) -> R {
    let _g = no_grad();
    f()
}

/// Re-enable graph recording inside a `no_grad` region.
pub fn enable_grad() -> GradModeGuard {
    GradModeGuard::new(true)
}

/// Set grad mode on this thread (what [`GradModeGuard`] does, without the guard).
pub(crate) fn set_grad_enabled(on: bool) {
    GRAD_ENABLED.with(|g| g.set(on));
}

/// Turn anomaly detection on or off (like `torch.autograd.set_detect_anomaly`): forward ops record
/// where they were created, and backward stops at the first op whose gradient is NaN or infinite.
pub fn set_anomaly_enabled(on: bool) {
    ANOMALY.with(|a| a.set(on));
}

/// Whether anomaly detection is on for this thread.
pub fn is_anomaly_enabled() -> bool {
    ANOMALY.with(|a| a.get())
}
