//! Optimizers (SGD, Adam, AdamW, RMSprop) with parameter groups, learning-rate schedulers and
//! gradient clipping. Updates run on the parameters' device with tensor ops, in place under
//! `no_grad`, with no readback.

mod adam;
mod clip;
mod rmsprop;
mod sched;
mod sgd;

pub use adam::{Adam, AdamW};
pub use clip::{clip_grad_norm_, clip_grad_value_};
pub use rmsprop::RMSprop;
pub use sched::*;
pub use sgd::Sgd;

use crate::{Error, Result, Tensor};

/// A set of parameters sharing hyper-parameters (e.g. no weight decay for biases).
#[derive(Clone, Debug)]
pub struct ParamGroup {
    /// The parameters (handles sharing the model's tensors).
    pub params: Vec<Tensor>,
    /// Learning rate.
    pub lr: f64,
    /// L2 penalty (decoupled for AdamW).
    pub weight_decay: f64,
}

impl ParamGroup {
    /// A group with the optimizer's defaults to be filled in.
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup {
            params,
            lr: f64::NAN,
            weight_decay: f64::NAN,
        }
    }
    /// Set the learning rate.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }
    /// Set the weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = wd;
        self
    }
}

/// An optimizer's state for checkpoints: named state tensors and scalars.
#[derive(Clone, Debug, Default)]
pub struct OptimState {
    /// Per-parameter buffers named `{group}.{index}.{buffer}`.
    pub tensors: Vec<(String, Tensor)>,
    /// Step counts and per-group learning rates.
    pub scalars: Vec<(String, f64)>,
}

/// What every optimizer does.
pub trait Optimizer {
    /// Apply one update from the parameters' `.grad()`.
    fn step(&mut self) -> Result<()>;
    /// The parameter groups.
    fn param_groups(&self) -> &[ParamGroup];
    /// The parameter groups, mutable (schedulers set `lr` here).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup];
    /// Checkpointable state.
    fn state_dict(&self) -> OptimState;
    /// Restore from `state_dict`.
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()>;
    /// Clear the gradients (PyTorch's default `set_to_none=True`).
    fn zero_grad(&mut self) {
        for g in self.param_groups() {
            for p in &g.params {
                p.set_grad(None);
            }
        }
    }
}

/// Fill a group's unset hyper-parameters with the optimizer's defaults and validate them.
pub(crate) fn resolve_groups(
    op: &'static str,
    groups: Vec<ParamGroup>,
    lr: f64,
    wd: f64,
) -> Result<Vec<ParamGroup>> {
    if lr.is_nan() || lr < 0.0 {
        return Err(Error::arg(op, format!("Invalid learning rate: {lr}")));
    }
    groups
        .into_iter()
        .map(|mut g| {
            if g.lr.is_nan() {
                g.lr = lr;
            }
            if g.weight_decay.is_nan() {
                g.weight_decay = wd;
            }
            if g.lr < 0.0 || g.weight_decay < 0.0 {
                return Err(Error::arg(
                    op,
                    format!(
                        "Invalid learning rate {} or weight_decay {}",
                        g.lr, g.weight_decay
                    ),
                ));
            }
            Ok(g)
        })
        .collect()
}

/// Per-parameter state buffers, indexed like the groups.
pub(crate) type Slots = Vec<Vec<Vec<Option<Tensor>>>>;

pub(crate) fn empty_slots(groups: &[ParamGroup], buffers: usize) -> Slots {
    groups
        .iter()
        .map(|g| g.params.iter().map(|_| vec![None; buffers]).collect())
        .collect()
}

pub(crate) fn save_slots(slots: &Slots, names: &[&str], out: &mut OptimState) {
    for (gi, g) in slots.iter().enumerate() {
        for (pi, p) in g.iter().enumerate() {
            for (bi, b) in p.iter().enumerate() {
                if let Some(t) = b {
                    out.tensors
                        .push((format!("{gi}.{pi}.{}", names[bi]), t.clone()));
                }
            }
        }
    }
}

pub(crate) fn load_slots(slots: &mut Slots, names: &[&str], s: &OptimState) -> Result<()> {
    for (k, t) in &s.tensors {
        let parts: Vec<&str> = k.split('.').collect();
        let bad = || {
            Error::arg(
                "load_state_dict",
                format!("unexpected optimizer state key {k}"),
            )
        };
        if parts.len() != 3 {
            return Err(bad());
        }
        let gi: usize = parts[0].parse().map_err(|_| bad())?;
        let pi: usize = parts[1].parse().map_err(|_| bad())?;
        let bi = names.iter().position(|n| *n == parts[2]).ok_or_else(bad)?;
        let slot = slots
            .get_mut(gi)
            .and_then(|g| g.get_mut(pi))
            .ok_or_else(bad)?;
        slot[bi] = Some(t.clone());
    }
    Ok(())
}

pub(crate) fn scalar(s: &OptimState, name: &str) -> Option<f64> {
    s.scalars.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
}

/// Learning rates of the groups are saved too, so a resumed scheduler continues exactly.
pub(crate) fn save_lrs(groups: &[ParamGroup], out: &mut OptimState) {
    for (i, g) in groups.iter().enumerate() {
        out.scalars.push((format!("lr.{i}"), g.lr));
    }
}
pub(crate) fn load_lrs(groups: &mut [ParamGroup], s: &OptimState) {
    for (i, g) in groups.iter_mut().enumerate() {
        if let Some(v) = scalar(s, &format!("lr.{i}")) {
            g.lr = v;
        }
    }
}

/// Write `v` into the parameter `p` in place (no graph).
pub(crate) fn assign(p: &Tensor, v: &Tensor) -> Result<()> {
    let _g = crate::no_grad();
    p.copy_(v).map(|_| ())
}
