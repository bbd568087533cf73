//! Mixed precision: [`autocast`] scopes that run matmul-like ops in f16/bf16 and precision-sensitive
//! ops in f32 (PyTorch's autocast lists), and a [`GradScaler`] that keeps small f16 gradients
//! representable and skips steps whose gradients overflowed.

mod scaler;
pub use scaler::GradScaler;

use crate::{DType, Device, Result, Tensor};
use std::cell::Cell;

thread_local! {
    static STATE: Cell<Option<(Device, DType)>> = const { Cell::new(None) };
}

/// Restores the previous autocast state when dropped.
#[must_use = "autocast ends when the guard drops"]
pub struct AutocastGuard {
    prev: Option<(Device, DType)>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        STATE.with(|s| s.set(self.prev));
    }
}

/// Autocast ops on `device` to `dtype` (F16 or BF16) until the guard drops.
///
/// ```
/// use wgtorch::{amp, DType, Device, Tensor};
/// let dev = Device::Cpu;
/// let a = Tensor::ones([2, 2], &dev)?;
/// let _ac = amp::autocast(&dev, DType::BF16);
/// assert_eq!(a.matmul(&a)?.dtype(), DType::BF16);     // runs in half precision
/// assert_eq!(a.matmul(&a)?.softmax(1)?.dtype(), DType::F32); // precision-sensitive: f32
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn autocast(device: &Device, dtype: DType) -> AutocastGuard {
    let prev = STATE.with(|s| s.replace(Some((*device, dtype))));
    AutocastGuard { prev }
}

/// Run `f` under autocast (the closure form).
pub fn autocast_scope<R>(device: &Device, dtype: DType, f: impl FnOnce() -> R) -> R {
    let _g = autocast(device, dtype);
    f()
}

/// Disable autocast until the guard drops (e.g. for a custom f32 region).
pub fn autocast_disabled() -> AutocastGuard {
    let prev = STATE.with(|s| s.replace(None));
    AutocastGuard { prev }
}

/// The autocast dtype in force for tensors on `device`, if any.
pub fn autocast_dtype(device: &Device) -> Option<DType> {
    STATE
        .with(|s| s.get())
        .filter(|(d, _)| d == device)
        .map(|(_, t)| t)
}

/// For an op autocast runs in half precision: its f32 inputs, cast.
pub(crate) fn lower(t: &Tensor) -> Result<Tensor> {
    match autocast_dtype(&t.device()) {
        Some(h) if t.dtype() == DType::F32 => t.to_dtype(h),
        _ => Ok(t.clone()),
    }
}

/// For an op autocast runs in f32: its half inputs, cast up.
pub(crate) fn upper(t: &Tensor) -> Result<Tensor> {
    match autocast_dtype(&t.device()) {
        Some(_) if matches!(t.dtype(), DType::F16 | DType::BF16) => t.to_dtype(DType::F32),
        _ => Ok(t.clone()),
    }
}
