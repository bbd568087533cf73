//! Elementwise losses (a loss per element, then the [`Reduction`]): mse_loss, l1_loss,
//! smooth_l1_loss, huber_loss, binary_cross_entropy (+ with_logits), kl_div,
//! margin_ranking_loss. Each `xxx(required)` uses PyTorch's defaults; `xxx_with(required,
//! XxxOptions)` takes PyTorch's keywords.

use super::Reduction;
use crate::autograd::{record, Saved};
use crate::{Device, Error, Result, Tensor};

fn same_shape(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    a.same_device(op, b)?;
    if a.shape() != b.shape() {
        return Err(Error::shape(
            op,
            format!(
                "input shape {:?} and target shape {:?} must match",
                a.shape(),
                b.shape()
            ),
        ));
    }
    Ok(())
}

/// PyTorch's `weight` of mse/l1/huber: the input's size exactly.
fn check_weight(op: &'static str, input: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    if let Some(w) = weight {
        input.same_device(op, w)?;
        if w.shape() != input.shape() {
            return Err(Error::shape(
                op,
                format!(
                    "Weights and input must have the same size (weight {:?}, input {:?})",
                    w.shape(),
                    input.shape()
                ),
            ));
        }
    }
    Ok(())
}

/// `loss * weight` reduced with the weighted mean (sum / sum of weights), as mse/l1 do.
fn weighted(
    op: &'static str,
    loss: &Tensor,
    weight: Option<&Tensor>,
    r: Reduction,
) -> Result<Tensor> {
    match weight {
        None => r.apply(op, loss),
        Some(w) => {
            let w = crate::amp::upper(w)?;
            r.apply_weighted(op, &loss.mul(&w)?, &w)
        }
    }
}

macro_rules! options {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default),* }
            }
        }
    };
}

options!(
    /// Options of [`mse_loss_with`].
    MseLossOptions {
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
        /// Per-element weights of the input's size; `mean` divides by their sum (default none).
        weight: Option<Tensor> = None,
    }
);
options!(
    /// Options of [`l1_loss_with`].
    L1LossOptions {
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
        /// Per-element weights of the input's size; `mean` divides by their sum (default none).
        weight: Option<Tensor> = None,
    }
);
options!(
    /// Options of [`smooth_l1_loss_with`].
    SmoothL1LossOptions {
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
        /// Where the loss turns from quadratic to linear, >= 0 (default 1).
        beta: f64 = 1.0,
    }
);
options!(
    /// Options of [`huber_loss_with`].
    HuberLossOptions {
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
        /// Where the loss turns from quadratic to linear, > 0 (default 1).
        delta: f64 = 1.0,
        /// Per-element weights of the input's size; `mean` is the plain mean of the weighted
        /// losses, as PyTorch has it (default none).
        weight: Option<Tensor> = None,
    }
);
options!(
    /// Options of [`binary_cross_entropy_with`].
    BinaryCrossEntropyOptions {
        /// Weights broadcast over the per-element losses (default none).
        weight: Option<Tensor> = None,
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
    }
);
options!(
    /// Options of [`binary_cross_entropy_with_logits_with`].
    BinaryCrossEntropyWithLogitsOptions {
        /// Weights broadcast over the per-element losses (default none).
        weight: Option<Tensor> = None,
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
        /// Weight of positive examples, broadcast over the classes (default none).
        pos_weight: Option<Tensor> = None,
    }
);
options!(
    /// Options of [`kl_div_with`].
    KlDivOptions {
        /// How to combine (default mean over elements; `BatchMean` is the mathematically correct
        /// KL divergence per sample).
        reduction: Reduction = Reduction::Mean,
        /// The target is given as log-probabilities (default false).
        log_target: bool = false,
    }
);
options!(
    /// Options of [`margin_ranking_loss_with`].
    MarginRankingLossOptions {
        /// Required margin between the ranked inputs (default 0).
        margin: f64 = 0.0,
        /// How to combine (default mean).
        reduction: Reduction = Reduction::Mean,
    }
);

/// Mean squared error (torch.nn.functional.mse_loss with its defaults).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::from_slice(&[1.0f32, 3.0], [2], &Device::Cpu)?;
/// let t = Tensor::from_slice(&[0.0f32, 0.0], [2], &Device::Cpu)?;
/// assert_eq!(F::mse_loss(&x, &t)?.item()?, 5.0);
/// let sum = F::mse_loss_with(&x, &t, F::MseLossOptions { reduction: F::Reduction::Sum, ..Default::default() })?;
/// assert_eq!(sum.item()?, 10.0);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn mse_loss(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    mse_loss_with(input, target, MseLossOptions::default())
}

/// [`mse_loss`] with PyTorch's keywords (`reduction`, `weight`).
pub fn mse_loss_with(input: &Tensor, target: &Tensor, o: MseLossOptions) -> Result<Tensor> {
    let _p = crate::profiler::op("mse_loss", &[input, target]);
    same_shape("mse_loss", input, target)?;
    check_weight("mse_loss", input, o.weight.as_ref())?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    weighted(
        "mse_loss",
        &input.sub(target)?.square()?,
        o.weight.as_ref(),
        o.reduction,
    )
}

/// Mean absolute error (torch.nn.functional.l1_loss with its defaults).
pub fn l1_loss(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    l1_loss_with(input, target, L1LossOptions::default())
}

/// [`l1_loss`] with PyTorch's keywords (`reduction`, `weight`).
pub fn l1_loss_with(input: &Tensor, target: &Tensor, o: L1LossOptions) -> Result<Tensor> {
    same_shape("l1_loss", input, target)?;
    check_weight("l1_loss", input, o.weight.as_ref())?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    weighted(
        "l1_loss",
        &input.sub(target)?.abs()?,
        o.weight.as_ref(),
        o.reduction,
    )
}

/// Quadratic (`0.5 d^2 / beta`) below `beta`, linear (`|d| - 0.5 beta`) above; [`huber_loss`]
/// times `1 / beta` (torch.nn.functional.smooth_l1_loss with its defaults).
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    smooth_l1_loss_with(input, target, SmoothL1LossOptions::default())
}

/// [`smooth_l1_loss`] with PyTorch's keywords (`reduction`, `beta`).
pub fn smooth_l1_loss_with(
    input: &Tensor,
    target: &Tensor,
    o: SmoothL1LossOptions,
) -> Result<Tensor> {
    let op = "smooth_l1_loss";
    same_shape(op, input, target)?;
    if o.beta.is_nan() || o.beta < 0.0 {
        return Err(Error::arg(
            op,
            format!(
                "smooth_l1_loss does not support negative values for beta (got {})",
                o.beta
            ),
        ));
    }
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    let d = input.sub(target)?;
    if o.beta == 0.0 {
        return o.reduction.apply(op, &d.abs()?);
    }
    o.reduction
        .apply(op, &quadratic_then_linear(&d, o.beta, 0.5 / o.beta, 1.0)?)
}

/// `qscale * d^2` where `|d| < beta`, else `lscale * (|d| - beta / 2)`.
fn quadratic_then_linear(d: &Tensor, beta: f64, qscale: f64, lscale: f64) -> Result<Tensor> {
    let a = d.abs()?;
    let quad = d.square()?.mul_scalar(qscale)?;
    let lin = a.sub_scalar(0.5 * beta)?.mul_scalar(lscale)?;
    Tensor::where_cond(&a.lt_scalar(beta)?, &quad, &lin)
}

/// Huber loss: `0.5 d^2` where `|d| < delta`, else `delta (|d| - delta / 2)`
/// (torch.nn.functional.huber_loss with its defaults).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::from_slice(&[0.5f32, 3.0], [2], &Device::Cpu)?;
/// let t = Tensor::zeros([2], &Device::Cpu)?;
/// let l = F::huber_loss_with(&x, &t, F::HuberLossOptions { delta: 2.0, ..Default::default() })?;
/// assert_eq!(l.item()?, (0.125 + 2.0 * (3.0 - 1.0)) / 2.0);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn huber_loss(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    huber_loss_with(input, target, HuberLossOptions::default())
}

/// [`huber_loss`] with PyTorch's keywords (`reduction`, `delta`, `weight`).
pub fn huber_loss_with(input: &Tensor, target: &Tensor, o: HuberLossOptions) -> Result<Tensor> {
    let op = "huber_loss";
    same_shape(op, input, target)?;
    check_weight(op, input, o.weight.as_ref())?;
    if o.delta.is_nan() || o.delta <= 0.0 {
        return Err(Error::arg(
            op,
            format!(
                "huber_loss does not support non-positive values for delta (got {})",
                o.delta
            ),
        ));
    }
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    let mut l = quadratic_then_linear(&input.sub(target)?, o.delta, 0.5, o.delta)?;
    if let Some(w) = &o.weight {
        l = l.mul(&crate::amp::upper(w)?)?;
    }
    o.reduction.apply(op, &l)
}

/// Refuse probabilities outside [0, 1] (and NaN) with PyTorch's message. Checked on the CPU,
/// where it costs no synchronisation; on a GPU such inputs give NaN losses (the log of a
/// negative number), never a finite wrong value.
fn check_probabilities(op: &'static str, x: &Tensor) -> Result<()> {
    if x.device() != Device::Cpu {
        return Ok(());
    }
    let bad = x
        .detach()
        .clamp(Some(0.0), Some(1.0))?
        .ne(&x.detach())?
        .to_dtype(crate::DType::F32)?
        .sum_all()?
        .item()?;
    if bad > 0.0 {
        return Err(Error::arg(
            op,
            "all elements of input should be between 0 and 1",
        ));
    }
    Ok(())
}

/// Per-element binary cross-entropy `-(t log x + (1 - t) log(1 - x))` with each log clamped to
/// at least -100 (PyTorch's), and PyTorch's gradients: `(x - t) / max(x (1 - x), 1e-12)` for the
/// input (finite at 0 and 1, where the composite's would be NaN) and `log(1 - x) - log(x)` for
/// the target.
fn bce_elementwise(x: &Tensor, t: &Tensor) -> Result<Tensor> {
    let out = {
        let _g = crate::no_grad();
        let log_x = x.log()?.clamp(Some(-100.0), None)?;
        let log_1mx = x.neg()?.add_scalar(1.0)?.log()?.clamp(Some(-100.0), None)?;
        // -(t log x + (1 - t) log(1 - x)) = -(log(1 - x) + t (log x - log(1 - x)))
        log_1mx.add(&t.mul(&log_x.sub(&log_1mx)?)?)?.neg()?
    };
    Ok(record(
        out,
        "binary_cross_entropy",
        &[x, t],
        (Saved::new(x), Saved::new(t)),
        |(x, t), g| {
            let (x, t) = (x.get()?, t.get()?);
            let one_m_x = x.neg()?.add_scalar(1.0)?;
            let denom = x.mul(&one_m_x)?.clamp(Some(1e-12), None)?;
            let gx = g.mul(&x.sub(&t)?)?.div(&denom)?;
            let gt = g.mul(&one_m_x.log()?.sub(&x.log()?)?)?;
            Ok(vec![Some(gx), Some(gt)])
        },
    ))
}

/// Binary cross-entropy of probabilities `input` in [0, 1] against `target`, averaged
/// (torch.nn.functional.binary_cross_entropy with its defaults).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let p = Tensor::from_slice(&[0.5f32, 1.0], [2], &Device::Cpu)?;
/// let t = Tensor::from_slice(&[1.0f32, 0.0], [2], &Device::Cpu)?;
/// // log(1 - 1) is clamped to -100, as in PyTorch.
/// let l = F::binary_cross_entropy(&p, &t)?.item()?;
/// assert!((l - (2f64.ln() + 100.0) / 2.0).abs() < 1e-4);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn binary_cross_entropy(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    binary_cross_entropy_with(input, target, BinaryCrossEntropyOptions::default())
}

/// [`binary_cross_entropy`] with PyTorch's keywords (`weight`, `reduction`).
pub fn binary_cross_entropy_with(
    input: &Tensor,
    target: &Tensor,
    o: BinaryCrossEntropyOptions,
) -> Result<Tensor> {
    let op = "binary_cross_entropy";
    if input.shape() != target.shape() {
        return Err(Error::shape(
            op,
            format!(
                "Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please ensure they have the same size.",
                target.shape(),
                input.shape()
            ),
        ));
    }
    input.same_device(op, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    check_probabilities(op, input)?;
    let mut l = bce_elementwise(input, target)?;
    if let Some(w) = &o.weight {
        input.same_device(op, w)?;
        l = l.mul(&crate::amp::upper(w)?)?;
    }
    o.reduction.apply(op, &l)
}

/// Binary cross-entropy on logits, stable for large |x|, averaged
/// (torch.nn.functional.binary_cross_entropy_with_logits with its defaults).
pub fn binary_cross_entropy_with_logits(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    binary_cross_entropy_with_logits_with(
        input,
        target,
        BinaryCrossEntropyWithLogitsOptions::default(),
    )
}

/// [`binary_cross_entropy_with_logits`] with PyTorch's keywords (`weight`, `reduction`,
/// `pos_weight`).
pub fn binary_cross_entropy_with_logits_with(
    input: &Tensor,
    target: &Tensor,
    o: BinaryCrossEntropyWithLogitsOptions,
) -> Result<Tensor> {
    let op = "binary_cross_entropy_with_logits";
    same_shape(op, input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    // log(1 + exp(-|x|)) + max(-x, 0) = -log(sigmoid(x))
    let log_sig_neg = input
        .abs()?
        .neg()?
        .exp()?
        .add_scalar(1.0)?
        .log()?
        .add(&input.neg()?.relu()?)?;
    let mut loss = match &o.pos_weight {
        None => input
            .mul(&target.neg()?.add_scalar(1.0)?)?
            .add(&log_sig_neg)?,
        Some(pw) => {
            input.same_device(op, pw)?;
            let lw = pw.sub_scalar(1.0)?.mul(target)?.add_scalar(1.0)?;
            target
                .neg()?
                .add_scalar(1.0)?
                .mul(input)?
                .add(&lw.mul(&log_sig_neg)?)?
        }
    };
    if let Some(w) = &o.weight {
        input.same_device(op, w)?;
        loss = loss.mul(&crate::amp::upper(w)?)?;
    }
    o.reduction.apply(op, &loss)
}

/// Kullback-Leibler divergence of `target` from the log-probabilities `input`:
/// `target (log target - input)` per element, averaged over elements
/// (torch.nn.functional.kl_div with its defaults; PyTorch advises `BatchMean`).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let logq = Tensor::from_slice(&[0.5f32, 0.5], [1, 2], &Device::Cpu)?.log()?;
/// let p = Tensor::from_slice(&[0.5f32, 0.5], [1, 2], &Device::Cpu)?;
/// let o = F::KlDivOptions { reduction: F::Reduction::BatchMean, ..Default::default() };
/// assert!(F::kl_div_with(&logq, &p, o)?.item()?.abs() < 1e-7);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn kl_div(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    kl_div_with(input, target, KlDivOptions::default())
}

/// [`kl_div`] with PyTorch's keywords (`reduction`, including `BatchMean`; `log_target`).
pub fn kl_div_with(input: &Tensor, target: &Tensor, o: KlDivOptions) -> Result<Tensor> {
    let op = "kl_div";
    same_shape(op, input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    let l = if o.log_target {
        target.exp()?.mul(&target.sub(input)?)?
    } else {
        // xlogy(t, t) - t * input, with 0 log 0 = 0 (and a zero gradient there).
        let zero = target.eq_scalar(0.0)?;
        let safe = Tensor::where_cond(&zero, &target.ones_like()?, target)?;
        let xlogx = Tensor::where_cond(&zero, &target.zeros_like()?, &target.mul(&safe.log()?)?)?;
        xlogx.sub(&target.mul(input)?)?
    };
    match o.reduction {
        Reduction::BatchMean => {
            let s = l.sum_all()?;
            match input.shape().first() {
                Some(&n) => s.div_scalar(n as f64),
                None => Ok(s),
            }
        }
        r => r.apply(op, &l),
    }
}

/// `max(0, -target (input1 - input2) + margin)`, averaged: `target` is 1 where `input1` should
/// rank higher and -1 where `input2` should (torch.nn.functional.margin_ranking_loss).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let a = Tensor::from_slice(&[1.0f32, 0.0], [2], &Device::Cpu)?;
/// let b = Tensor::from_slice(&[0.0f32, 0.5], [2], &Device::Cpu)?;
/// let y = Tensor::from_slice(&[1.0f32, 1.0], [2], &Device::Cpu)?;
/// let o = F::MarginRankingLossOptions { margin: 0.5, ..Default::default() };
/// assert_eq!(F::margin_ranking_loss_with(&a, &b, &y, o)?.item()?, 0.5);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn margin_ranking_loss(input1: &Tensor, input2: &Tensor, target: &Tensor) -> Result<Tensor> {
    margin_ranking_loss_with(input1, input2, target, MarginRankingLossOptions::default())
}

/// [`margin_ranking_loss`] with PyTorch's keywords (`margin`, `reduction`).
pub fn margin_ranking_loss_with(
    input1: &Tensor,
    input2: &Tensor,
    target: &Tensor,
    o: MarginRankingLossOptions,
) -> Result<Tensor> {
    let op = "margin_ranking_loss";
    input1.same_device(op, input2)?;
    input1.same_device(op, target)?;
    if input1.ndim() != input2.ndim() || input1.ndim() != target.ndim() {
        return Err(Error::shape(
            op,
            format!(
                "margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: {:?}, input2: {:?}, target: {:?}",
                input1.shape(),
                input2.shape(),
                target.shape()
            ),
        ));
    }
    let (a, b) = (&crate::amp::upper(input1)?, &crate::amp::upper(input2)?);
    let l = target
        .neg()?
        .mul(&a.sub(b)?)?
        .add_scalar(o.margin)?
        .clamp(Some(0.0), None)?;
    o.reduction.apply(op, &l)
}
