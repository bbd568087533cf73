//! Mixed precision: [`autocast`] scopes that run matmul-like ops in f16/bf16 and precision-sensitive
//! ops in f32 (PyTorch's autocast lists), and a [`GradScaler`] that keeps small f16 gradients
//! representable and skips steps whose gradients overflowed (PyTorch's `torch.autocast` and
//! `torch.amp.GradScaler`). Autocast is per thread, for one device at a time (a guard for another
//! device suspends the current one until it drops); parameters stay f32.
//!
//! ```
//! use wgtorch::amp::{self, GradScaler};
//! use wgtorch::nn::{functional as F, Linear, ModuleExt};
//! use wgtorch::optim::{Optimizer, Sgd};
//! use wgtorch::{DType, Device, Tensor};
//! let dev = Device::Cpu;
//! wgtorch::manual_seed(0);
//! let model = Linear::new(4, 2, &dev)?;
//! let mut opt = Sgd::new(model.parameters(), 0.1)?;
//! let mut scaler = GradScaler::new();
//! let (x, y) = (Tensor::randn([8, 4], &dev)?, Tensor::zeros([8, 2], &dev)?);
//! let mut losses = Vec::new();
//! for _ in 0..5 {
//!     opt.zero_grad();
//!     let loss = {
//!         let _ac = amp::autocast(&dev, DType::F16); // with torch.autocast("cpu", torch.float16):
//!         let out = model.forward(&x)?;
//!         assert_eq!(out.dtype(), DType::F16); // linear runs in half precision
//!         F::mse_loss(&out, &y)? // losses run in f32
//!     };
//!     assert_eq!(loss.dtype(), DType::F32);
//!     losses.push(loss.item()?);
//!     scaler.scale(&loss)?.backward()?;
//!     assert!(scaler.step(&mut opt)?); // finite gradients: the step ran
//!     scaler.update()?;
//! }
//! assert!(losses[4] < losses[0], "{losses:?}");
//! assert_eq!(model.weight.dtype(), DType::F32); // master weights stay f32
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod scaler;
pub use scaler::GradScaler;

use crate::{DType, Device, Result, Tensor};
use std::cell::Cell;

thread_local! {
    static STATE: Cell<Option<(Device, DType)>> = const { Cell::new(None) };
}

/// Restores the previous autocast state when dropped (returned by [`autocast`] and
/// [`autocast_disabled`]).
#[must_use = "autocast ends when the guard drops"]
pub struct AutocastGuard {
    prev: Option<(Device, DType)>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        STATE.with(|s| s.set(self.prev));
    }
}

/// Autocast ops on `device` to `dtype` (F16 or BF16) until the guard drops (PyTorch's
/// `with torch.autocast(device_type, dtype):`), on this thread only. Matmul-like ops (matmul,
/// bmm, linear, conv2d) cast their f32 inputs to `dtype`; precision-sensitive ops (softmax,
/// log_softmax, reductions such as sum and mean, norms, losses) cast half inputs up to f32.
/// Tensors on other devices are unaffected. Guards nest: dropping one restores the state before
/// it. One device at a time: a guard for another device replaces this one until it drops
/// (PyTorch keeps one state per device type).
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

/// Run `f` under autocast (the closure form of [`autocast`]).
///
/// ```
/// use wgtorch::{amp, DType, Device, Tensor};
/// let dev = Device::Cpu;
/// let a = Tensor::ones([2, 2], &dev)?;
/// let y = amp::autocast_scope(&dev, DType::F16, || a.matmul(&a))?;
/// assert_eq!(y.dtype(), DType::F16);
/// assert_eq!(amp::autocast_dtype(&dev), None); // over when the closure returns
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn autocast_scope<R>(device: &Device, dtype: DType, f: impl FnOnce() -> R) -> R {
    let _g = autocast(device, dtype);
    f()
}

/// Disable autocast until the guard drops (e.g. for a custom f32 region; PyTorch's
/// `torch.autocast(..., enabled=False)`).
///
/// ```
/// use wgtorch::{amp, DType, Device, Tensor};
/// let dev = Device::Cpu;
/// let a = Tensor::ones([2, 2], &dev)?;
/// let _ac = amp::autocast(&dev, DType::BF16);
/// {
///     let _off = amp::autocast_disabled();
///     assert_eq!(a.matmul(&a)?.dtype(), DType::F32);
/// }
/// assert_eq!(a.matmul(&a)?.dtype(), DType::BF16); // back on
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn autocast_disabled() -> AutocastGuard {
    let prev = STATE.with(|s| s.replace(None));
    AutocastGuard { prev }
}

/// The autocast dtype in force on this thread for tensors on `device`, if any (PyTorch's
/// `torch.get_autocast_dtype` when autocast is enabled).
pub fn autocast_dtype(device: &Device) -> Option<DType> {
    STATE
        .with(|s| s.get())
        .filter(|(d, _)| d == device)
        .map(|(_, t)| t)
}

/// This thread's autocast state (device and dtype), if on.
pub(crate) fn state() -> Option<(Device, DType)> {
    STATE.with(|s| s.get())
}

/// Sets this thread's autocast state (what [`autocast`] does, without the guard).
pub(crate) fn set_state(state: Option<(Device, DType)>) {
    STATE.with(|s| s.set(state));
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
