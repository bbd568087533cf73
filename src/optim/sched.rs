//! Learning-rate schedulers with PyTorch's schedules, in closed form per epoch (so a resumed run
//! lands exactly where it left off). Call `step` after each epoch's (or iteration's, for
//! OneCycleLR) `optimizer.step()`.

use super::Optimizer;
use crate::{Error, Result};
use std::f64::consts::PI;

/// A schedule: the factor or value at a given epoch from the base learning rate.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// `base * gamma^(epoch / step_size)`
    StepLR { step_size: usize, gamma: f64 },
    /// `base * gamma^(milestones passed)`
    MultiStepLR { milestones: Vec<usize>, gamma: f64 },
    /// `base * gamma^epoch`
    ExponentialLR { gamma: f64 },
    /// Cosine from base to `eta_min` over `t_max` epochs.
    CosineAnnealingLR { t_max: usize, eta_min: f64 },
    /// Linear warm-up of the factor from `start_factor` to `end_factor` over `total_iters`.
    LinearLR {
        start_factor: f64,
        end_factor: f64,
        total_iters: usize,
    },
    /// One schedule after another, switching (and restarting) at each milestone.
    SequentialLR {
        schedules: Vec<Schedule>,
        milestones: Vec<usize>,
    },
    /// The 1cycle policy (two phases, cosine annealing), `max_lr` and `total_steps`.
    OneCycleLR {
        max_lr: f64,
        total_steps: usize,
        pct_start: f64,
        div_factor: f64,
        final_div_factor: f64,
    },
}

impl Schedule {
    /// PyTorch's OneCycleLR defaults.
    pub fn one_cycle(max_lr: f64, total_steps: usize) -> Schedule {
        Schedule::OneCycleLR {
            max_lr,
            total_steps,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
        }
    }

    /// The learning rate at `epoch` for a group whose base rate is `base`.
    pub fn lr_at(&self, epoch: usize, base: f64) -> f64 {
        let e = epoch as f64;
        match self {
            Schedule::StepLR { step_size, gamma } => {
                base * gamma.powi((epoch / step_size.max(&1)) as i32)
            }
            Schedule::MultiStepLR { milestones, gamma } => {
                base * gamma.powi(milestones.iter().filter(|&&m| m <= epoch).count() as i32)
            }
            Schedule::ExponentialLR { gamma } => base * gamma.powi(epoch as i32),
            Schedule::CosineAnnealingLR { t_max, eta_min } => {
                eta_min + (base - eta_min) * (1.0 + (PI * e / *t_max as f64).cos()) / 2.0
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
                let idx = milestones.iter().filter(|&&m| m <= epoch).count();
                let start = if idx == 0 { 0 } else { milestones[idx - 1] };
                schedules[idx.min(schedules.len() - 1)].lr_at(epoch - start, base)
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

/// Drives an optimizer's learning rates along a [`Schedule`].
///
/// ```
/// use wgtorch::optim::{LrScheduler, Schedule, Sgd, Optimizer};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::ones([1], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Sgd::new(vec![w], 0.1)?;
/// let mut s = LrScheduler::new(&mut opt, Schedule::StepLR { step_size: 2, gamma: 0.5 })?;
/// s.step(&mut opt);
/// s.step(&mut opt);
/// assert!((opt.param_groups()[0].lr - 0.05).abs() < 1e-12);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LrScheduler {
    /// The schedule.
    pub schedule: Schedule,
    /// Each group's initial learning rate.
    pub base_lrs: Vec<f64>,
    /// Epochs (or iterations) stepped so far.
    pub last_epoch: usize,
}

impl LrScheduler {
    /// Attach to `opt`, setting each group's lr to the schedule's value at epoch 0.
    pub fn new(opt: &mut dyn Optimizer, schedule: Schedule) -> Result<LrScheduler> {
        if let Schedule::SequentialLR {
            schedules,
            milestones,
        } = &schedule
        {
            if schedules.len() != milestones.len() + 1 {
                return Err(Error::arg(
                    "SequentialLR",
                    format!(
                        "Expected {} milestones for {} schedulers, got {}",
                        schedules.len().saturating_sub(1),
                        schedules.len(),
                        milestones.len()
                    ),
                ));
            }
        }
        let base_lrs: Vec<f64> = opt.param_groups().iter().map(|g| g.lr).collect();
        let s = LrScheduler {
            schedule,
            base_lrs,
            last_epoch: 0,
        };
        s.apply(opt);
        Ok(s)
    }
    fn apply(&self, opt: &mut dyn Optimizer) {
        for (g, &b) in opt.param_groups_mut().iter_mut().zip(&self.base_lrs) {
            g.lr = self.schedule.lr_at(self.last_epoch, b);
        }
    }
    /// Advance one epoch.
    pub fn step(&mut self, opt: &mut dyn Optimizer) {
        self.last_epoch += 1;
        self.apply(opt);
    }
    /// The learning rates now in force.
    pub fn get_last_lr(&self) -> Vec<f64> {
        self.base_lrs
            .iter()
            .map(|&b| self.schedule.lr_at(self.last_epoch, b))
            .collect()
    }
}
