//! Class-index losses (cross_entropy, nll_loss) and the [`Reduction`] every loss shares; the
//! elementwise losses are in `loss_pointwise.rs`.

use crate::autograd::{is_grad_enabled, record, Saved};
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
    /// Sum divided by the batch size (`input.shape[0]`): `kl_div` only, as in PyTorch.
    BatchMean,
}

impl Reduction {
    /// Parse PyTorch's string form.
    pub fn parse(s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            "batchmean" => Ok(Reduction::BatchMean),
            _ => Err(Error::arg(
                "reduction",
                format!("{s} is not a valid value for reduction"),
            )),
        }
    }
    /// Combine the per-element losses `t` of `op` (`batchmean` is refused: only `kl_div` has it).
    pub(crate) fn apply(self, op: &'static str, t: &Tensor) -> Result<Tensor> {
        match self {
            Reduction::None => Ok(t.clone()),
            Reduction::Mean => t.mean_all(),
            Reduction::Sum => t.sum_all(),
            Reduction::BatchMean => Err(Reduction::batchmean_refused(op)),
        }
    }
    /// Combine weighted losses: `mean` divides by the sum of `weight` (PyTorch's weighted mean).
    pub(crate) fn apply_weighted(
        self,
        op: &'static str,
        t: &Tensor,
        weight: &Tensor,
    ) -> Result<Tensor> {
        match self {
            Reduction::Mean => t.sum_all()?.div(&weight.sum_all()?),
            r => r.apply(op, t),
        }
    }
    fn batchmean_refused(op: &'static str) -> Error {
        Error::arg(
            op,
            "batchmean is not a valid value for reduction (only kl_div takes it)",
        )
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
        input.permute(&p)?.reshape([-1, c])?
    };
    Ok((x, target.reshape([-1])?))
}

/// What [`nll_rows`] scores: log-probabilities `[rows, C]` (nll_loss), or logits whose
/// log-softmax it takes itself (cross_entropy), so that the log-softmax's gradient and the
/// gather's can be one pass ([`log_softmax_at`]).
#[derive(Clone, Copy)]
enum Scores<'a> {
    LogProbs(&'a Tensor),
    Logits(&'a Tensor),
}

/// `log_softmax(x, 1)[i, t[i]]` for logits `x` `[rows, C]` and in-range targets `t` `[rows]`.
///
/// As ops, the gradient is a `[rows, C]` tensor of zeros with one value per row scattered in,
/// which log-softmax's backward then reads twice (its row sums, then each element): three
/// passes over `rows·C` and a fill, for a loss over a large vocabulary the largest cost after
/// the decoder's products. Where the backend has a kernel for it (f32/f64 on the CPU) this is
/// one node whose gradient is written in one pass over the log-probabilities, with the same
/// bits as those ops; elsewhere and under a capture (which records the ops) it is those ops.
/// Under `create_graph` the node's gradient is the same formula in differentiable ops, on a
/// log-softmax taken again from `x` (within an ulp of the ops', not bit for bit).
fn log_softmax_at(op: &'static str, x: &Tensor, t: &Tensor) -> Result<Tensor> {
    let at = |logp: &Tensor| logp.gather_as(op, 1, &t.unsqueeze(1)?)?.reshape([-1]);
    let fused = matches!(x.dtype(), DType::F32 | DType::F64)
        && matches!(x.device(), crate::Device::Cpu)
        && x.numel() > 0
        && !crate::onnx::trace::capturing();
    if !fused {
        return at(&x.log_softmax(1)?);
    }
    let logp = x.detach().log_softmax(1)?;
    let picked = at(&logp)?;
    let saved = (Saved::new(x), Saved::new(&logp), Saved::new(t), op);
    Ok(record(picked, op, &[x], saved, |s, g| {
        let (x, logp, t, op) = s;
        let (n, t) = (x.shape()[1], t.get()?);
        if !is_grad_enabled() {
            let (logp, g) = (logp.get()?.dense()?, g.dense()?);
            let cols = t
                .to_dtype(DType::I64)?
                .to_vec::<i64>()?
                .into_iter()
                .map(|c| usize::try_from(c).ok().filter(|&c| c < n))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| Error::msg(format!("{op}: a saved target left [0, {n})")))?;
            let s = logp
                .storage()
                .log_softmax_at_backward_rows(&cols, &g.storage(), n)?;
            if let Some(s) = s {
                return Ok(vec![Some(Tensor::from_storage(
                    s,
                    logp.shape(),
                    logp.device(),
                ))]);
            }
        }
        // The ops' gradient (differentiable under `create_graph`: the log-softmax is taken again
        // from `x` with its own node).
        let y = x.get()?.log_softmax(1)?;
        let scattered =
            Tensor::zeros_scatter_add(op, y.shape(), 1, &t.unsqueeze(1)?, &g.unsqueeze(1)?)?;
        Ok(vec![Some(super::reduce::softmax_backward(
            &y, &scattered, true,
        )?)])
    }))
}

/// The loss and weight of each row as [`nll_rows`]' ops compute them (`-logp[t] · w[t]` and
/// `w[t]`, 0 for ignored rows) in one GPU kernel, and their gradient in one more, where those
/// ops take about a dozen launches forward and half as many backward: for f32 scores on a GPU
/// outside a compile capture (which records the ops), `None` elsewhere. The arithmetic is the
/// ops', so are the bits. The CPU keeps the ops, cheap there, with [`log_softmax_at`]'s
/// one-pass gradient for logits; under `create_graph` the gradient is the ops' too.
fn gpu_rows(
    op: &'static str,
    scores: Scores<'_>,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore: Option<i32>,
) -> Result<Option<(Tensor, Tensor)>> {
    let (Scores::LogProbs(x) | Scores::Logits(x)) = scores;
    let takes = x.device().is_gpu()
        && x.dtype() == DType::F32
        && x.numel() > 0
        && matches!(target.dtype(), DType::I32 | DType::I64)
        // (A weight that requires a gradient takes the ops, which differentiate it.)
        && weight.is_none_or(|w| w.dtype() == DType::F32 && !w.requires_grad())
        && !crate::onnx::trace::capturing();
    if !takes {
        return Ok(None);
    }
    let logp = match scores {
        Scores::LogProbs(logp) => logp.dense()?,
        Scores::Logits(x) => x.log_softmax(1)?.dense()?,
    };
    let (rows, n) = (logp.shape()[0], logp.shape()[1]);
    let (t, w) = (target.dense()?, weight.map(Tensor::dense).transpose()?);
    let fused = {
        let w = w.as_ref().map(|w| w.storage());
        let rows_of = logp.storage();
        rows_of.nll_rows(op, rows, n, &t.storage(), w.as_deref(), ignore)?
    };
    let Some((loss, wt, kept)) = fused else {
        return Ok(None);
    };
    let dev = logp.device();
    let (loss, wt, kept) = (
        Tensor::from_storage(loss, &[rows], dev),
        Tensor::from_storage(wt, &[rows], dev),
        Tensor::from_storage(kept, &[rows], dev),
    );
    // The kernel's copy of the targets (-1 where skipped): the caller may change its own in place.
    let saved = (Saved::new(&kept), Saved::new(&wt), n, op);
    let loss = record(loss, op, &[&logp], saved, |s, g| {
        let (kept, wt, n, op) = s;
        let (kept, wt, n) = (kept.get()?, wt.get()?, *n);
        let rows = kept.numel();
        if !is_grad_enabled() {
            let g = g.dense()?;
            let d = g
                .storage()
                .nll_rows_backward(op, &kept.storage(), &wt.storage(), rows, n)?;
            return Ok(vec![Some(Tensor::from_storage(d, &[rows, n], g.device()))]);
        }
        // Differentiable: the ops' gradient (the product's and the negation's, masked, then
        // scattered into zeros).
        let keep = kept.ne(&kept.scalar_like(-1.0)?)?;
        let safe_t = Tensor::where_cond(&keep, &kept, &kept.scalar_like(0.0)?)?;
        let v = g.mul(&wt)?.neg()?;
        let v = Tensor::where_cond(&keep, &v, &v.scalar_like(0.0)?)?;
        let d =
            Tensor::zeros_scatter_add(op, &[rows, n], 1, &safe_t.unsqueeze(1)?, &v.unsqueeze(1)?)?;
        Ok(vec![Some(d)])
    });
    Ok(Some((loss, wt)))
}

/// The loss of each row of `logp` `[rows, C]` at its target (gathered under `op`'s name, so an
/// out-of-range target is reported as `op`'s), ignored targets contributing nothing.
/// With class weights `w`, row `i` counts `w[t_i]` times and `mean` divides by the sum of the
/// counted weights; label smoothing adds `ls / C * -sum_c w_c logp_c` per kept row (PyTorch's
/// formulas, including its normalisation of the smoothing term by the same weight sum).
#[allow(clippy::too_many_arguments)]
fn nll_rows(
    op: &'static str,
    scores: Scores<'_>,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    label_smoothing: f64,
    reduction: Reduction,
    out_shape: &[usize],
) -> Result<Tensor> {
    let (Scores::LogProbs(rows) | Scores::Logits(rows)) = scores;
    let c = rows.shape()[1];
    if let Some(w) = weight {
        rows.same_device(op, w)?;
        if w.shape() != [c] {
            return Err(Error::shape(
                op,
                format!(
                    "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}",
                    w.shape()
                ),
            ));
        }
    }
    if reduction == Reduction::BatchMean {
        return Err(Reduction::batchmean_refused(op));
    }
    // The ignore index as a target: `None` when no int32 holds it, so that it matches no target
    // (PyTorch's targets are class indices, so in range) on every path; a scalar of it would
    // saturate.
    let ignore = i32::try_from(ignore_index).ok();
    let fused = match label_smoothing {
        0.0 => gpu_rows(op, scores, target, weight, ignore)?,
        _ => None,
    };
    if let Some((loss, wt)) = fused {
        return match reduction {
            Reduction::None => loss.reshape(out_shape),
            r => r.apply_weighted(op, &loss, &wt),
        };
    }
    // Ignored rows contribute exactly nothing, as in PyTorch (which skips them), whatever their
    // scores: a masked score of -inf there made `-logp · 0` NaN. Masked, not multiplied by 0.
    let keep = match ignore {
        Some(i) => target.ne(&target.scalar_like(i as f64)?)?,
        None => target.eq(target)?,
    };
    let kept = |v: &Tensor| Tensor::where_cond(&keep, v, &v.scalar_like(0.0)?);
    let safe_t = kept(target)?;
    let picked = match scores {
        Scores::LogProbs(logp) => logp
            .gather_as(op, 1, &safe_t.unsqueeze(1)?)?
            .reshape([-1])?,
        Scores::Logits(x) => log_softmax_at(op, x, &safe_t)?,
    };
    // Negated, then masked: an ignored row's loss is +0, as PyTorch writes it.
    let picked = kept(&picked.neg()?)?;
    let dtype = picked.dtype();
    // Each row's weight: w[t] (0 where ignored).
    let wt = match weight {
        Some(w) => kept(&w.to_dtype(dtype)?.gather_as(op, 0, &safe_t)?)?,
        None => keep.to_dtype(dtype)?,
    };
    let mut loss = picked.mul(&wt)?;
    if label_smoothing > 0.0 {
        let logp = match scores {
            Scores::LogProbs(logp) => logp.clone(),
            Scores::Logits(x) => x.log_softmax(1)?,
        };
        let lw = match weight {
            Some(w) => logp.mul(&w.to_dtype(dtype)?.unsqueeze(0)?)?,
            None => logp,
        };
        let smooth =
            kept(&lw.sum_dims([1], false)?.neg()?)?.mul_scalar(label_smoothing / c as f64)?;
        loss = loss.mul_scalar(1.0 - label_smoothing)?.add(&smooth)?;
    }
    match reduction {
        Reduction::None => loss.reshape(out_shape),
        r => r.apply_weighted(op, &loss, &wt),
    }
}

/// Options of [`cross_entropy_with`] (torch.nn.functional.cross_entropy's keywords).
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions {
    /// Per-class weights `[C]` (default none).
    pub weight: Option<Tensor>,
    /// Target value that contributes nothing (default -100).
    pub ignore_index: i64,
    /// How to combine (default mean over the non-ignored targets' weights).
    pub reduction: Reduction,
    /// Mix of the uniform distribution into the targets, in [0, 1] (default 0).
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// Options of [`nll_loss_with`] (torch.nn.functional.nll_loss's keywords).
#[derive(Clone, Debug)]
pub struct NllLossOptions {
    /// Per-class weights `[C]` (default none).
    pub weight: Option<Tensor>,
    /// Target value that contributes nothing (default -100).
    pub ignore_index: i64,
    /// How to combine (default mean over the non-ignored targets' weights).
    pub reduction: Reduction,
}

impl Default for NllLossOptions {
    fn default() -> Self {
        NllLossOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// Cross-entropy between logits `[N, C, ...]` and class indices `[N, ...]`, averaged
/// (torch.nn.functional.cross_entropy with its defaults; [`cross_entropy_with`] for the rest).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{DType, Device, Tensor};
/// let logits = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 2.0], [2, 2], &Device::Cpu)?;
/// let target = Tensor::from_slice(&[0i32, 1], [2], &Device::Cpu)?;
/// let loss = F::cross_entropy(&logits, &target)?;
/// assert!((loss.item()? - (1.0 + (-2.0f64).exp()).ln()).abs() < 1e-6);
/// let smooth = F::cross_entropy_with(
///     &logits,
///     &target,
///     F::CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() },
/// )?;
/// assert!(smooth.item()? > loss.item()?);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn cross_entropy(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    cross_entropy_with(input, target, CrossEntropyOptions::default())
}

/// [`cross_entropy`] with PyTorch's keywords: class `weight`, `ignore_index`, `reduction`,
/// `label_smoothing`.
pub fn cross_entropy_with(
    input: &Tensor,
    target: &Tensor,
    options: CrossEntropyOptions,
) -> Result<Tensor> {
    let _p = crate::profiler::op("cross_entropy", &[input, target]);
    let CrossEntropyOptions {
        weight,
        ignore_index,
        reduction,
        label_smoothing,
    } = options;
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(Error::arg(
            "cross_entropy",
            format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"),
        ));
    }
    let (x, t) = flatten_classes(input, target, "cross_entropy")?;
    // Label smoothing reads every log-probability: take them once, here.
    let logp = (label_smoothing > 0.0)
        .then(|| x.log_softmax(1))
        .transpose()?;
    nll_rows(
        "cross_entropy",
        logp.as_ref().map_or(Scores::Logits(&x), Scores::LogProbs),
        &t,
        weight.as_ref(),
        ignore_index,
        label_smoothing,
        reduction,
        target.shape(),
    )
}

/// Negative log-likelihood of log-probabilities `[N, C, ...]`, averaged
/// (torch.nn.functional.nll_loss with its defaults; [`nll_loss_with`] for the rest).
pub fn nll_loss(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    nll_loss_with(input, target, NllLossOptions::default())
}

/// [`nll_loss`] with PyTorch's keywords: class `weight`, `ignore_index`, `reduction`.
pub fn nll_loss_with(input: &Tensor, target: &Tensor, options: NllLossOptions) -> Result<Tensor> {
    let _p = crate::profiler::op("nll_loss", &[input, target]);
    let NllLossOptions {
        weight,
        ignore_index,
        reduction,
    } = options;
    let input = &crate::amp::upper(input)?;
    let (x, t) = flatten_classes(input, target, "nll_loss")?;
    nll_rows(
        "nll_loss",
        Scores::LogProbs(&x),
        &t,
        weight.as_ref(),
        ignore_index,
        0.0,
        reduction,
        target.shape(),
    )
}
