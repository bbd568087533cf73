//! Adamax, NAdam and RAdam: Adam's moments with an infinity norm, Nesterov momentum, or a
//! rectified variance.

use super::*;

const ADAMAX: [&str; 2] = ["exp_avg", "exp_inf"];
const MOMENTS: [&str; 2] = ["exp_avg", "exp_avg_sq"];

/// Options of [`Adamax`] (torch.optim.Adamax's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct AdamaxOptions {
    /// Learning rate (default 0.002).
    pub lr: f64,
    /// (beta1, beta2) (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the infinity norm (default 1e-8).
    pub eps: f64,
    /// L2 penalty (default 0).
    pub weight_decay: f64,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for AdamaxOptions {
    fn default() -> Self {
        AdamaxOptions {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// Adamax (Adam with the infinity norm) with PyTorch's update rule.
pub struct Adamax {
    groups: Vec<ParamGroup>,
    o: AdamaxOptions,
    steps: Vec<Vec<u64>>,
    slots: Slots,
}

impl Adamax {
    /// Adamax over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adamax> {
        let o = AdamaxOptions {
            lr,
            ..Default::default()
        };
        Adamax::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: AdamaxOptions) -> Result<Adamax> {
        check(op(), o.lr >= 0.0, "learning rate", o.lr)?;
        check_eps_betas(op(), o.eps, o.betas)?;
        check(
            op(),
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        let groups = resolve_groups(op(), groups, o.lr, o.weight_decay)?;
        Ok(Adamax {
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            slots: empty_slots(&groups, 2),
            groups,
            o,
        })
    }
}

fn op() -> &'static str {
    "Adamax"
}

impl Optimizer for Adamax {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#Adamax.step");
        let _g = crate::no_grad();
        let (b1, b2) = self.o.betas;
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(d) = grad_of(p, self.o.maximize, true, g.weight_decay)? else {
                    continue;
                };
                self.steps[gi][pi] += 1;
                let s = &mut self.slots[gi][pi];
                let m = lerp(&buf_or_zeros(&s[0], p)?, &d, 1.0 - b1)?;
                let u = buf_or_zeros(&s[1], p)?
                    .mul_scalar(b2)?
                    .maximum(&d.abs()?.add_scalar(self.o.eps)?)?;
                let clr = g.lr.get() / (1.0 - b1.powf(self.steps[gi][pi] as f64));
                assign(p, &p.sub(&m.div(&u)?.mul_scalar(clr)?)?)?;
                s[0] = Some(m);
                s[1] = Some(u);
            }
        }
        Ok(())
    }
    slots_and_steps!(ADAMAX);
}

/// `a + w (b - a)` (torch.lerp with a scalar weight).
fn lerp(a: &Tensor, b: &Tensor, w: f64) -> Result<Tensor> {
    a.add(&b.sub(a)?.mul_scalar(w)?)
}

/// The moments update shared by NAdam and RAdam: `(m, v)` after one step with gradient `d`.
fn moments(
    s: &[Option<Tensor>],
    p: &Tensor,
    d: &Tensor,
    (b1, b2): (f64, f64),
) -> Result<(Tensor, Tensor)> {
    let m = lerp(&buf_or_zeros(&s[0], p)?, d, 1.0 - b1)?;
    let v = buf_or_zeros(&s[1], p)?
        .mul_scalar(b2)?
        .add(&d.square()?.mul_scalar(1.0 - b2)?)?;
    Ok((m, v))
}

/// Weight decay of the Adam family: decoupled (`p *= 1 - lr wd`, AdamW's) or L2 on the gradient.
fn decay(p: &Tensor, d: Tensor, g: &ParamGroup, decoupled: bool) -> Result<(Tensor, Tensor)> {
    let pv = p.detach();
    if g.weight_decay == 0.0 {
        return Ok((pv, d));
    }
    if decoupled {
        Ok((pv.mul_scalar(1.0 - g.lr.get() * g.weight_decay)?, d))
    } else {
        let d = d.add(&p.mul_scalar(g.weight_decay)?)?;
        Ok((pv, d))
    }
}

/// Options of [`NAdam`] (torch.optim.NAdam's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct NAdamOptions {
    /// Learning rate (default 0.002).
    pub lr: f64,
    /// (beta1, beta2) (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the denominator (default 1e-8).
    pub eps: f64,
    /// Weight decay (default 0): L2, or decoupled as AdamW's.
    pub weight_decay: f64,
    /// Momentum schedule decay (default 0.004).
    pub momentum_decay: f64,
    /// Decouple the weight decay (default false).
    pub decoupled_weight_decay: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for NAdamOptions {
    fn default() -> Self {
        NAdamOptions {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            momentum_decay: 4e-3,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// NAdam (Adam with Nesterov momentum) with PyTorch's update rule.
pub struct NAdam {
    groups: Vec<ParamGroup>,
    o: NAdamOptions,
    steps: Vec<Vec<u64>>,
    slots: Slots,
    /// Product of the momentum schedule up to each parameter's step, kept in f32 as PyTorch
    /// keeps it (a float32 tensor); rebuilt from the step count on load.
    mu_products: Vec<Vec<f32>>,
}

impl NAdam {
    /// NAdam over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<NAdam> {
        let o = NAdamOptions {
            lr,
            ..Default::default()
        };
        NAdam::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: NAdamOptions) -> Result<NAdam> {
        let op = "NAdam";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        check_eps_betas(op, o.eps, o.betas)?;
        check(
            op,
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        check(
            op,
            o.momentum_decay >= 0.0,
            "momentum_decay value",
            o.momentum_decay,
        )?;
        let groups = resolve_groups(op, groups, o.lr, o.weight_decay)?;
        let mut n = NAdam {
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            slots: empty_slots(&groups, 2),
            mu_products: vec![],
            groups,
            o,
        };
        n.rebuild_mu_products();
        Ok(n)
    }
    /// `mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay))`.
    fn mu(&self, t: u64) -> f64 {
        self.o.betas.0 * (1.0 - 0.5 * 0.96f64.powf(t as f64 * self.o.momentum_decay))
    }
    fn rebuild_mu_products(&mut self) {
        let steps = self.steps.clone();
        self.mu_products = steps
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&n| (1..=n).fold(1.0f32, |acc, t| (acc as f64 * self.mu(t)) as f32))
                    .collect()
            })
            .collect();
    }
}

impl Optimizer for NAdam {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#NAdam.step");
        let _g = crate::no_grad();
        let (b1, b2) = self.o.betas;
        for gi in 0..self.groups.len() {
            for pi in 0..self.groups[gi].params.len() {
                let g = &self.groups[gi];
                let p = &g.params[pi];
                let Some(d) = grad_of(p, self.o.maximize, false, 0.0)? else {
                    continue;
                };
                let (pv, d) = decay(p, d, g, self.o.decoupled_weight_decay)?;
                self.steps[gi][pi] += 1;
                let t = self.steps[gi][pi];
                let bc2 = 1.0 - b2.powf(t as f64);
                let (mu, mu_next) = (self.mu(t), self.mu(t + 1));
                let prod = (self.mu_products[gi][pi] as f64 * mu) as f32;
                self.mu_products[gi][pi] = prod;
                let prod = prod as f64;
                let prod_next = prod * mu_next;
                let (m, v) = moments(&self.slots[gi][pi], p, &d, (b1, b2))?;
                let denom = v.div_scalar(bc2)?.sqrt()?.add_scalar(self.o.eps)?;
                let lr = g.lr.get();
                let upd = d
                    .mul_scalar(lr * (1.0 - mu) / (1.0 - prod))?
                    .add(&m.mul_scalar(lr * mu_next / (1.0 - prod_next))?)?
                    .div(&denom)?;
                assign(p, &pv.sub(&upd)?)?;
                self.slots[gi][pi] = vec![Some(m), Some(v)];
            }
        }
        Ok(())
    }
    slots_and_steps!(MOMENTS, |s: &mut Self| s.rebuild_mu_products());
}

/// Options of [`RAdam`] (torch.optim.RAdam's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct RAdamOptions {
    /// Learning rate (default 0.001).
    pub lr: f64,
    /// (beta1, beta2) (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the denominator (default 1e-8).
    pub eps: f64,
    /// Weight decay (default 0): L2, or decoupled as AdamW's.
    pub weight_decay: f64,
    /// Decouple the weight decay (default false).
    pub decoupled_weight_decay: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for RAdamOptions {
    fn default() -> Self {
        RAdamOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// RAdam (Adam with a rectified adaptive rate) with PyTorch's update rule.
pub struct RAdam {
    groups: Vec<ParamGroup>,
    o: RAdamOptions,
    steps: Vec<Vec<u64>>,
    slots: Slots,
}

impl RAdam {
    /// RAdam over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<RAdam> {
        let o = RAdamOptions {
            lr,
            ..Default::default()
        };
        RAdam::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: RAdamOptions) -> Result<RAdam> {
        let op = "RAdam";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        check_eps_betas(op, o.eps, o.betas)?;
        check(
            op,
            o.weight_decay >= 0.0,
            "weight_decay value",
            o.weight_decay,
        )?;
        let groups = resolve_groups(op, groups, o.lr, o.weight_decay)?;
        Ok(RAdam {
            steps: groups.iter().map(|g| vec![0; g.params.len()]).collect(),
            slots: empty_slots(&groups, 2),
            groups,
            o,
        })
    }
}

impl Optimizer for RAdam {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#RAdam.step");
        let _g = crate::no_grad();
        let (b1, b2) = self.o.betas;
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(d) = grad_of(p, self.o.maximize, false, 0.0)? else {
                    continue;
                };
                let (pv, d) = decay(p, d, g, self.o.decoupled_weight_decay)?;
                self.steps[gi][pi] += 1;
                let t = self.steps[gi][pi] as f64;
                let (m, v) = moments(&self.slots[gi][pi], p, &d, (b1, b2))?;
                let (bc1, bc2) = (1.0 - b1.powf(t), 1.0 - b2.powf(t));
                let rho_inf = 2.0 / (1.0 - b2) - 1.0;
                let rho_t = rho_inf - 2.0 * t * b2.powf(t) / bc2;
                let lr = g.lr.get();
                let upd = if rho_t > 5.0 {
                    let rect = ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                        / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                        .sqrt();
                    m.div_scalar(bc1)?
                        .div(&v.sqrt()?.add_scalar(self.o.eps)?)?
                        .mul_scalar(lr * bc2.sqrt() * rect)?
                } else {
                    m.div_scalar(bc1)?.mul_scalar(lr)?
                };
                assign(p, &pv.sub(&upd)?)?;
                self.slots[gi][pi] = vec![Some(m), Some(v)];
            }
        }
        Ok(())
    }
    slots_and_steps!(MOMENTS);
}
