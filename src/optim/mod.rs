//! Optimizers (SGD, Adam, AdamW, RMSprop, Adadelta, Adagrad, Adamax, NAdam, RAdam, LBFGS) with
//! parameter groups, learning-rate schedulers and gradient clipping. Updates run on the
//! parameters' device with tensor ops, in place under `no_grad`, with no readback (except
//! LBFGS, which reads scalars back every iteration).
//!
//! PyTorch's loop: build the optimizer from `model.parameters()` (or [`ParamGroup`]s), then per
//! batch `zero_grad`, forward, `backward`, `step`; a scheduler ([`LrScheduler`],
//! [`ReduceLROnPlateau`]) steps after the optimizer.
//!
//! ```
//! use wgtorch::nn::{functional as F, Linear, ModuleExt};
//! use wgtorch::optim::{LrScheduler, Optimizer, ParamGroup, Schedule, Sgd, SgdOptions};
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu;
//! wgtorch::manual_seed(0);
//! let model = Linear::new(3, 1, &dev)?;
//! let x = Tensor::randn([16, 3], &dev)?;
//! let y = x.matmul(&Tensor::from_slice(&[1.0f32, -2.0, 0.5], [3, 1], &dev)?)?;
//!
//! let opts = SgdOptions { lr: 0.1, momentum: 0.9, ..Default::default() };
//! let mut opt = Sgd::with_options(vec![ParamGroup::new(model.parameters())], opts)?;
//! let mut sched = LrScheduler::new(&opt, Schedule::StepLR { step_size: 10, gamma: 0.5 })?;
//! let first = F::mse_loss(&model.forward(&x)?, &y)?.item()?;
//! for _ in 0..20 {
//!     opt.zero_grad(); // PyTorch's optimizer.zero_grad() (set_to_none=True)
//!     let loss = F::mse_loss(&model.forward(&x)?, &y)?;
//!     loss.backward()?;
//!     opt.step()?;
//!     sched.step()?;
//! }
//! let last = F::mse_loss(&model.forward(&x)?, &y)?.item()?;
//! assert!(last < first / 10.0, "{first} -> {last}");
//! assert_eq!(sched.get_last_lr(), [0.025]); // 0.1 halved at steps 10 and 20
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod adam;
mod adam_family;
mod adaptive;
mod clip;
mod lbfgs;
mod rmsprop;
mod sched;
mod sgd;

pub use adam::{Adam, AdamOptions, AdamW, AdamWOptions};
pub use adam_family::{Adamax, AdamaxOptions, NAdam, NAdamOptions, RAdam, RAdamOptions};
pub use adaptive::{Adadelta, AdadeltaOptions, Adagrad, AdagradOptions};
pub use clip::{clip_grad_norm_, clip_grad_value_};
pub use lbfgs::{LBFGSOptions, LineSearch, LBFGS};
pub use rmsprop::{RMSprop, RMSpropOptions};
pub use sched::*;
pub use sgd::{Sgd, SgdOptions};

use crate::{Error, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A parameter group's learning rate: a shared cell, so a scheduler built from `&optimizer`
/// holds handles to its groups' rates and `scheduler.step()` needs no optimizer argument (the
/// PyTorch loop `opt.step(); sched.step();`). Cloning copies the value into a new cell;
/// [`Lr::share`] gives a handle to the same one.
///
/// ```
/// use wgtorch::optim::{Optimizer, Sgd};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([2], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Sgd::new(vec![w], 0.1)?;
/// opt.param_groups_mut()[0].lr.set(0.01); // PyTorch's `group["lr"] = 0.01`
/// assert_eq!(opt.param_groups()[0].lr.get(), 0.01);
/// let handle = opt.param_groups()[0].lr.share();
/// handle.set(0.5);
/// assert_eq!(opt.param_groups()[0].lr.get(), 0.5);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Lr(Arc<AtomicU64>);

impl Lr {
    /// A new cell holding `v`.
    pub fn new(v: f64) -> Lr {
        Lr(Arc::new(AtomicU64::new(v.to_bits())))
    }
    /// The current rate.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
    /// Set the rate (seen by every handle to this cell).
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed)
    }
    /// A handle to the same cell.
    pub fn share(&self) -> Lr {
        Lr(self.0.clone())
    }
    /// The cell's address: the same for every handle `share` made, and unchanged when the
    /// optimizer holding it moves.
    pub(crate) fn cell_id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl Clone for Lr {
    fn clone(&self) -> Lr {
        Lr::new(self.get())
    }
}

impl std::fmt::Debug for Lr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// A set of parameters sharing hyper-parameters (e.g. no weight decay for biases): PyTorch's
/// `{"params": [...], "lr": ..., "weight_decay": ...}` dicts. Unset values take the optimizer's
/// defaults when it is built; a negative value, or a tensor in two groups, is refused there
/// ([`Error::InvalidArgument`]). Cloning gives the clone its own `lr` cell.
///
/// ```
/// use wgtorch::nn::{Linear, ModuleExt};
/// use wgtorch::optim::{Optimizer, ParamGroup, Sgd, SgdOptions};
/// use wgtorch::Device;
/// let fc = Linear::new(4, 2, &Device::Cpu)?;
/// let groups = vec![
///     ParamGroup::new(vec![fc.weight.clone()]).weight_decay(1e-4),
///     ParamGroup::new(vec![fc.bias.clone().unwrap()]).lr(0.01), // no decay on the bias
/// ];
/// let opt = Sgd::with_options(groups, SgdOptions { lr: 0.1, ..Default::default() })?;
/// let g = opt.param_groups();
/// assert_eq!((g[0].lr.get(), g[0].weight_decay), (0.1, 1e-4));
/// assert_eq!((g[1].lr.get(), g[1].weight_decay), (0.01, 0.0));
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ParamGroup {
    /// The parameters (handles sharing the model's tensors).
    pub params: Vec<Tensor>,
    /// Learning rate (`lr.get()`, `lr.set(v)`; schedulers hold handles to it).
    pub lr: Lr,
    /// L2 penalty (decoupled for AdamW).
    pub weight_decay: f64,
}

impl ParamGroup {
    /// A group over `params` whose `lr` and `weight_decay` are left unset (NaN), to be filled
    /// with the optimizer's defaults.
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup {
            params,
            lr: Lr::new(f64::NAN),
            weight_decay: f64::NAN,
        }
    }
    /// Set the learning rate.
    pub fn lr(self, lr: f64) -> Self {
        self.lr.set(lr);
        self
    }
    /// Set the weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = wd;
        self
    }
}

/// An optimizer's state for checkpoints: named state tensors and scalars (PyTorch's
/// `optimizer.state_dict()`, with parameters named by `{group}.{index}`). Save it with
/// [`crate::io::Checkpoint`].
///
/// ```
/// use wgtorch::optim::{Adam, Optimizer};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([3], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Adam::new(vec![w.clone()], 0.1)?;
/// w.square()?.sum_all()?.backward()?;
/// opt.step()?;
/// let state = opt.state_dict();
/// let mut keys: Vec<&str> = state.tensors.iter().map(|(k, _)| k.as_str()).collect();
/// keys.sort();
/// assert_eq!(keys, ["0.0.exp_avg", "0.0.exp_avg_sq"]);
/// // A fresh optimizer over the same parameter resumes from it.
/// let mut resumed = Adam::new(vec![w.clone()], 0.1)?;
/// resumed.load_state_dict(&state)?;
/// assert_eq!(resumed.state_dict().scalars, state.scalars);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct OptimState {
    /// Per-parameter buffers named `{group}.{index}.{buffer}`.
    pub tensors: Vec<(String, Tensor)>,
    /// Step counts and per-group learning rates.
    pub scalars: Vec<(String, f64)>,
}

/// What every optimizer does (PyTorch's `torch.optim.Optimizer`): `zero_grad`, `step`,
/// `step_closure` (PyTorch's `step(closure)`), the parameter groups and the state dict. A
/// `dyn Optimizer` is what [`LrScheduler`], [`ReduceLROnPlateau`] and
/// [`crate::amp::GradScaler`] take.
pub trait Optimizer {
    /// Apply one update from the parameters' `.grad()` (parameters without a gradient are
    /// skipped). Errors come from the tensor ops (e.g. a gradient whose device or shape is not
    /// its parameter's); [`LBFGS`] needs [`Optimizer::step_closure`] and refuses `step`.
    fn step(&mut self) -> Result<()>;
    /// The parameter groups.
    fn param_groups(&self) -> &[ParamGroup];
    /// The parameter groups, mutable (schedulers set `lr` here).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup];
    /// Checkpointable state.
    fn state_dict(&self) -> OptimState;
    /// Restore from `state_dict`, replacing the current state. Everything is checked first (each
    /// key names an existing parameter and a buffer of this optimizer, each buffer has its
    /// parameter's shape, step counts are integers up to 2^53, learning rates valid): an error
    /// names the key and leaves the optimizer unchanged. Buffers are cast to their parameter's
    /// device and floating dtype, as PyTorch does.
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()>;
    /// Apply one update with a closure that re-evaluates the model (zeroes the gradients,
    /// computes the loss, calls `backward`, returns the loss), as `optimizer.step(closure)`.
    /// The closure is called once before the update (LBFGS calls it as often as its line
    /// search needs). Returns the closure's first loss.
    fn step_closure(&mut self, closure: &mut dyn FnMut() -> Result<Tensor>) -> Result<Tensor> {
        let loss = {
            let _g = crate::enable_grad();
            closure()?
        };
        self.step()?;
        Ok(loss)
    }
    /// Clear the gradients of every parameter in every group (PyTorch's `zero_grad()` with its
    /// default `set_to_none=True`: afterwards `p.grad()` is `None`).
    fn zero_grad(&mut self) {
        let _p = crate::profiler::scope("Optimizer.zero_grad");
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
    // A tensor listed twice (a tied weight gathered from two modules) would be stepped twice.
    let mut seen = std::collections::HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        for p in &g.params {
            let msg = match seen.insert(p.id(), i) {
                None => continue,
                Some(j) if j == i => "optimizer contains a parameter group with duplicate parameters (a tensor listed twice, e.g. a tied weight; Module::parameters() lists it once)",
                Some(_) => "some parameters appear in more than one parameter group",
            };
            return Err(Error::arg(op, msg));
        }
    }
    groups
        .into_iter()
        .map(|mut g| {
            if g.lr.get().is_nan() {
                g.lr.set(lr);
            }
            if g.weight_decay.is_nan() {
                g.weight_decay = wd;
            }
            if g.lr.get() < 0.0 || g.weight_decay < 0.0 {
                return Err(Error::arg(
                    op,
                    format!(
                        "Invalid learning rate {} or weight_decay {}",
                        g.lr.get(),
                        g.weight_decay
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

/// An [`OptimState`] checked against the optimizer's groups: every key known, every buffer of its
/// parameter's shape, every scalar valid. Built before anything is applied, so a bad checkpoint is
/// refused at load naming the key (not later in `step()`), and a refused load changes nothing.
pub(crate) struct LoadedState {
    /// The buffers, on their parameters' devices and (floating) dtypes, as PyTorch casts them.
    pub slots: Slots,
    /// Per-parameter step counts (zero where the state has none).
    pub steps: Vec<Vec<u64>>,
    lrs: Vec<Option<f64>>,
}

/// `v` as a count, if it is one that a checkpoint's f64 scalars hold exactly: an integer from 0
/// to 2^53.
pub(crate) fn exact_count(v: f64) -> Option<u64> {
    ((0.0..=9_007_199_254_740_992.0).contains(&v) && v.fract() == 0.0).then_some(v as u64)
}

/// The value of `key` in a scalar state (a scheduler's or a GradScaler's `state_dict`).
pub(crate) fn state_value(op: &'static str, s: &[(String, f64)], key: &str) -> Result<f64> {
    s.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| Error::arg(op, format!("state has no {key}")))
}

/// [`state_value`] as a count ([`exact_count`]).
pub(crate) fn state_count(op: &'static str, s: &[(String, f64)], key: &str) -> Result<usize> {
    let v = state_value(op, s, key)?;
    exact_count(v).map(|c| c as usize).ok_or_else(|| {
        Error::arg(
            op,
            format!("state {key} = {v} is not a count (an integer from 0 to 2^53)"),
        )
    })
}

impl LoadedState {
    /// Check `s` for an optimizer whose per-parameter buffers are `buffers` and whose
    /// per-parameter step counts (if any) are named `step`.
    pub(crate) fn new(
        groups: &[ParamGroup],
        buffers: &[&str],
        step: Option<&str>,
        s: &OptimState,
    ) -> Result<LoadedState> {
        let op = "load_state_dict";
        let unexpected = |k: &str| Error::arg(op, format!("unexpected optimizer state key {k}"));
        // `{group}.{index}` of an existing parameter.
        let param = |gi: &str, pi: &str| -> Option<(usize, usize)> {
            let (gi, pi): (usize, usize) = (gi.parse().ok()?, pi.parse().ok()?);
            groups.get(gi)?.params.get(pi)?;
            Some((gi, pi))
        };
        let mut out = LoadedState {
            slots: empty_slots(groups, buffers.len()),
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            lrs: vec![None; groups.len()],
        };
        for (k, t) in &s.tensors {
            let mut parts = k.splitn(3, '.');
            let (gi, pi, name) = match (parts.next(), parts.next(), parts.next()) {
                (Some(g), Some(i), Some(n)) => (g, i, n),
                _ => return Err(unexpected(k)),
            };
            let (gi, pi) = param(gi, pi).ok_or_else(|| unexpected(k))?;
            let bi = buffers
                .iter()
                .position(|b| *b == name)
                .ok_or_else(|| unexpected(k))?;
            let p = &groups[gi].params[pi];
            if t.shape() != p.shape() {
                return Err(Error::shape(
                    op,
                    format!(
                        "optimizer state {k} has shape {:?} but its parameter {gi}.{pi} has shape {:?}",
                        t.shape(),
                        p.shape()
                    ),
                ));
            }
            let mut t = t.detach();
            if p.dtype().is_float() {
                t = t.to_dtype(p.dtype())?;
            }
            out.slots[gi][pi][bi] = Some(t.to(&p.device())?);
        }
        for (k, v) in &s.scalars {
            let v = *v;
            let invalid =
                |what: &str| Error::arg(op, format!("optimizer state {k} = {v} is not {what}"));
            match k.split('.').collect::<Vec<_>>()[..] {
                ["lr", gi] => {
                    let gi = gi.parse::<usize>().ok().filter(|&g| g < groups.len());
                    let gi = gi.ok_or_else(|| unexpected(k))?;
                    if v.is_nan() || v < 0.0 {
                        return Err(invalid("a valid learning rate"));
                    }
                    out.lrs[gi] = Some(v);
                }
                [name, gi, pi] if Some(name) == step => {
                    let (gi, pi) = param(gi, pi).ok_or_else(|| unexpected(k))?;
                    out.steps[gi][pi] = exact_count(v)
                        .ok_or_else(|| invalid("a step count (an integer from 0 to 2^53)"))?;
                }
                _ => return Err(unexpected(k)),
            }
        }
        Ok(out)
    }

    /// Set the groups' learning rates from the state (saved so a resumed scheduler continues
    /// exactly); groups without one keep theirs.
    pub(crate) fn apply_lrs(&self, groups: &mut [ParamGroup]) {
        for (g, lr) in groups.iter_mut().zip(&self.lrs) {
            if let Some(lr) = lr {
                g.lr.set(*lr);
            }
        }
    }
}

/// Learning rates of the groups are saved too, so a resumed scheduler continues exactly.
pub(crate) fn save_lrs(groups: &[ParamGroup], out: &mut OptimState) {
    for (i, g) in groups.iter().enumerate() {
        out.scalars.push((format!("lr.{i}"), g.lr.get()));
    }
}

/// Write `v` into the parameter `p` in place (no graph).
pub(crate) fn assign(p: &Tensor, v: &Tensor) -> Result<()> {
    let _g = crate::no_grad();
    p.copy_(v).map(|_| ())
}

/// Check a hyper-parameter with PyTorch's message (`Invalid {what}: {v}`) when `ok` fails.
pub(crate) fn check(
    op: &'static str,
    ok: bool,
    what: &str,
    v: impl std::fmt::Display,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::arg(op, format!("Invalid {what}: {v}")))
    }
}

/// PyTorch's checks of `eps` and `betas` for the Adam family.
pub(crate) fn check_eps_betas(op: &'static str, eps: f64, (b1, b2): (f64, f64)) -> Result<()> {
    check(op, eps >= 0.0, "epsilon value", eps)?;
    check(
        op,
        (0.0..1.0).contains(&b1),
        "beta parameter at index 0",
        b1,
    )?;
    check(
        op,
        (0.0..1.0).contains(&b2),
        "beta parameter at index 1",
        b2,
    )
}

/// The gradient an update uses: `p.grad()` negated under `maximize`, plus `weight_decay * p`
/// (L2) when `l2`; `None` when the parameter has no gradient.
pub(crate) fn grad_of(p: &Tensor, maximize: bool, l2: bool, wd: f64) -> Result<Option<Tensor>> {
    let Some(mut d) = p.grad() else {
        return Ok(None);
    };
    if maximize {
        d = d.neg()?;
    }
    if l2 && wd != 0.0 {
        d = d.add(&p.mul_scalar(wd)?)?;
    }
    Ok(Some(d))
}

/// A state buffer that a fused kernel is about to write in place: itself when no other tensor
/// reaches its storage, else a copy, so that a `state_dict()` taken earlier keeps its values and
/// two optimizers that loaded one state do not write one buffer.
pub(crate) fn private_buffer(b: &Tensor) -> Result<Tensor> {
    if Arc::strong_count(&b.0) == 1 && Arc::strong_count(&b.0.storage) == 1 {
        Ok(b.clone())
    } else {
        b.detach().copy()
    }
}

/// A buffer, or zeros like `p` on first use.
pub(crate) fn buf_or_zeros(b: &Option<Tensor>, p: &Tensor) -> Result<Tensor> {
    match b {
        Some(t) => Ok(t.clone()),
        None => p.detach().zeros_like(),
    }
}

/// `param_groups`, `state_dict` and `load_state_dict` of an optimizer whose per-parameter state
/// is `slots` (buffers named `$names`) and `steps` (saved as `step.{group}.{index}`); `$after`
/// is called on the optimizer after a load (to rebuild derived state).
macro_rules! slots_and_steps {
    ($names:expr) => {
        slots_and_steps!($names, |_s: &mut Self| {});
    };
    ($names:expr, $after:expr) => {
        fn param_groups(&self) -> &[ParamGroup] {
            &self.groups
        }
        fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
            &mut self.groups
        }
        fn state_dict(&self) -> OptimState {
            let mut s = OptimState::default();
            save_slots(&self.slots, &$names, &mut s);
            for (gi, g) in self.steps.iter().enumerate() {
                for (pi, &n) in g.iter().enumerate() {
                    s.scalars.push((format!("step.{gi}.{pi}"), n as f64));
                }
            }
            save_lrs(&self.groups, &mut s);
            s
        }
        fn load_state_dict(&mut self, s: &OptimState) -> Result<()> {
            let l = LoadedState::new(&self.groups, &$names, Some("step"), s)?;
            l.apply_lrs(&mut self.groups);
            self.slots = l.slots;
            self.steps = l.steps;
            let after: fn(&mut Self) = $after;
            after(self);
            Ok(())
        }
    };
}
pub(crate) use slots_and_steps;
