//! GradScaler with PyTorch's defaults and update rule.

use crate::optim::Optimizer;
use crate::{Result, Tensor};

/// Scales the loss so f16 gradients do not underflow, unscales before the step, and skips steps
/// whose gradients hold inf or NaN (found on the device with one reduction and a single scalar
/// read). Master weights stay f32. PyTorch's `torch.amp.GradScaler` and its loop:
/// `scaler.scale(&loss)?.backward()?; scaler.step(&mut opt)?; scaler.update();` (with
/// `scaler.unscale_(&mut opt)?` before `step` to clip true gradients).
///
/// ```
/// use wgtorch::amp::GradScaler;
/// use wgtorch::optim::{Optimizer, Sgd};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Sgd::new(vec![w.clone()], 0.1)?;
/// let mut scaler = GradScaler::new();
/// assert_eq!(scaler.get_scale(), 65536.0);
///
/// // A step whose gradients overflow is skipped, and the scale backs off.
/// let loss = w.mul_scalar(f64::INFINITY)?.sum_all()?;
/// scaler.scale(&loss)?.backward()?;
/// assert!(!scaler.step(&mut opt)?);
/// scaler.update();
/// assert_eq!(scaler.get_scale(), 32768.0);
/// assert_eq!(w.to_vec::<f32>()?, [1.0, 1.0]);
///
/// // A clean step runs with the unscaled gradient (1 per element).
/// opt.zero_grad();
/// scaler.scale(&w.sum_all()?)?.backward()?;
/// assert!(scaler.step(&mut opt)?);
/// scaler.update();
/// assert_eq!(w.to_vec::<f32>()?, [0.9, 0.9]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GradScaler {
    scale: f64,
    /// Multiplier after `growth_interval` clean steps (default 2).
    pub growth_factor: f64,
    /// Multiplier after a step with inf/NaN gradients (default 0.5).
    pub backoff_factor: f64,
    /// Clean steps before growing (default 2000).
    pub growth_interval: usize,
    growth_tracker: usize,
    /// Off: scale, unscale and the inf check do nothing (the step always runs).
    pub enabled: bool,
    found_inf: Option<Tensor>,
    unscaled: bool,
    last_skipped: bool,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

impl GradScaler {
    /// PyTorch's defaults: init_scale 65536, growth 2, backoff 0.5, interval 2000.
    pub fn new() -> GradScaler {
        GradScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            growth_tracker: 0,
            enabled: true,
            found_inf: None,
            unscaled: false,
            last_skipped: false,
        }
    }
    /// The current scale (1 when disabled).
    pub fn get_scale(&self) -> f64 {
        if self.enabled {
            self.scale
        } else {
            1.0
        }
    }
    /// `loss * scale`, as f32 (a half loss is cast up first); the loss itself when disabled.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        if !self.enabled {
            return Ok(loss.clone());
        }
        loss.to_dtype(crate::DType::F32)?.mul_scalar(self.scale)
    }
    /// Divide the optimizer's gradients by the scale in place (so clipping sees true values) and
    /// record whether any is inf or NaN (on the device; nothing is read back here). Does nothing
    /// when disabled or when already called since the last [`GradScaler::update`]. Errors come
    /// from the tensor ops.
    pub fn unscale_(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        if !self.enabled || self.unscaled {
            return Ok(());
        }
        let _g = crate::no_grad();
        let inv = 1.0 / self.scale;
        let mut flag: Option<Tensor> = None;
        for group in opt.param_groups() {
            for p in &group.params {
                let Some(g) = p.grad() else { continue };
                // x * 0 is 0 for finite x and NaN for inf/NaN: one sum per gradient, on the device.
                let bad = g.to_dtype(crate::DType::F32)?.mul_scalar(0.0)?.sum_all()?;
                flag = Some(match flag {
                    Some(f) => f.add(&bad)?,
                    None => bad,
                });
                g.mul_(&g.scalar_like(inv)?)?;
            }
        }
        self.found_inf = flag;
        self.unscaled = true;
        Ok(())
    }
    /// Unscale if needed, then `opt.step()` unless a gradient is inf or NaN (one scalar read
    /// back). Returns whether it stepped; errors are the optimizer's or the tensor ops'.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<bool> {
        if !self.enabled {
            opt.step()?;
            return Ok(true);
        }
        self.unscale_(opt)?;
        let skip = match &self.found_inf {
            Some(f) => !f.item()?.is_finite(),
            None => false,
        };
        self.last_skipped = skip;
        if !skip {
            opt.step()?;
        }
        Ok(!skip)
    }
    /// Adjust the scale after a step: back off on overflow, grow after `growth_interval` clean steps.
    pub fn update(&mut self) {
        if !self.enabled {
            return;
        }
        if self.last_skipped {
            self.scale *= self.backoff_factor;
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.growth_interval {
                self.scale *= self.growth_factor;
                self.growth_tracker = 0;
            }
        }
        self.unscaled = false;
        self.found_inf = None;
        self.last_skipped = false;
    }
    /// `(scale, growth_tracker)` for checkpoints, as named scalars.
    pub fn state_dict(&self) -> Vec<(String, f64)> {
        vec![
            ("scale".into(), self.scale),
            ("growth_tracker".into(), self.growth_tracker as f64),
        ]
    }
    /// Restore `scale` and `growth_tracker` from [`GradScaler::state_dict`]'s pairs (other keys
    /// are ignored; the values are not checked).
    pub fn load_state_dict(&mut self, s: &[(String, f64)]) {
        for (k, v) in s {
            match k.as_str() {
                "scale" => self.scale = *v,
                "growth_tracker" => self.growth_tracker = *v as usize,
                _ => {}
            }
        }
    }
}
