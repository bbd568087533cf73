//! Losses: cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
//! binary_cross_entropy_with_logits.

use crate::{DType, Error, Result, Tensor};

/// How per-element losses are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// Keep every element's loss.
    None,
    /// Average (the default).
    #[default]
    Mean,
    /// Sum.
    Sum,
}

impl Reduction {
    /// Parse PyTorch's string form.
    pub fn parse(s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            _ => Err(Error::arg(
                "reduction",
                format!("{s} is not a valid value for reduction"),
            )),
        }
    }
    fn apply(self, t: &Tensor) -> Result<Tensor> {
        match self {
            Reduction::None => Ok(t.clone()),
            Reduction::Mean => t.mean_all(),
            Reduction::Sum => t.sum_all(),
        }
    }
}

/// Move the class dim (1) last and flatten: `[N, C, d...]` → `[N*d..., C]`; targets `[N*d...]`.
fn flatten_classes(input: &Tensor, target: &Tensor, op: &'static str) -> Result<(Tensor, Tensor)> {
    input.same_device(op, target)?;
    if !target.dtype().is_int() {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::INDEX,
            found: target.dtype(),
        });
    }
    if input.ndim() < 2 {
        return Err(Error::shape(
            op,
            format!(
                "expected input [N, C, ...] with at least 2 dims, got {:?}",
                input.shape()
            ),
        ));
    }
    let mut expect = vec![input.shape()[0]];
    expect.extend(&input.shape()[2..]);
    if target.shape() != expect.as_slice() {
        return Err(Error::shape(
            op,
            format!(
                "Expected target size {expect:?}, got {:?} (input {:?})",
                target.shape(),
                input.shape()
            ),
        ));
    }
    let c = input.shape()[1] as isize;
    let x = if input.ndim() == 2 {
        input.clone()
    } else {
        let mut p: Vec<isize> = vec![0];
        p.extend(2..input.ndim() as isize);
        p.push(1);
        input.permute(&p)?.reshape(&[-1, c])?
    };
    Ok((x, target.reshape(&[-1])?))
}

/// The loss of each row of `logp` `[rows, C]` at its target (gathered under `op`'s name, so an
/// out-of-range target is reported as `op`'s), ignored targets contributing nothing.
fn nll_rows(
    op: &'static str,
    logp: &Tensor,
    target: &Tensor,
    ignore_index: i64,
    label_smoothing: f64,
    reduction: Reduction,
    out_shape: &[usize],
) -> Result<Tensor> {
    let c = logp.shape()[1];
    let keep = target.ne(&target.scalar_like(ignore_index as f64)?)?;
    let safe_t = Tensor::where_cond(&keep, target, &target.zeros_like()?)?;
    let picked = logp
        .gather_as(op, 1, &safe_t.unsqueeze(1)?)?
        .reshape(&[-1])?
        .neg()?;
    let mut loss = picked;
    if label_smoothing > 0.0 {
        let smooth = logp
            .sum_dims(&[1], false)?
            .neg()?
            .mul_scalar(1.0 / c as f64)?;
        loss = loss
            .mul_scalar(1.0 - label_smoothing)?
            .add(&smooth.mul_scalar(label_smoothing)?)?;
    }
    let keepf = keep.to_dtype(logp.dtype())?;
    let loss = loss.mul(&keepf)?;
    match reduction {
        Reduction::None => loss.reshape_to(out_shape),
        Reduction::Sum => loss.sum_all(),
        Reduction::Mean => loss.sum_all()?.div(&keepf.sum_all()?),
    }
}

/// Cross-entropy between logits `[N, C, ...]` and class indices `[N, ...]`
/// (torch.nn.functional.cross_entropy with ignore_index and label_smoothing).
pub fn cross_entropy(
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(Error::arg(
            "cross_entropy",
            format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"),
        ));
    }
    let (x, t) = flatten_classes(input, target, "cross_entropy")?;
    nll_rows(
        "cross_entropy",
        &x.log_softmax(1)?,
        &t,
        ignore_index,
        label_smoothing,
        reduction,
        target.shape(),
    )
}

/// Negative log-likelihood of log-probabilities `[N, C, ...]` (torch.nn.functional.nll_loss).
pub fn nll_loss(
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
    ignore_index: i64,
) -> Result<Tensor> {
    let input = &crate::amp::upper(input)?;
    let (x, t) = flatten_classes(input, target, "nll_loss")?;
    nll_rows(
        "nll_loss",
        &x,
        &t,
        ignore_index,
        0.0,
        reduction,
        target.shape(),
    )
}

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

/// Mean squared error.
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("mse_loss", input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    reduction.apply(&input.sub(target)?.square()?)
}

/// Mean absolute error.
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("l1_loss", input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    reduction.apply(&input.sub(target)?.abs()?)
}

/// Huber-style loss: quadratic below `beta`, linear above.
pub fn smooth_l1_loss(
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
    beta: f64,
) -> Result<Tensor> {
    same_shape("smooth_l1_loss", input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    let d = input.sub(target)?;
    let a = d.abs()?;
    if beta == 0.0 {
        return reduction.apply(&a);
    }
    let quad = d.square()?.mul_scalar(0.5 / beta)?;
    let lin = a.sub_scalar(0.5 * beta)?;
    reduction.apply(&Tensor::where_cond(
        &a.lt(&a.scalar_like(beta)?)?,
        &quad,
        &lin,
    )?)
}

/// Binary cross-entropy on logits, stable for large |x|, with optional `pos_weight`.
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    same_shape("binary_cross_entropy_with_logits", input, target)?;
    let (input, target) = (&crate::amp::upper(input)?, &crate::amp::upper(target)?);
    // log(1 + exp(-|x|)) + max(-x, 0) = -log(sigmoid(x))
    let log_sig_neg = input
        .abs()?
        .neg()?
        .exp()?
        .add_scalar(1.0)?
        .log()?
        .add(&input.neg()?.relu()?)?;
    let loss = match pos_weight {
        None => input
            .mul(&target.neg()?.add_scalar(1.0)?)?
            .add(&log_sig_neg)?,
        Some(pw) => {
            let lw = pw.sub_scalar(1.0)?.mul(target)?.add_scalar(1.0)?;
            target
                .neg()?
                .add_scalar(1.0)?
                .mul(input)?
                .add(&lw.mul(&log_sig_neg)?)?
        }
    };
    reduction.apply(&loss)
}
