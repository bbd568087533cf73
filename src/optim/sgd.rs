//! Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

use super::*;

/// SGD with PyTorch's update rule.
///
/// ```
/// use wgtorch::optim::{Optimizer, Sgd};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Sgd::new(vec![w.clone()], 0.1)?;
/// w.square()?.sum_all()?.backward()?;
/// opt.step()?;
/// assert_eq!(w.to_vec::<f32>()?, vec![0.8, 0.8]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Sgd {
    groups: Vec<ParamGroup>,
    /// Momentum factor.
    pub momentum: f64,
    /// Dampening for momentum.
    pub dampening: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// Ascend the objective instead (PyTorch's `maximize`; default false): set the field.
    pub maximize: bool,
    slots: Slots,
}

/// Options of [`Sgd`] (torch.optim.SGD's keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdOptions {
    /// Learning rate (default 1e-3).
    pub lr: f64,
    /// Momentum factor (default 0).
    pub momentum: f64,
    /// Dampening for momentum (default 0).
    pub dampening: f64,
    /// L2 penalty (default 0).
    pub weight_decay: f64,
    /// Nesterov momentum (default false; needs a momentum and zero dampening).
    pub nesterov: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for SgdOptions {
    fn default() -> Self {
        SgdOptions {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
        }
    }
}

impl Sgd {
    /// Plain SGD over `params` with learning rate `lr`.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Sgd> {
        let o = SgdOptions {
            lr,
            ..Default::default()
        };
        Sgd::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: SgdOptions) -> Result<Sgd> {
        let SgdOptions {
            lr,
            momentum,
            dampening,
            weight_decay,
            nesterov,
            maximize,
        } = o;
        check("SGD", lr >= 0.0, "learning rate", lr)?;
        check("SGD", momentum >= 0.0, "momentum value", momentum)?;
        check(
            "SGD",
            weight_decay >= 0.0,
            "weight_decay value",
            weight_decay,
        )?;
        if nesterov && (momentum <= 0.0 || dampening != 0.0) {
            return Err(Error::arg(
                "SGD",
                "Nesterov momentum requires a momentum and zero dampening",
            ));
        }
        let groups = resolve_groups("SGD", groups, lr, weight_decay)?;
        let slots = empty_slots(&groups, 1);
        Ok(Sgd {
            groups,
            momentum,
            dampening,
            nesterov,
            maximize,
            slots,
        })
    }
}

impl Sgd {
    /// One kernel per parameter (one pass over the parameter, its gradient and the momentum
    /// buffer) instead of up to seven tensor ops and a copy, when they are dense f32 on one
    /// device: the same operations in the same order, so the same values (bit for bit on the
    /// CPU). Returns false, having done nothing, otherwise.
    fn fused_step(
        (momentum, dampening, nesterov): (f64, f64, bool),
        p: &Tensor,
        d: &Tensor,
        slot: &mut Option<Tensor>,
        g: &ParamGroup,
    ) -> Result<bool> {
        use super::adam::dense_f32;
        let buf_ok = |b: &Tensor| {
            dense_f32(b)
                && b.device() == p.device()
                && b.numel() == p.numel()
                && !b.shares_storage_with(p)
                && !b.shares_storage_with(d)
        };
        if !dense_f32(p)
            || d.dtype() != p.dtype()
            || d.device() != p.device()
            || d.shape() != p.shape()
            || d.shares_storage_with(p)
            || (momentum != 0.0 && !slot.as_ref().is_none_or(buf_ok))
            // A decay that f32 rounds to 0 still adds `p·0` in the ops (-0 becomes +0).
            || (g.weight_decay != 0.0 && g.weight_decay as f32 == 0.0)
        {
            return Ok(false);
        }
        // A transposed gradient (a Linear weight's, for one) is copied once rather than losing
        // the fused kernel.
        let d = &d.dense()?;
        crate::onnx::trace::before_write(p, "sgd step")?;
        let first = momentum != 0.0 && slot.is_none();
        // The buffer the kernel writes: new on its first step (it becomes the gradient), and
        // kept in the slot only once the step is done, so a failed step leaves no zeros there.
        let buf = match slot {
            _ if momentum == 0.0 => None,
            None => Some(Tensor::zeros(p.shape(), &p.device())?),
            Some(b) => Some(private_buffer(b)?),
        };
        let h = crate::backend::SgdStep {
            lr: g.lr.get() as f32,
            momentum: momentum as f32,
            undamped: (1.0 - dampening) as f32,
            weight_decay: g.weight_decay as f32,
            nesterov,
            first,
        };
        {
            let mut pw = p.0.storage.data.write();
            let gr = d.storage();
            match &buf {
                Some(b) => {
                    let mut bw = b.0.storage.data.write();
                    pw.sgd(&gr, Some(&mut bw), p.numel(), h)?;
                }
                None => pw.sgd(&gr, None, p.numel(), h)?,
            }
        }
        p.0.storage.bump();
        if let Some(b) = buf {
            b.0.storage.bump();
            *slot = Some(b);
        }
        Ok(true)
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#Sgd.step");
        let _g = crate::no_grad();
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(mut d) = grad_of(p, self.maximize, false, 0.0)? else {
                    continue;
                };
                let hyper = (self.momentum, self.dampening, self.nesterov);
                if Sgd::fused_step(hyper, p, &d, &mut self.slots[gi][pi][0], g)? {
                    continue;
                }
                if g.weight_decay != 0.0 {
                    d = d.add(&p.mul_scalar(g.weight_decay)?)?;
                }
                if self.momentum != 0.0 {
                    let slot = &mut self.slots[gi][pi][0];
                    let buf = match slot.take() {
                        None => d.clone(),
                        Some(b) => b
                            .mul_scalar(self.momentum)?
                            .add(&d.mul_scalar(1.0 - self.dampening)?)?,
                    };
                    d = if self.nesterov {
                        d.add(&buf.mul_scalar(self.momentum)?)?
                    } else {
                        buf.clone()
                    };
                    *slot = Some(buf);
                }
                assign(p, &p.sub(&d.mul_scalar(g.lr.get())?)?)?;
            }
        }
        Ok(())
    }
    fn param_groups(&self) -> &[ParamGroup] {
        &self.groups
    }
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        &mut self.groups
    }
    fn state_dict(&self) -> OptimState {
        let mut s = OptimState::default();
        save_slots(&self.slots, &["momentum_buffer"], &mut s);
        save_lrs(&self.groups, &mut s);
        s
    }
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()> {
        let l = LoadedState::new(&self.groups, &["momentum_buffer"], None, s)?;
        l.apply_lrs(&mut self.groups);
        self.slots = l.slots;
        Ok(())
    }
}
