//! RMSprop with momentum and the centered variant.

use super::*;

const NAMES: [&str; 3] = ["square_avg", "momentum_buffer", "grad_avg"];

/// RMSprop with PyTorch's update rule (alpha 0.99, eps 1e-8 by default).
pub struct RMSprop {
    groups: Vec<ParamGroup>,
    /// Smoothing constant.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Momentum factor.
    pub momentum: f64,
    /// Normalise by the centered second moment.
    pub centered: bool,
    /// Ascend the objective instead (PyTorch's `maximize`; default false): set the field.
    pub maximize: bool,
    slots: Slots,
}

/// Options of [`RMSprop`] (torch.optim.RMSprop's keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RMSpropOptions {
    /// Learning rate (default 1e-2).
    pub lr: f64,
    /// Smoothing constant (default 0.99).
    pub alpha: f64,
    /// Added to the denominator (default 1e-8).
    pub eps: f64,
    /// L2 penalty (default 0).
    pub weight_decay: f64,
    /// Momentum factor (default 0).
    pub momentum: f64,
    /// Normalise by the centered second moment (default false).
    pub centered: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for RMSpropOptions {
    fn default() -> Self {
        RMSpropOptions {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

impl RMSprop {
    /// RMSprop over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<RMSprop> {
        let o = RMSpropOptions {
            lr,
            ..Default::default()
        };
        RMSprop::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: RMSpropOptions) -> Result<RMSprop> {
        let op = "RMSprop";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        check(op, o.eps >= 0.0, "epsilon value", o.eps)?;
        check(op, o.momentum >= 0.0, "momentum value", o.momentum)?;
        check(
            op,
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        check(op, o.alpha >= 0.0, "alpha value", o.alpha)?;
        let groups = resolve_groups(op, groups, o.lr, o.weight_decay)?;
        let slots = empty_slots(&groups, 3);
        Ok(RMSprop {
            groups,
            alpha: o.alpha,
            eps: o.eps,
            momentum: o.momentum,
            centered: o.centered,
            maximize: o.maximize,
            slots,
        })
    }
}

impl Optimizer for RMSprop {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#RMSprop.step");
        let _g = crate::no_grad();
        let a = self.alpha;
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(mut d) = grad_of(p, self.maximize, false, 0.0)? else {
                    continue;
                };
                if g.weight_decay != 0.0 {
                    d = d.add(&p.mul_scalar(g.weight_decay)?)?;
                }
                let s = &mut self.slots[gi][pi];
                let sq = match &s[0] {
                    Some(v) => v.mul_scalar(a)?.add(&d.square()?.mul_scalar(1.0 - a)?)?,
                    None => d.square()?.mul_scalar(1.0 - a)?,
                };
                let avg = if self.centered {
                    let ga = match &s[2] {
                        Some(v) => v.mul_scalar(a)?.add(&d.mul_scalar(1.0 - a)?)?,
                        None => d.mul_scalar(1.0 - a)?,
                    };
                    let r = sq.sub(&ga.square()?)?.sqrt()?.add_scalar(self.eps)?;
                    s[2] = Some(ga);
                    r
                } else {
                    sq.sqrt()?.add_scalar(self.eps)?
                };
                let upd = if self.momentum > 0.0 {
                    let buf = match &s[1] {
                        Some(b) => b.mul_scalar(self.momentum)?.add(&d.div(&avg)?)?,
                        None => d.div(&avg)?,
                    };
                    s[1] = Some(buf.clone());
                    buf
                } else {
                    d.div(&avg)?
                };
                s[0] = Some(sq);
                assign(p, &p.sub(&upd.mul_scalar(g.lr.get())?)?)?;
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
        save_slots(&self.slots, &NAMES, &mut s);
        save_lrs(&self.groups, &mut s);
        s
    }
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()> {
        let l = LoadedState::new(&self.groups, &NAMES, None, s)?;
        l.apply_lrs(&mut self.groups);
        self.slots = l.slots;
        Ok(())
    }
}
