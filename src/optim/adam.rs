//! Adam (with amsgrad and L2 weight decay) and AdamW (decoupled weight decay).

use super::*;

const NAMES: [&str; 3] = ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"];

/// Adam with PyTorch's update rule and defaults (betas 0.9/0.999, eps 1e-8; torch.optim.Adam).
/// Parameters of any floating dtype and device; the moments live beside them. [`AdamW`] builds
/// one in decoupled-weight-decay mode.
///
/// ```
/// use wgtorch::optim::{Adam, Optimizer};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::from_slice(&[1.0f32, -1.0], [2], &Device::Cpu)?.requires_grad_(true);
/// let mut opt = Adam::new(vec![w.clone()], 0.1)?;
/// for _ in 0..3 {
///     opt.zero_grad();
///     w.square()?.sum_all()?.backward()?;
///     opt.step()?;
/// }
/// // Adam's first steps move each weight by about lr, whatever the gradient's scale.
/// let v = w.to_vec::<f32>()?;
/// assert!((v[0] - 0.7).abs() < 0.01 && (v[1] + 0.7).abs() < 0.01, "{v:?}");
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Adam {
    groups: Vec<ParamGroup>,
    /// (beta1, beta2)
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Use the maximum of past second moments.
    pub amsgrad: bool,
    /// Ascend the objective instead (PyTorch's `maximize`; default false): set the field.
    pub maximize: bool,
    decoupled: bool,
    steps: Vec<Vec<u64>>,
    slots: Slots,
}

/// Options of [`Adam`] (torch.optim.Adam's keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamOptions {
    /// Learning rate (default 1e-3).
    pub lr: f64,
    /// Decay rates of the first and second moments (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the denominator (default 1e-8).
    pub eps: f64,
    /// L2 penalty added to the gradient (default 0).
    pub weight_decay: f64,
    /// Use the maximum of past second moments (default false).
    pub amsgrad: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for AdamOptions {
    fn default() -> Self {
        AdamOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
        }
    }
}

/// Options of [`AdamW`] (torch.optim.AdamW's keywords and defaults: as Adam's, with a decoupled
/// weight decay of 0.01).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWOptions {
    /// Learning rate (default 1e-3).
    pub lr: f64,
    /// Decay rates of the first and second moments (default (0.9, 0.999)).
    pub betas: (f64, f64),
    /// Added to the denominator (default 1e-8).
    pub eps: f64,
    /// Decoupled weight decay: `p -= lr * weight_decay * p` (default 0.01).
    pub weight_decay: f64,
    /// Use the maximum of past second moments (default false).
    pub amsgrad: bool,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for AdamWOptions {
    fn default() -> Self {
        AdamWOptions {
            weight_decay: 0.01,
            ..AdamWOptions::from(AdamOptions::default())
        }
    }
}

impl From<AdamOptions> for AdamWOptions {
    fn from(o: AdamOptions) -> Self {
        AdamWOptions {
            lr: o.lr,
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            amsgrad: o.amsgrad,
            maximize: o.maximize,
        }
    }
}

/// AdamW: Adam with decoupled weight decay (default 0.01). Builds an [`Adam`] in decoupled mode.
///
/// ```
/// use wgtorch::optim::{AdamW, AdamWOptions, ParamGroup};
/// use wgtorch::{Device, Tensor};
/// let (w, b) = (Tensor::ones([2, 2], &Device::Cpu)?, Tensor::ones([2], &Device::Cpu)?);
/// let groups = vec![
///     ParamGroup::new(vec![w.requires_grad_(true)]).weight_decay(0.1),
///     ParamGroup::new(vec![b.requires_grad_(true)]).weight_decay(0.0),
/// ];
/// let opts = AdamWOptions { lr: 6e-4, betas: (0.9, 0.95), ..Default::default() };
/// let opt = AdamW::with_options(groups, opts)?;
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct AdamW;

impl AdamW {
    /// AdamW over `params` with learning rate `lr` and PyTorch's other defaults (weight decay 0.01).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        let o = AdamWOptions {
            lr,
            ..Default::default()
        };
        AdamW::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: AdamWOptions) -> Result<Adam> {
        let (lr, wd) = (o.lr, o.weight_decay);
        Adam::build(
            "AdamW", groups, lr, o.betas, o.eps, wd, o.amsgrad, o.maximize, true,
        )
    }
}

impl Adam {
    /// Adam over `params` with learning rate `lr` and PyTorch's other defaults.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        let o = AdamOptions {
            lr,
            ..Default::default()
        };
        Adam::with_options(vec![ParamGroup::new(params)], o)
    }
    /// Every option, with parameter groups (a group's unset `lr`/`weight_decay` take `o`'s).
    pub fn with_options(groups: Vec<ParamGroup>, o: AdamOptions) -> Result<Adam> {
        let (lr, wd) = (o.lr, o.weight_decay);
        Adam::build(
            "Adam", groups, lr, o.betas, o.eps, wd, o.amsgrad, o.maximize, false,
        )
    }
    #[allow(clippy::too_many_arguments)]
    fn build(
        op: &'static str,
        groups: Vec<ParamGroup>,
        lr: f64,
        betas: (f64, f64),
        eps: f64,
        wd: f64,
        amsgrad: bool,
        maximize: bool,
        decoupled: bool,
    ) -> Result<Adam> {
        if !(0.0..1.0).contains(&betas.0) || !(0.0..1.0).contains(&betas.1) {
            return Err(Error::arg(
                op,
                format!("Invalid beta parameters: {betas:?}"),
            ));
        }
        let groups = resolve_groups(op, groups, lr, wd)?;
        let slots = empty_slots(&groups, 3);
        let steps = groups.iter().map(|g| vec![0; g.params.len()]).collect();
        Ok(Adam {
            groups,
            betas,
            eps,
            amsgrad,
            maximize,
            decoupled,
            steps,
            slots,
        })
    }
}

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        let _p = crate::profiler::scope("Optimizer.step#Adam.step");
        let _g = crate::no_grad();
        let (b1, b2) = self.betas;
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, p) in g.params.iter().enumerate() {
                let Some(mut d) = grad_of(p, self.maximize, false, 0.0)? else {
                    continue;
                };
                if !self.amsgrad
                    && fused_step(
                        p,
                        &d,
                        &mut self.slots[gi][pi],
                        &mut self.steps[gi][pi],
                        g,
                        self.betas,
                        self.eps,
                        self.decoupled,
                    )?
                {
                    continue;
                }
                let mut pv = p.detach();
                if g.weight_decay != 0.0 {
                    if self.decoupled {
                        pv = pv.mul_scalar(1.0 - g.lr.get() * g.weight_decay)?;
                    } else {
                        d = d.add(&p.mul_scalar(g.weight_decay)?)?;
                    }
                }
                self.steps[gi][pi] += 1;
                let (bc1, bc2) = bias_corrections(self.betas, self.steps[gi][pi]);
                let s = &mut self.slots[gi][pi];
                let m = match &s[0] {
                    Some(m) => m.mul_scalar(b1)?.add(&d.mul_scalar(1.0 - b1)?)?,
                    None => d.mul_scalar(1.0 - b1)?,
                };
                let v = match &s[1] {
                    Some(v) => v.mul_scalar(b2)?.add(&d.square()?.mul_scalar(1.0 - b2)?)?,
                    None => d.square()?.mul_scalar(1.0 - b2)?,
                };
                let vhat = if self.amsgrad {
                    let mx = match &s[2] {
                        Some(prev) => prev.maximum(&v)?,
                        None => v.clone(),
                    };
                    s[2] = Some(mx.clone());
                    mx
                } else {
                    v.clone()
                };
                let denom = vhat
                    .sqrt()?
                    .mul_scalar(1.0 / bc2.sqrt())?
                    .add_scalar(self.eps)?;
                let upd = m.div(&denom)?.mul_scalar(g.lr.get() / bc1)?;
                assign(p, &pv.sub(&upd)?)?;
                s[0] = Some(m);
                s[1] = Some(v);
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
        for (gi, g) in self.steps.iter().enumerate() {
            for (pi, &n) in g.iter().enumerate() {
                s.scalars.push((format!("step.{gi}.{pi}"), n as f64));
            }
        }
        save_lrs(&self.groups, &mut s);
        s
    }
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()> {
        let l = LoadedState::new(&self.groups, &NAMES, Some("step"), s)?;
        l.apply_lrs(&mut self.groups);
        self.slots = l.slots;
        self.steps = l.steps;
        Ok(())
    }
}

/// Bias corrections `1 - beta^t` after `step` steps, with the step exact in f64 (to 2^53). (As
/// an i32 the step wrapped negative at 2^31, `powi` went infinite and every weight NaN.)
fn bias_corrections((b1, b2): (f64, f64), step: u64) -> (f64, f64) {
    let t = step as f64;
    (1.0 - b1.powf(t), 1.0 - b2.powf(t))
}

pub(super) fn dense_f32(t: &Tensor) -> bool {
    t.dtype() == crate::DType::F32 && t.is_contiguous() && t.storage_offset() == 0
}

/// One kernel per parameter instead of ~12 tensor ops, when the parameter, its gradient and the
/// moments are dense f32 on one device. Returns false (nothing done) otherwise.
#[allow(clippy::too_many_arguments)]
fn fused_step(
    p: &Tensor,
    d: &Tensor,
    s: &mut [Option<Tensor>],
    step: &mut u64,
    g: &ParamGroup,
    betas: (f64, f64),
    eps: f64,
    decoupled: bool,
) -> Result<bool> {
    if !dense_f32(p) || d.dtype() != p.dtype() || d.device() != p.device() || d.shape() != p.shape()
    {
        return Ok(false);
    }
    // A transposed gradient (a Linear weight's, for one) is copied once rather than losing the
    // fused kernel.
    let d = &d.dense()?;
    for slot in s.iter_mut().take(2) {
        match slot {
            Some(t) if !dense_f32(t) || t.device() != p.device() || t.numel() != p.numel() => {
                return Ok(false)
            }
            Some(t) => *t = private_buffer(t)?,
            None => *slot = Some(Tensor::zeros(p.shape(), &p.device())?),
        }
    }
    // Under a compile capture: refused before the step count moves.
    crate::onnx::trace::before_write(p, "adam step")?;
    *step += 1;
    let (b1, b2) = betas;
    let (bc1, bc2) = bias_corrections(betas, *step);
    let h = [
        g.lr.get() as f32,
        b1 as f32,
        b2 as f32,
        eps as f32,
        bc1 as f32,
        bc2 as f32,
        g.weight_decay as f32,
    ];
    let (m, v) = (
        s[0].as_ref().expect("set above"),
        s[1].as_ref().expect("set above"),
    );
    {
        let mut pw = p.0.storage.data.write();
        let mut mw = m.0.storage.data.write();
        let mut vw = v.0.storage.data.write();
        let gr = d.storage();
        pw.adam(&gr, &mut mw, &mut vw, p.numel(), h, decoupled)?;
    }
    for t in [p, m, v] {
        t.0.storage.bump();
    }
    Ok(true)
}
