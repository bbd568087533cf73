//! GradScaler with PyTorch's defaults and update rule.

use crate::optim::{state_count, state_value, Optimizer};
use crate::{Error, Result, Tensor};

/// Scales the loss so f16 gradients do not underflow, unscales before the step, and skips steps
/// whose gradients hold inf or NaN (found on the device with one reduction and a single scalar
/// read). Master weights stay f32. PyTorch's `torch.amp.GradScaler` and its loop:
/// `scaler.scale(&loss)?.backward()?; scaler.step(&mut opt)?; scaler.update()?;` (with
/// `scaler.unscale_(&mut opt)?` before `step` to clip true gradients). With several
/// optimizers, each is unscaled, checked and stepped on its own (PyTorch's per-optimizer
/// state); `update` backs off if any of them found inf or NaN.
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
/// scaler.update()?;
/// assert_eq!(scaler.get_scale(), 32768.0);
/// assert_eq!(w.to_vec::<f32>()?, [1.0, 1.0]);
///
/// // A clean step runs with the unscaled gradient (1 per element).
/// opt.zero_grad();
/// scaler.scale(&w.sum_all()?)?.backward()?;
/// assert!(scaler.step(&mut opt)?);
/// scaler.update()?;
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
    /// Per optimizer (see `key`) since the last `update`: PyTorch's `_per_optimizer_states`.
    optimizers: Vec<(usize, OptState)>,
}

/// Where one optimizer is in the current iteration.
#[derive(Clone, Debug)]
struct OptState {
    /// The device-side sum that is NaN when a gradient held inf or NaN (None: no gradients).
    found_inf: Option<Tensor>,
    /// Whether the inf check said to skip, once `step` has read it.
    skipped: Option<bool>,
}

/// An optimizer's identity for the current iteration (PyTorch keys by `id(optimizer)`): its
/// first group's learning-rate cell, which stays put when the optimizer value moves (its own
/// address would not, and a moved optimizer would then be unscaled twice).
fn key(opt: &dyn Optimizer) -> usize {
    match opt.param_groups().first() {
        Some(g) => g.lr.cell_id(),
        None => opt as *const dyn Optimizer as *const () as usize,
    }
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
            optimizers: Vec::new(),
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
    /// Where `opt`'s state for this iteration is in `optimizers`, if it has one.
    fn slot(&self, opt: &dyn Optimizer) -> Option<usize> {
        let k = key(opt);
        self.optimizers.iter().position(|(o, _)| *o == k)
    }
    /// Divide the optimizer's gradients by the scale in place (so clipping sees true values) and
    /// record whether any is inf or NaN (on the device; nothing is read back here). Does nothing
    /// when disabled. Errors, as PyTorch's: a second call for the same optimizer before
    /// [`GradScaler::update`] (its gradients would be divided twice), a call after `step`; and
    /// the tensor ops' errors.
    pub fn unscale_(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if let Some(i) = self.slot(opt) {
            let msg = if self.optimizers[i].1.skipped.is_some() {
                "unscale_() is being called after step()."
            } else {
                "unscale_() has already been called on this optimizer since the last update()."
            };
            return Err(Error::arg("GradScaler.unscale_", msg));
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
        let state = OptState {
            found_inf: flag,
            skipped: None,
        };
        self.optimizers.push((key(opt), state));
        Ok(())
    }
    /// Unscale this optimizer's gradients if [`GradScaler::unscale_`] has not, then
    /// `opt.step()` unless one of them is inf or NaN (one scalar read back). Returns whether it
    /// stepped. Errors: a second `step` for the same optimizer before
    /// [`GradScaler::update`] (PyTorch's), and the optimizer's or the tensor ops' errors. In
    /// the browser, use [`GradScaler::step_async`] (a GPU read cannot block there).
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<bool> {
        crate::tensor::block_on(self.step_async(opt))
    }
    /// [`GradScaler::step`] that awaits the inf check's read instead of blocking.
    pub async fn step_async(&mut self, opt: &mut dyn Optimizer) -> Result<bool> {
        if !self.enabled {
            opt.step()?;
            return Ok(true);
        }
        let i = match self.slot(opt) {
            Some(i) => i,
            None => {
                self.unscale_(opt)?; // records the optimizer's state last
                self.optimizers.len() - 1
            }
        };
        let st = &mut self.optimizers[i].1;
        if st.skipped.is_some() {
            return Err(Error::arg(
                "GradScaler.step",
                "step() has already been called since the last update().",
            ));
        }
        let skip = match &st.found_inf {
            Some(f) => !f.item_async().await?.is_finite(),
            None => false,
        };
        st.skipped = Some(skip);
        if !skip {
            opt.step()?;
        }
        Ok(!skip)
    }
    /// End the iteration: back off (`scale * backoff_factor`) if any optimizer's step found inf
    /// or NaN, else count a clean iteration and grow (`scale * growth_factor`) after
    /// `growth_interval` of them; then forget the optimizers' states. Does nothing when disabled.
    /// Errors with PyTorch's "No inf checks were recorded prior to update." when no optimizer
    /// was unscaled or stepped since the last update (a loop that forgot `step`). In the
    /// browser, use [`GradScaler::update_async`].
    pub fn update(&mut self) -> Result<()> {
        crate::tensor::block_on(self.update_async())
    }
    /// [`GradScaler::update`] that awaits its reads (only an optimizer unscaled but not stepped
    /// needs one) instead of blocking.
    pub async fn update_async(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if self.optimizers.is_empty() {
            return Err(Error::arg(
                "GradScaler.update",
                "No inf checks were recorded prior to update.",
            ));
        }
        // An optimizer only unscaled (never stepped) still counts, as in PyTorch: read its flag.
        let mut found_inf = false;
        for (_, st) in &self.optimizers {
            found_inf |= match (st.skipped, &st.found_inf) {
                (Some(s), _) => s,
                (None, Some(f)) => !f.item_async().await?.is_finite(),
                (None, None) => false,
            };
        }
        if found_inf {
            self.scale *= self.backoff_factor;
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.growth_interval {
                self.scale *= self.growth_factor;
                self.growth_tracker = 0;
            }
        }
        self.optimizers.clear();
        Ok(())
    }
    /// `scale` and `growth_tracker`, for [`GradScaler::load_state_dict`].
    pub fn state_dict(&self) -> Vec<(String, f64)> {
        vec![
            ("scale".into(), self.scale),
            ("growth_tracker".into(), self.growth_tracker as f64),
        ]
    }
    /// Restore [`GradScaler::state_dict`]'s values. Errors (leaving the scaler as it was): a
    /// missing or unknown key, a scale that is not a positive finite number, a growth tracker
    /// that is not a count.
    pub fn load_state_dict(&mut self, s: &[(String, f64)]) -> Result<()> {
        let op = "GradScaler.load_state_dict";
        if let Some((k, _)) = s
            .iter()
            .find(|(k, _)| k != "scale" && k != "growth_tracker")
        {
            return Err(Error::arg(op, format!("unexpected state key {k}")));
        }
        let scale = state_value(op, s, "scale")?;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(Error::arg(
                op,
                format!("scale = {scale} is not a positive finite number"),
            ));
        }
        let tracker = state_count(op, s, "growth_tracker")?;
        self.scale = scale;
        self.growth_tracker = tracker;
        Ok(())
    }
}
