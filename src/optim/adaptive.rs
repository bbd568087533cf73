//! Adadelta and Adagrad: per-coordinate step sizes from accumulated squared gradients.

use super::*;

const ADADELTA: [&str; 2] = ["square_avg", "acc_delta"];
const ADAGRAD: [&str; 1] = ["sum"];

/// Options of [`Adadelta`] (torch.optim.Adadelta's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct AdadeltaOptions {
    /// Scale of the delta (default 1).
    pub lr: f64,
    /// Decay of the running averages, in [0, 1] (default 0.9).
    pub rho: f64,
    /// Added inside the square roots (default 1e-6).
    pub eps: f64,
    /// L2 penalty (default 0).
    pub weight_decay: f64,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for AdadeltaOptions {
    fn default() -> Self {
        AdadeltaOptions {
            lr: 1.0,
            rho: 0.9,
            eps: 1e-6,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// Adadelta with PyTorch's update rule.
///
/// ```
/// use wgtorch::optim::{Adadelta, Optimizer};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Adadelta::new(vec![w.clone()], 1.0)?;
/// w.square()?.sum_all()?.backward()?;
/// opt.step()?;
/// assert!(w.to_vec::<f32>()?[0] < 1.0);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Adadelta {
    groups: Vec<ParamGroup>,
    o: AdadeltaOptions,
    steps: Vec<Vec<u64>>,
    slots: Slots,
}

impl Adadelta {
    /// Adadelta over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adadelta> {
        let o = AdadeltaOptions {
            lr,
            ..Default::default()
        };
        Adadelta::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: AdadeltaOptions) -> Result<Adadelta> {
        let op = "Adadelta";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        check(op, (0.0..=1.0).contains(&o.rho), "rho value", o.rho)?;
        check(op, o.eps >= 0.0, "epsilon value", o.eps)?;
        check(
            op,
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        let groups = resolve_groups(op, groups, o.lr, o.weight_decay)?;
        Ok(Adadelta {
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            slots: empty_slots(&groups, 2),
            groups,
            o,
        })
    }
}

impl Optimizer for Adadelta {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#Adadelta.step");
        let _g = crate::no_grad();
        let rho = self.o.rho;
        let eps = self.o.eps;
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(d) = grad_of(p, self.o.maximize, true, g.weight_decay)? else {
                    continue;
                };
                self.steps[gi][pi] += 1;
                let s = &mut self.slots[gi][pi];
                let sq = buf_or_zeros(&s[0], p)?
                    .mul_scalar(rho)?
                    .add(&d.square()?.mul_scalar(1.0 - rho)?)?;
                let std = sq.add_scalar(eps)?.sqrt()?;
                let acc = buf_or_zeros(&s[1], p)?;
                let delta = acc.add_scalar(eps)?.sqrt()?.div(&std)?.mul(&d)?;
                let acc = acc
                    .mul_scalar(rho)?
                    .add(&delta.square()?.mul_scalar(1.0 - rho)?)?;
                assign(p, &p.sub(&delta.mul_scalar(g.lr.get())?)?)?;
                s[0] = Some(sq);
                s[1] = Some(acc);
            }
        }
        Ok(())
    }
    slots_and_steps!(ADADELTA);
}

/// Options of [`Adagrad`] (torch.optim.Adagrad's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct AdagradOptions {
    /// Learning rate (default 0.01).
    pub lr: f64,
    /// The rate at step t is `lr / (1 + (t - 1) lr_decay)` (default 0).
    pub lr_decay: f64,
    /// L2 penalty (default 0).
    pub weight_decay: f64,
    /// Starting value of the squared-gradient sums (default 0).
    pub initial_accumulator_value: f64,
    /// Added to the denominator (default 1e-10).
    pub eps: f64,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for AdagradOptions {
    fn default() -> Self {
        AdagradOptions {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// Adagrad with PyTorch's update rule.
pub struct Adagrad {
    groups: Vec<ParamGroup>,
    o: AdagradOptions,
    steps: Vec<Vec<u64>>,
    slots: Slots,
}

impl Adagrad {
    /// Adagrad over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adagrad> {
        let o = AdagradOptions {
            lr,
            ..Default::default()
        };
        Adagrad::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: AdagradOptions) -> Result<Adagrad> {
        let op = "Adagrad";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        check(op, o.lr_decay >= 0.0, "lr_decay value", o.lr_decay)?;
        check(
            op,
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        let iav = o.initial_accumulator_value;
        check(op, iav >= 0.0, "initial_accumulator_value value", iav)?;
        check(op, o.eps >= 0.0, "epsilon value", o.eps)?;
        let groups = resolve_groups(op, groups, o.lr, o.weight_decay)?;
        Ok(Adagrad {
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            slots: empty_slots(&groups, 1),
            groups,
            o,
        })
    }
}

impl Optimizer for Adagrad {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#Adagrad.step");
        let _g = crate::no_grad();
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(d) = grad_of(p, self.o.maximize, true, g.weight_decay)? else {
                    continue;
                };
                self.steps[gi][pi] += 1;
                let step = self.steps[gi][pi] as f64;
                let clr = g.lr.get() / (1.0 + (step - 1.0) * self.o.lr_decay);
                let s = &mut self.slots[gi][pi];
                let sum = match &s[0] {
                    Some(t) => t.clone(),
                    None => p.detach().full_like(self.o.initial_accumulator_value)?,
                }
                .add(&d.square()?)?;
                let std = sum.sqrt()?.add_scalar(self.o.eps)?;
                assign(p, &p.sub(&d.div(&std)?.mul_scalar(clr)?)?)?;
                s[0] = Some(sum);
            }
        }
        Ok(())
    }
    slots_and_steps!(ADAGRAD);
}
