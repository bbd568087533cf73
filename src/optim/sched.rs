//! Learning-rate schedulers with PyTorch's schedules, in closed form per epoch (so a resumed run
//! lands exactly where it left off), and [`ReduceLROnPlateau`]. A scheduler is built from
//! `&optimizer` and holds handles to its groups' rates ([`super::Lr`]), so the loop reads as
//! PyTorch's: `opt.step()?; sched.step()?;` after each epoch (or iteration, for OneCycleLR).

use super::{state_count, state_value, Lr, Optimizer};
use crate::{Error, Result};
use std::f64::consts::PI;

/// A schedule: a group's learning rate as a function of the epoch (or iteration) and the group's
/// base rate, one variant per `torch.optim.lr_scheduler` class, in PyTorch's closed form. Field
/// names are PyTorch's keywords in snake case (`T_max` is `t_max`); PyTorch's defaults are noted
/// where it has them (an enum has no `Default`: write every field). Drive it with
/// [`LrScheduler`], or evaluate it with [`Schedule::lr_at`].
///
/// ```
/// use wgtorch::optim::Schedule;
/// let warmup_then_cosine = Schedule::SequentialLR {
///     schedules: vec![
///         Schedule::LinearLR { start_factor: 0.1, end_factor: 1.0, total_iters: 5 },
///         Schedule::CosineAnnealingLR { t_max: 10, eta_min: 0.0 },
///     ],
///     milestones: vec![5],
/// };
/// let lr: Vec<f64> = (0..16).map(|e| warmup_then_cosine.lr_at(e, 1.0)).collect();
/// assert!((lr[0] - 0.1).abs() < 1e-12); // warm-up starts at base * start_factor
/// assert_eq!(lr[5], 1.0); // the cosine restarts from its own epoch 0
/// assert!(lr[15].abs() < 1e-12); // and reaches eta_min after t_max epochs
/// ```
#[derive(Clone, Debug)]
pub enum Schedule {
    /// `base * gamma^(epoch / step_size)` (integer division): decay by `gamma` every
    /// `step_size` epochs.
    StepLR {
        /// Epochs between decays; [`LrScheduler::new`] refuses 0.
        step_size: usize,
        /// Multiplicative decay (PyTorch's default 0.1).
        gamma: f64,
    },
    /// `base * gamma^(number of milestones <= epoch)`.
    MultiStepLR {
        /// Epochs at which the rate decays (a milestone listed twice decays twice, as PyTorch's).
        milestones: Vec<usize>,
        /// Multiplicative decay (PyTorch's default 0.1).
        gamma: f64,
    },
    /// `base * gamma^epoch`.
    ExponentialLR {
        /// Multiplicative decay per epoch.
        gamma: f64,
    },
    /// `eta_min + (base - eta_min) * (1 + cos(pi * epoch / t_max)) / 2`: cosine from base to
    /// `eta_min` over `t_max` epochs (and back up after, as PyTorch's closed form).
    CosineAnnealingLR {
        /// Half-period in epochs (PyTorch's `T_max`); [`LrScheduler::new`] refuses 0.
        t_max: usize,
        /// Lowest rate (PyTorch's default 0).
        eta_min: f64,
    },
    /// `base * factor`, the factor going linearly from `start_factor` to `end_factor` over
    /// `total_iters` epochs, then staying at `end_factor` (a warm-up).
    LinearLR {
        /// Factor at epoch 0 (PyTorch's default 1/3), in (0, 1].
        start_factor: f64,
        /// Factor from epoch `total_iters` on (PyTorch's default 1), in [0, 1].
        end_factor: f64,
        /// Epochs of the ramp (PyTorch's default 5).
        total_iters: usize,
    },
    /// One schedule after another, switching at each milestone; each schedule counts its epochs
    /// from the milestone where it starts. [`LrScheduler::new`] refuses a milestone count that is
    /// not one less than the schedule count.
    SequentialLR {
        /// The schedules in order (PyTorch's `schedulers`).
        schedules: Vec<Schedule>,
        /// Epochs at which the next schedule takes over (ascending).
        milestones: Vec<usize>,
    },
    /// Cosine from base to `eta_min` over `t_0` epochs, then restarting, each period `t_mult`
    /// times the last (CosineAnnealingWarmRestarts, stepped per epoch).
    CosineAnnealingWarmRestarts {
        /// Length of the first period (PyTorch's `T_0`); [`LrScheduler::new`] refuses 0.
        t_0: usize,
        /// Growth of the period after each restart (PyTorch's `T_mult`, default 1);
        /// [`LrScheduler::new`] refuses 0.
        t_mult: usize,
        /// Lowest rate (PyTorch's default 0).
        eta_min: f64,
    },
    /// The 1cycle policy, stepped per batch: cosine from `max_lr / div_factor` up to `max_lr`
    /// over the first `pct_start` of `total_steps`, then down to
    /// `max_lr / (div_factor * final_div_factor)`. The group's base rate is not used (as in
    /// PyTorch, `max_lr` sets the scale); momentum is not cycled (PyTorch's
    /// `cycle_momentum=False`), and only PyTorch's two-phase cosine form exists. Build it with
    /// PyTorch's defaults through [`Schedule::one_cycle`].
    OneCycleLR {
        /// Peak rate, for every group.
        max_lr: f64,
        /// Number of steps in the cycle; stepping past it is an error, as in PyTorch.
        total_steps: usize,
        /// Fraction of the steps spent rising (default 0.3), in [0, 1].
        pct_start: f64,
        /// Initial rate is `max_lr / div_factor` (default 25).
        div_factor: f64,
        /// Final rate is the initial one divided by this (default 1e4).
        final_div_factor: f64,
    },
}

impl Schedule {
    /// The checks PyTorch's constructors make (and the divisions by zero PyTorch's `step` would
    /// raise), as [`Error::InvalidArgument`] in PyTorch's words, before any rate is set.
    fn check(&self) -> Result<()> {
        let bad = |op: &'static str, msg: String| Err(Error::arg(op, msg));
        match self {
            Schedule::StepLR { step_size: 0, .. } => bad(
                "StepLR",
                "step_size must be a positive integer, but got 0".into(),
            ),
            Schedule::CosineAnnealingLR { t_max: 0, .. } => bad(
                "CosineAnnealingLR",
                "T_max must be a positive integer, but got 0".into(),
            ),
            Schedule::LinearLR {
                start_factor,
                end_factor,
                ..
            } => {
                if !(*start_factor > 0.0 && *start_factor <= 1.0) {
                    bad(
                        "LinearLR",
                        format!("Starting multiplicative factor expected to be greater than 0 and less or equal to 1, but got {start_factor}"),
                    )
                } else if !(0.0..=1.0).contains(end_factor) {
                    bad(
                        "LinearLR",
                        format!("Ending multiplicative factor expected to be between 0 and 1, but got {end_factor}"),
                    )
                } else {
                    Ok(())
                }
            }
            Schedule::SequentialLR {
                schedules,
                milestones,
            } => {
                if schedules.len() != milestones.len() + 1 {
                    return bad(
                        "SequentialLR",
                        format!(
                            "Expected {} milestones for {} schedulers, got {}",
                            schedules.len().saturating_sub(1),
                            schedules.len(),
                            milestones.len()
                        ),
                    );
                }
                if milestones.windows(2).any(|w| w[0] > w[1]) {
                    return bad(
                        "SequentialLR",
                        format!("milestones must be ascending, got {milestones:?}"),
                    );
                }
                schedules.iter().try_for_each(Schedule::check)
            }
            Schedule::CosineAnnealingWarmRestarts { t_0, t_mult, .. } => {
                if *t_0 == 0 {
                    bad(
                        "CosineAnnealingWarmRestarts",
                        format!("Expected positive integer T_0, but got {t_0}"),
                    )
                } else if *t_mult == 0 {
                    bad(
                        "CosineAnnealingWarmRestarts",
                        format!("Expected integer T_mult >= 1, but got {t_mult}"),
                    )
                } else {
                    Ok(())
                }
            }
            Schedule::OneCycleLR {
                total_steps,
                pct_start,
                ..
            } => {
                if *total_steps == 0 {
                    bad(
                        "OneCycleLR",
                        "Expected positive integer total_steps, but got 0".into(),
                    )
                } else if !(0.0..=1.0).contains(pct_start) {
                    bad(
                        "OneCycleLR",
                        format!("Expected float between 0 and 1 pct_start, but got {pct_start}"),
                    )
                } else if pct_start * *total_steps as f64 == 1.0 {
                    // The warm-up phase would end at step 0: PyTorch divides by zero there.
                    bad(
                        "OneCycleLR",
                        format!("pct_start * total_steps = 1 leaves a warm-up of zero steps (PyTorch divides by zero at step 0); got pct_start {pct_start}, total_steps {total_steps}"),
                    )
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// PyTorch's error for a OneCycleLR stepped past `total_steps` (also inside a
    /// SequentialLR).
    fn check_epoch(&self, epoch: usize) -> Result<()> {
        match self {
            Schedule::OneCycleLR { total_steps, .. } if epoch > *total_steps => Err(Error::arg(
                "OneCycleLR",
                format!(
                    "Tried to step {epoch} times. The specified number of total steps is {total_steps}"
                ),
            )),
            Schedule::SequentialLR {
                schedules,
                milestones,
            } => {
                match sequential_part(schedules, milestones, epoch) {
                    Some((s, e)) => s.check_epoch(e),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// [`Schedule::OneCycleLR`] with PyTorch's defaults (`pct_start` 0.3, `div_factor` 25,
    /// `final_div_factor` 1e4).
    ///
    /// ```
    /// use wgtorch::optim::Schedule;
    /// let s = Schedule::one_cycle(1.0, 100);
    /// assert!((s.lr_at(0, 0.5) - 0.04).abs() < 1e-12); // max_lr / 25, whatever the base
    /// assert!((s.lr_at(29, 0.5) - 1.0).abs() < 1e-12); // the peak at 30% of the steps
    /// assert!((s.lr_at(99, 0.5) - 4e-6).abs() < 1e-12); // max_lr / 25 / 1e4
    /// ```
    pub fn one_cycle(max_lr: f64, total_steps: usize) -> Schedule {
        Schedule::OneCycleLR {
            max_lr,
            total_steps,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
        }
    }

    /// The learning rate at `epoch` for a group whose base rate is `base` (a pure function: what
    /// [`LrScheduler`] sets after `epoch` steps).
    ///
    /// ```
    /// use wgtorch::optim::Schedule;
    /// let s = Schedule::MultiStepLR { milestones: vec![2, 4], gamma: 0.1 };
    /// let lr: Vec<f64> = (0..5).map(|e| s.lr_at(e, 1.0)).collect();
    /// assert_eq!(lr[..2], [1.0, 1.0]);
    /// assert!((lr[2] - 0.1).abs() < 1e-12 && (lr[4] - 0.01).abs() < 1e-12);
    /// ```
    pub fn lr_at(&self, epoch: usize, base: f64) -> f64 {
        let e = epoch as f64;
        match self {
            Schedule::StepLR { step_size, gamma } => {
                base * gamma.powi((epoch / step_size.max(&1)) as i32) // 0 refused by `check`
            }
            Schedule::MultiStepLR { milestones, gamma } => {
                base * gamma.powi(milestones.iter().filter(|&&m| m <= epoch).count() as i32)
            }
            Schedule::ExponentialLR { gamma } => base * gamma.powi(epoch as i32),
            Schedule::CosineAnnealingLR { t_max, eta_min } => {
                eta_min + (base - eta_min) * (1.0 + (PI * e / *t_max as f64).cos()) / 2.0
            }
            Schedule::CosineAnnealingWarmRestarts {
                t_0,
                t_mult,
                eta_min,
            } => {
                // PyTorch's recurrence (T_cur += 1; past T_i, wrap and grow T_i), in integers.
                let (mut t_cur, mut t_i) = (epoch, (*t_0).max(1));
                while t_cur >= t_i {
                    t_cur -= t_i;
                    t_i = t_i.saturating_mul((*t_mult).max(1));
                }
                eta_min + (base - eta_min) * (1.0 + (PI * t_cur as f64 / t_i as f64).cos()) / 2.0
            }
            Schedule::LinearLR {
                start_factor,
                end_factor,
                total_iters,
            } => {
                let t = (epoch.min(*total_iters)) as f64 / (*total_iters).max(1) as f64;
                base * (start_factor + (end_factor - start_factor) * t)
            }
            Schedule::SequentialLR {
                schedules,
                milestones,
            } => {
                // `LrScheduler::new` refuses an empty SequentialLR; built by hand, it keeps `base`.
                match sequential_part(schedules, milestones, epoch) {
                    Some((s, e)) => s.lr_at(e, base),
                    None => base,
                }
            }
            Schedule::OneCycleLR {
                max_lr,
                total_steps,
                pct_start,
                div_factor,
                final_div_factor,
            } => {
                let initial = max_lr / div_factor;
                let min_lr = initial / final_div_factor;
                let end1 = pct_start * *total_steps as f64 - 1.0;
                let end2 = *total_steps as f64 - 1.0;
                let anneal = |start: f64, end: f64, pct: f64| {
                    end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0)
                };
                if e <= end1 {
                    anneal(initial, *max_lr, e / end1)
                } else {
                    anneal(*max_lr, min_lr, (e - end1) / (end2 - end1))
                }
            }
        }
    }
}

/// The schedule of a SequentialLR that is active at `epoch`, and the epoch counted from its
/// milestone (None when there are no schedules).
fn sequential_part<'a>(
    schedules: &'a [Schedule],
    milestones: &[usize],
    epoch: usize,
) -> Option<(&'a Schedule, usize)> {
    let idx = milestones.iter().filter(|&&m| m <= epoch).count();
    let start = idx.checked_sub(1).map_or(0, |i| milestones[i]);
    let s = schedules.get(idx.min(schedules.len().checked_sub(1)?))?;
    Some((s, epoch.saturating_sub(start)))
}

/// A scheduler's state for checkpoints: named scalars (`last_epoch`, `base_lr.{group}` for
/// [`LrScheduler`]; the counters and best metric for [`ReduceLROnPlateau`]).
pub type SchedState = Vec<(String, f64)>;

/// Drives an optimizer's learning rates along a [`Schedule`] (PyTorch's `LRScheduler`
/// subclasses: `StepLR(opt, ...)` is `LrScheduler::new(&opt, Schedule::StepLR { .. })`). It holds
/// handles to the groups' rates, so `step()` takes no optimizer: call it after `opt.step()`, once
/// per epoch (per batch for OneCycleLR). The base rates are the groups' rates when it is built.
///
/// ```
/// use wgtorch::optim::{LrScheduler, Optimizer, Schedule, Sgd};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([1], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Sgd::new(vec![w], 0.1)?;
/// let mut s = LrScheduler::new(&opt, Schedule::StepLR { step_size: 2, gamma: 0.5 })?;
/// for _ in 0..2 {
///     opt.step()?;
///     s.step()?;
/// }
/// assert!((opt.param_groups()[0].lr.get() - 0.05).abs() < 1e-12);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Debug)]
pub struct LrScheduler {
    /// The schedule.
    pub schedule: Schedule,
    /// Each group's initial learning rate.
    pub base_lrs: Vec<f64>,
    /// Epochs (or iterations) stepped so far.
    pub last_epoch: usize,
    lrs: Vec<Lr>,
}

impl LrScheduler {
    /// Attach to `opt`, taking each group's current lr as its base and setting it to the
    /// schedule's value at epoch 0. Errors ([`Error::InvalidArgument`], PyTorch's messages): a
    /// `StepLR` with `step_size` 0, a `CosineAnnealingLR` with `t_max` 0, `LinearLR` factors out
    /// of range, a `SequentialLR` whose milestone count is not its schedule count minus one (or
    /// whose milestones descend), a `CosineAnnealingWarmRestarts` with `t_0` or `t_mult` 0, a
    /// `OneCycleLR` with no steps or `pct_start` outside [0, 1] — checked in nested schedules
    /// too.
    pub fn new(opt: &dyn Optimizer, schedule: Schedule) -> Result<LrScheduler> {
        schedule.check()?;
        let lrs: Vec<Lr> = opt.param_groups().iter().map(|g| g.lr.share()).collect();
        let s = LrScheduler {
            schedule,
            base_lrs: lrs.iter().map(Lr::get).collect(),
            last_epoch: 0,
            lrs,
        };
        s.apply();
        Ok(s)
    }
    fn apply(&self) {
        for (lr, &b) in self.lrs.iter().zip(&self.base_lrs) {
            lr.set(self.schedule.lr_at(self.last_epoch, b));
        }
    }
    /// Advance one epoch, setting the optimizer's rates to the schedule's values at the new
    /// `last_epoch`. Stepping a `OneCycleLR` past its `total_steps` is an error (PyTorch's), and
    /// leaves the scheduler and the rates as they were.
    pub fn step(&mut self) -> Result<()> {
        let next = self.last_epoch + 1;
        self.schedule.check_epoch(next)?;
        self.last_epoch = next;
        self.apply();
        Ok(())
    }
    /// The schedule's rates at `last_epoch`, one per group (what `step` last set).
    pub fn get_last_lr(&self) -> Vec<f64> {
        self.base_lrs
            .iter()
            .map(|&b| self.schedule.lr_at(self.last_epoch, b))
            .collect()
    }
    /// `last_epoch` and the base rates, for [`LrScheduler::load_state_dict`].
    ///
    /// ```
    /// use wgtorch::optim::{LrScheduler, Optimizer, Schedule, Sgd};
    /// use wgtorch::{Device, Tensor};
    /// let w = Tensor::ones([1], &Device::Cpu)?.requires_grad_(true);
    /// let opt = Sgd::new(vec![w.clone()], 1.0)?;
    /// let mut s = LrScheduler::new(&opt, Schedule::ExponentialLR { gamma: 0.5 })?;
    /// s.step()?;
    /// s.step()?;
    /// let saved = s.state_dict();
    /// // Resume: a new optimizer and scheduler, then the saved state.
    /// let opt2 = Sgd::new(vec![w], 1.0)?;
    /// let mut s2 = LrScheduler::new(&opt2, Schedule::ExponentialLR { gamma: 0.5 })?;
    /// s2.load_state_dict(&saved)?;
    /// assert_eq!((s2.last_epoch, opt2.param_groups()[0].lr.get()), (2, 0.25));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn state_dict(&self) -> SchedState {
        let mut s = vec![("last_epoch".to_string(), self.last_epoch as f64)];
        for (i, b) in self.base_lrs.iter().enumerate() {
            s.push((format!("base_lr.{i}"), *b));
        }
        s
    }
    /// Resume from `state_dict` and set the optimizer's rates for its epoch. Checked first (an
    /// [`Error::InvalidArgument`] naming the key, nothing changed): `last_epoch` and one
    /// `base_lr.{i}` per group present, a count and valid rates, no other key.
    pub fn load_state_dict(&mut self, s: &[(String, f64)]) -> Result<()> {
        let op = "LrScheduler.load_state_dict";
        let last_epoch = state_count(op, s, "last_epoch")?;
        let mut base = Vec::with_capacity(self.lrs.len());
        for i in 0..self.lrs.len() {
            let b = state_value(op, s, &format!("base_lr.{i}"))?;
            if b.is_nan() || b < 0.0 {
                return Err(Error::arg(
                    op,
                    format!("base_lr.{i} = {b} is not a valid learning rate"),
                ));
            }
            base.push(b);
        }
        if let Some((k, _)) = s.iter().find(|(k, _)| {
            k != "last_epoch"
                && k.strip_prefix("base_lr.")
                    .and_then(|i| i.parse::<usize>().ok())
                    .is_none_or(|i| i >= self.lrs.len())
        }) {
            return Err(Error::arg(
                op,
                format!("unexpected scheduler state key {k}"),
            ));
        }
        self.schedule.check_epoch(last_epoch)?;
        self.last_epoch = last_epoch;
        self.base_lrs = base;
        self.apply();
        Ok(())
    }
}

/// Whether [`ReduceLROnPlateau`] wants the metric to fall or rise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PlateauMode {
    /// Lower is better (a loss; the default).
    #[default]
    Min,
    /// Higher is better (an accuracy).
    Max,
}

/// How [`ReduceLROnPlateau`] measures an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThresholdMode {
    /// Better than `best * (1 -/+ threshold)` (the default).
    #[default]
    Rel,
    /// Better than `best -/+ threshold`.
    Abs,
}

/// Options of [`ReduceLROnPlateau`] (torch.optim.lr_scheduler.ReduceLROnPlateau's keywords).
#[derive(Clone, Debug)]
pub struct ReduceLROnPlateauOptions {
    /// Minimise or maximise the metric (default `Min`).
    pub mode: PlateauMode,
    /// Multiplies the rates on a plateau, < 1 (default 0.1).
    pub factor: f64,
    /// Epochs without improvement tolerated before reducing (default 10).
    pub patience: usize,
    /// Smallest change that counts as an improvement (default 1e-4).
    pub threshold: f64,
    /// Relative or absolute threshold (default `Rel`).
    pub threshold_mode: ThresholdMode,
    /// Epochs to wait after a reduction before counting again (default 0).
    pub cooldown: usize,
    /// Lower bound on every group's rate (default 0), unless `min_lrs` is given.
    pub min_lr: f64,
    /// Lower bound per group (one per parameter group; empty: `min_lr` for all).
    pub min_lrs: Vec<f64>,
    /// Reductions smaller than this are skipped (default 1e-8).
    pub eps: f64,
}

impl Default for ReduceLROnPlateauOptions {
    fn default() -> Self {
        ReduceLROnPlateauOptions {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: 0.0,
            min_lrs: vec![],
            eps: 1e-8,
        }
    }
}

/// Reduce the rates by `factor` when a metric stops improving for `patience` epochs
/// (torch.optim.lr_scheduler.ReduceLROnPlateau): `sched.step(val_loss)` after each epoch.
///
/// ```
/// use wgtorch::optim::{Optimizer, ReduceLROnPlateau, ReduceLROnPlateauOptions, Sgd};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([1], &Device::Cpu)?.requires_grad_(true);
/// let opt = Sgd::new(vec![w], 1.0)?;
/// let o = ReduceLROnPlateauOptions { patience: 1, ..Default::default() };
/// let mut s = ReduceLROnPlateau::with_options(&opt, o)?;
/// for loss in [1.0, 0.5, 0.5, 0.5] {
///     s.step(loss);
/// }
/// assert!((opt.param_groups()[0].lr.get() - 0.1).abs() < 1e-12);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Debug)]
pub struct ReduceLROnPlateau {
    /// The options.
    pub options: ReduceLROnPlateauOptions,
    /// Best metric so far.
    pub best: f64,
    /// Epochs since the last improvement.
    pub num_bad_epochs: usize,
    /// Epochs of cooldown left.
    pub cooldown_counter: usize,
    /// Epochs stepped so far.
    pub last_epoch: usize,
    min_lrs: Vec<f64>,
    lrs: Vec<Lr>,
}

impl ReduceLROnPlateau {
    /// With PyTorch's defaults ([`ReduceLROnPlateauOptions::default`]).
    pub fn new(opt: &dyn Optimizer) -> Result<ReduceLROnPlateau> {
        ReduceLROnPlateau::with_options(opt, ReduceLROnPlateauOptions::default())
    }
    /// With the given options, checked as PyTorch checks them: a `factor` of 1 or more (or NaN),
    /// or a `min_lrs` whose length is not the group count, is an [`Error::InvalidArgument`].
    pub fn with_options(
        opt: &dyn Optimizer,
        options: ReduceLROnPlateauOptions,
    ) -> Result<ReduceLROnPlateau> {
        let op = "ReduceLROnPlateau";
        // NaN fails too, as `factor >= 1.0` would not in Python.
        if options.factor.is_nan() || options.factor >= 1.0 {
            return Err(Error::arg(op, "Factor should be < 1.0."));
        }
        let n = opt.param_groups().len();
        let min_lrs = if options.min_lrs.is_empty() {
            vec![options.min_lr; n]
        } else if options.min_lrs.len() != n {
            return Err(Error::arg(
                op,
                format!("expected {n} min_lrs, got {}", options.min_lrs.len()),
            ));
        } else {
            options.min_lrs.clone()
        };
        let mut s = ReduceLROnPlateau {
            best: 0.0,
            num_bad_epochs: 0,
            cooldown_counter: 0,
            last_epoch: 0,
            min_lrs,
            lrs: opt.param_groups().iter().map(|g| g.lr.share()).collect(),
            options,
        };
        s.best = s.mode_worse();
        Ok(s)
    }
    fn mode_worse(&self) -> f64 {
        match self.options.mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        }
    }
    fn is_better(&self, a: f64) -> bool {
        let (best, th) = (self.best, self.options.threshold);
        match (self.options.mode, self.options.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < best * (1.0 - th),
            (PlateauMode::Min, ThresholdMode::Abs) => a < best - th,
            (PlateauMode::Max, ThresholdMode::Rel) => a > best * (th + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > best + th,
        }
    }
    /// Record one epoch's `metric`, reducing the rates after `patience` epochs without
    /// improvement.
    pub fn step(&mut self, metric: f64) {
        self.last_epoch += 1;
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.options.patience {
            for (lr, &min_lr) in self.lrs.iter().zip(&self.min_lrs) {
                let old = lr.get();
                let new = (old * self.options.factor).max(min_lr);
                if old - new > self.options.eps {
                    lr.set(new);
                }
            }
            self.cooldown_counter = self.options.cooldown;
            self.num_bad_epochs = 0;
        }
    }
    /// The groups' learning rates now in force.
    pub fn get_last_lr(&self) -> Vec<f64> {
        self.lrs.iter().map(Lr::get).collect()
    }
    /// The counters and the best metric (the rates themselves are in the optimizer's state).
    pub fn state_dict(&self) -> SchedState {
        vec![
            ("best".into(), self.best),
            ("num_bad_epochs".into(), self.num_bad_epochs as f64),
            ("cooldown_counter".into(), self.cooldown_counter as f64),
            ("last_epoch".into(), self.last_epoch as f64),
        ]
    }
    /// Resume from `state_dict`. Checked first (an [`Error::InvalidArgument`] naming the key,
    /// nothing changed): the four keys present, counts that are integers, no other key.
    pub fn load_state_dict(&mut self, s: &[(String, f64)]) -> Result<()> {
        let op = "ReduceLROnPlateau.load_state_dict";
        const KEYS: [&str; 4] = ["best", "num_bad_epochs", "cooldown_counter", "last_epoch"];
        if let Some((k, _)) = s.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
            return Err(Error::arg(
                op,
                format!("unexpected scheduler state key {k}"),
            ));
        }
        let best = state_value(op, s, "best")?;
        let bad = state_count(op, s, "num_bad_epochs")?;
        let cool = state_count(op, s, "cooldown_counter")?;
        let last = state_count(op, s, "last_epoch")?;
        self.best = best;
        self.num_bad_epochs = bad;
        self.cooldown_counter = cool;
        self.last_epoch = last;
        Ok(())
    }
}
