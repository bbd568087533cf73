//! Attention: `F::scaled_dot_product_attention` (PyTorch's math: masks, `is_causal`, dropout,
//! `scale`, grouped-query heads) and `nn::MultiheadAttention` with PyTorch's packed in-projection
//! (`in_proj_weight`, `in_proj_bias`, `out_proj.*`), so its state_dicts load.

use super::init;
use super::layers::{Dropout, Linear, LinearOptions};
use super::Module;
use crate::error::InOp;
use crate::{DType, Device, Error, Result, Tensor};

const SDPA: &str = "scaled_dot_product_attention";
const MHA: &str = "MultiheadAttention";

/// Keyword arguments of [`scaled_dot_product_attention_with`]; `Default` is PyTorch's.
#[derive(Clone, Copy, Debug, Default)]
pub struct SdpaOptions<'a> {
    /// Broadcast to `[..., L, S]`: a bool mask (`true` = may attend) or a float bias added to the
    /// scores.
    pub attn_mask: Option<&'a Tensor>,
    /// Dropout on the attention weights (applied whenever > 0, as in PyTorch).
    pub dropout_p: f64,
    /// Mask out keys after each query (`tril` of an `[L, S]` ones matrix); an error together with
    /// `attn_mask`, as in PyTorch.
    pub is_causal: bool,
    /// Score scale; `None` is `1 / sqrt(E)`.
    pub scale: Option<f64>,
    /// Grouped-query attention: key/value heads (dim -3) repeated to the query's head count.
    pub enable_gqa: bool,
}

/// `softmax(q kᵀ · scale + mask) v` over the last two dims, PyTorch's defaults (no mask, no
/// dropout, scale `1/√E`). `q` is `[..., L, E]`, `k` `[..., S, E]`, `v` `[..., S, Ev]`; leading
/// dims broadcast.
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let q = Tensor::randn([2, 4, 3, 8], &dev)?; // [batch, heads, L, E]
/// let kv = Tensor::randn([2, 4, 5, 8], &dev)?;
/// assert_eq!(F::scaled_dot_product_attention(&q, &kv, &kv)?.shape(), &[2, 4, 3, 8]);
/// let causal = F::SdpaOptions { is_causal: true, ..Default::default() };
/// let y = F::scaled_dot_product_attention_with(&q, &q, &q, causal)?;
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn scaled_dot_product_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    scaled_dot_product_attention_with(q, k, v, SdpaOptions::default())
}

/// [`scaled_dot_product_attention`] with PyTorch's keyword arguments. A row whose keys are all
/// masked gives zeros (PyTorch's math backend), not NaN.
pub fn scaled_dot_product_attention_with(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    o: SdpaOptions,
) -> Result<Tensor> {
    if q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 {
        return Err(Error::shape(
            SDPA,
            format!(
                "query, key and value must be at least 2-D, got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    let (qd, kd, vd) = (q.shape(), k.shape(), v.shape());
    if qd[qd.len() - 1] != kd[kd.len() - 1] || kd[kd.len() - 2] != vd[vd.len() - 2] {
        return Err(Error::shape(SDPA, format!("expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got {qd:?}, {kd:?} and {vd:?}")));
    }
    if !(0.0..=1.0).contains(&o.dropout_p) {
        return Err(Error::arg(
            SDPA,
            format!(
                "dropout probability has to be between 0 and 1, but got {}",
                o.dropout_p
            ),
        ));
    }
    let (l, s) = (qd[qd.len() - 2], kd[kd.len() - 2]);
    let bias = match (o.attn_mask, o.is_causal) {
        (Some(_), true) => {
            return Err(Error::arg(SDPA, "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"));
        }
        (None, true) => Some(bool_bias(&causal_keep(l, s, &q.device())?, q)?),
        (Some(m), false) if m.dtype() == DType::Bool => Some(bool_bias(m, q)?),
        (Some(m), false) if m.dtype().is_float() => Some(m.clone()),
        (Some(m), false) => {
            return Err(Error::arg(SDPA, format!("Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {:?} and  query.dtype: {:?} instead.", m.dtype(), q.dtype())));
        }
        (None, false) => None,
    };
    let (k, v) = if o.enable_gqa {
        (repeat_heads(k, q)?, repeat_heads(v, q)?)
    } else {
        (k.clone(), v.clone())
    };
    let scale = o.scale.unwrap_or(1.0 / (qd[qd.len() - 1] as f64).sqrt());
    Ok(attend(q, &k, &v, bias.as_ref(), scale, o.dropout_p, true)?.0)
}

/// `[l, s]` bool, true where key `j <= i` (what a causal query may see).
pub(super) fn causal_keep(l: usize, s: usize, dev: &Device) -> Result<Tensor> {
    let i = Tensor::arange_dtype(0.0, l as f64, 1.0, DType::I32, dev)?.unsqueeze(1)?;
    let j = Tensor::arange_dtype(0.0, s as f64, 1.0, DType::I32, dev)?.unsqueeze(0)?;
    j.le(&i)
}

/// A keep-mask as an additive bias of `like`'s dtype: 0 where kept, -inf elsewhere.
pub(super) fn bool_bias(keep: &Tensor, like: &Tensor) -> Result<Tensor> {
    Tensor::where_cond(
        keep,
        &like.scalar_like(0.0)?,
        &like.scalar_like(f64::NEG_INFINITY)?,
    )
}

/// Repeat the heads (dim -3) of `t` to `q`'s count, each head `q_heads / t_heads` times in a row.
fn repeat_heads(t: &Tensor, q: &Tensor) -> Result<Tensor> {
    if q.ndim() < 3 || t.ndim() < 3 {
        return Ok(t.clone());
    }
    let (hq, ht) = (q.shape()[q.ndim() - 3], t.shape()[t.ndim() - 3]);
    if hq == ht {
        return Ok(t.clone());
    }
    if ht == 0 || hq % ht != 0 {
        return Err(Error::shape(SDPA, format!("enable_gqa: the query's {hq} heads must be a multiple of the key's and value's {ht}")));
    }
    let mut shape = t.shape().to_vec();
    let d = t.ndim() - 3;
    let x = t.unsqueeze(d as isize + 1)?;
    let mut ex = x.shape().to_vec();
    ex[d + 1] = hq / ht;
    shape[d] = hq;
    x.expand(&ex)?.reshape(&shape)
}

/// The attention core: `(softmax(q kᵀ · scale + bias) v, weights)`. With `safe`, rows whose scores
/// are all -inf give zero weights (PyTorch's `_safe_softmax`) instead of NaN.
fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
    scale: f64,
    dropout_p: f64,
    safe: bool,
) -> Result<(Tensor, Tensor)> {
    let mut scores = q
        .matmul(&k.transpose(-2, -1)?)
        .in_op(SDPA)?
        .mul_scalar(scale)?;
    if let Some(b) = bias {
        let shape = crate::shape::broadcast_shapes(SDPA, b.shape(), scores.shape())?;
        if shape != scores.shape() {
            return Err(Error::shape(SDPA, format!("attn_mask of shape {:?} does not broadcast to the attention weights' shape {:?}", b.shape(), scores.shape())));
        }
        scores = scores.add(b)?;
    }
    let mut w = if safe && bias.is_some() {
        let dead = scores.amax([-1], true)?.eq_scalar(f64::NEG_INFINITY)?;
        let zero = scores.scalar_like(0.0)?;
        let w = Tensor::where_cond(&dead, &zero, &scores)?.softmax(-1)?;
        Tensor::where_cond(&dead, &zero, &w)?
    } else {
        scores.softmax(-1)?
    };
    if dropout_p > 0.0 {
        w = Dropout::new(dropout_p)?.forward(&w)?;
    }
    Ok((w.matmul(v).in_op(SDPA)?, w))
}

/// Keyword arguments of `nn.MultiheadAttention(embed_dim, num_heads, ...)`; `Default` is
/// PyTorch's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultiheadAttentionOptions {
    /// Dropout on the attention weights in training mode (default 0).
    pub dropout: f64,
    /// In- and out-projection biases (default true).
    pub bias: bool,
    /// Learned `bias_k` / `bias_v` appended to the keys and values (default false).
    pub add_bias_kv: bool,
    /// Append a zero key and value (after `bias_k` / `bias_v`) (default false).
    pub add_zero_attn: bool,
    /// Key features (default `embed_dim`); when kdim or vdim differ from it the projections are
    /// separate (`q_proj_weight`, `k_proj_weight`, `v_proj_weight`).
    pub kdim: Option<usize>,
    /// Value features (default `embed_dim`).
    pub vdim: Option<usize>,
    /// Inputs and output are `[batch, seq, feature]` (default false: `[seq, batch, feature]`).
    pub batch_first: bool,
}

impl Default for MultiheadAttentionOptions {
    fn default() -> Self {
        MultiheadAttentionOptions {
            dropout: 0.0,
            bias: true,
            add_bias_kv: false,
            add_zero_attn: false,
            kdim: None,
            vdim: None,
            batch_first: false,
        }
    }
}

/// Arguments of [`MultiheadAttention::forward`] after `query, key, value`; `Default` is PyTorch's.
#[derive(Clone, Copy, Debug)]
pub struct MhaArgs<'a> {
    /// `[batch, S]` (`[S]` unbatched): bool (`true` = ignore that key) or a float bias.
    pub key_padding_mask: Option<&'a Tensor>,
    /// Return the attention weights (default true).
    pub need_weights: bool,
    /// `[L, S]` or `[batch * num_heads, L, S]`: bool (`true` = may NOT attend) or a float bias.
    pub attn_mask: Option<&'a Tensor>,
    /// Average the returned weights over heads (default true), else `[batch, heads, L, S]`.
    pub average_attn_weights: bool,
    /// A hint that `attn_mask` is the causal mask (which must then be given, as in PyTorch).
    pub is_causal: bool,
}

impl Default for MhaArgs<'_> {
    fn default() -> Self {
        MhaArgs {
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

/// Multi-head attention (PyTorch's `nn.MultiheadAttention`): `in_proj_weight` `[3E, E]`
/// (xavier-uniform), `in_proj_bias` (zeros), `out_proj` (Linear, bias zeros).
///
/// ```
/// use wgtorch::nn::{MhaArgs, MultiheadAttention};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let mha = MultiheadAttention::new(8, 2, &dev)?;
/// let x = Tensor::randn([5, 3, 8], &dev)?; // [seq, batch, embed]
/// let (y, w) = mha.forward(&x, &x, &x, MhaArgs::default())?;
/// assert_eq!(y.shape(), &[5, 3, 8]);
/// assert_eq!(w.unwrap().shape(), &[3, 5, 5]); // averaged over heads
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct MultiheadAttention {
    /// `[3E, E]` when query, key and value have `embed_dim` features.
    #[param]
    pub in_proj_weight: Option<Tensor>,
    /// `[E, E]` (separate projections only).
    #[param]
    pub q_proj_weight: Option<Tensor>,
    /// `[E, kdim]` (separate projections only).
    #[param]
    pub k_proj_weight: Option<Tensor>,
    /// `[E, vdim]` (separate projections only).
    #[param]
    pub v_proj_weight: Option<Tensor>,
    /// `[3E]`.
    #[param]
    pub in_proj_bias: Option<Tensor>,
    /// `[1, 1, E]` (with `add_bias_kv`).
    #[param]
    pub bias_k: Option<Tensor>,
    /// `[1, 1, E]` (with `add_bias_kv`).
    #[param]
    pub bias_v: Option<Tensor>,
    /// The output projection.
    pub out_proj: Linear,
    /// `E`.
    pub embed_dim: usize,
    /// Heads (`E / num_heads` features each).
    pub num_heads: usize,
    /// The options it was built with.
    #[module(skip)]
    pub options: MultiheadAttentionOptions,
    #[module(training)]
    training: bool,
}

impl MultiheadAttention {
    /// `embed_dim` features split over `num_heads` heads, PyTorch's defaults.
    pub fn new(embed_dim: usize, num_heads: usize, dev: &Device) -> Result<MultiheadAttention> {
        MultiheadAttention::with_options(embed_dim, num_heads, Default::default(), dev)
    }

    /// Every option.
    pub fn with_options(
        embed_dim: usize,
        num_heads: usize,
        options: MultiheadAttentionOptions,
        dev: &Device,
    ) -> Result<MultiheadAttention> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::arg(MHA, format!("embed_dim must be divisible by num_heads (embed_dim {embed_dim}, num_heads {num_heads})")));
        }
        if !(0.0..=1.0).contains(&options.dropout) {
            return Err(Error::arg(
                MHA,
                format!(
                    "dropout probability has to be between 0 and 1, but got {}",
                    options.dropout
                ),
            ));
        }
        let e = embed_dim;
        let (kdim, vdim) = (options.kdim.unwrap_or(e), options.vdim.unwrap_or(e));
        let xavier = |shape: &[usize]| -> Result<Tensor> {
            crate::shape::checked_numel(MHA, shape)?;
            let t = Tensor::zeros(shape, dev)?;
            init::xavier_uniform_(&t, 1.0)?;
            Ok(t.requires_grad_(true))
        };
        let packed = kdim == e && vdim == e;
        let three_e = crate::shape::checked_mul(MHA, 3, e, &[e])?;
        let kv_bias = |_| -> Result<Tensor> {
            let t = Tensor::zeros([1, 1, e], dev)?;
            init::xavier_normal_(&t, 1.0)?;
            Ok(t.requires_grad_(true))
        };
        let out_proj = Linear::with_options(e, e, LinearOptions { bias: options.bias }, dev)?;
        if let Some(b) = &out_proj.bias {
            init::zeros_(b)?;
        }
        Ok(MultiheadAttention {
            in_proj_weight: packed.then(|| xavier(&[three_e, e])).transpose()?,
            q_proj_weight: (!packed).then(|| xavier(&[e, e])).transpose()?,
            k_proj_weight: (!packed).then(|| xavier(&[e, kdim])).transpose()?,
            v_proj_weight: (!packed).then(|| xavier(&[e, vdim])).transpose()?,
            in_proj_bias: options
                .bias
                .then(|| Ok::<_, Error>(Tensor::zeros([three_e], dev)?.requires_grad_(true)))
                .transpose()?,
            bias_k: options.add_bias_kv.then(|| kv_bias(0)).transpose()?,
            bias_v: options.add_bias_kv.then(|| kv_bias(1)).transpose()?,
            out_proj,
            embed_dim,
            num_heads,
            options,
            training: true,
        })
    }

    /// Attention of `query` `[L, N, E]` over `key` `[S, N, kdim]` / `value` `[S, N, vdim]`
    /// (`[N, L, E]` ... with `batch_first`; unbatched `[L, E]` ... too). Returns the output
    /// `[L, N, E]` and, with `need_weights`, the weights `[N, L, S]` (or `[N, heads, L, S]`).
    pub fn forward(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        args: MhaArgs,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let batched = query.ndim() == 3;
        if query.ndim() != 2 && query.ndim() != 3 {
            return Err(Error::shape(MHA, format!("query should be unbatched 2D or batched 3D tensor but received {}-D query tensor", query.ndim())));
        }
        if key.ndim() != query.ndim() || value.ndim() != query.ndim() {
            let kind = if batched {
                "batched (3-D)"
            } else {
                "unbatched (2-D)"
            };
            return Err(Error::shape(MHA, format!("For {kind} `query`, expected `key` and `value` to be {}-D but found {}-D and {}-D tensors respectively", query.ndim(), key.ndim(), value.ndim())));
        }
        let seq_first = |t: &Tensor| match (batched, self.options.batch_first) {
            (false, _) => t.unsqueeze(1),
            (true, true) => t.transpose(0, 1),
            (true, false) => Ok(t.clone()),
        };
        let (q, k, v) = if query.id() == key.id() && key.id() == value.id() {
            // Self-attention: one sequence-first copy of a batch-first input for the three
            // projections, each of which would otherwise copy the transposed view itself.
            let x = seq_first(query)?;
            let x = if x.is_contiguous() {
                x
            } else {
                x.contiguous()?
            };
            (x.clone(), x.clone(), x)
        } else {
            (seq_first(query)?, seq_first(key)?, seq_first(value)?)
        };
        let (l, n, e) = (q.shape()[0], q.shape()[1], q.shape()[2]);
        let (h, s) = (self.num_heads, k.shape()[0]);
        let (kdim, vdim) = (
            self.options.kdim.unwrap_or(self.embed_dim),
            self.options.vdim.unwrap_or(self.embed_dim),
        );
        if e != self.embed_dim {
            return Err(Error::shape(
                MHA,
                format!(
                    "was expecting embedding dimension of {}, but got {e}",
                    self.embed_dim
                ),
            ));
        }
        if k.shape()[..2] != v.shape()[..2]
            || k.shape()[1] != n
            || k.shape()[2] != kdim
            || v.shape()[2] != vdim
        {
            return Err(Error::shape(MHA, format!("key shape {:?} and value shape {:?} do not fit query shape {:?} (kdim {kdim}, vdim {vdim})", key.shape(), value.shape(), query.shape())));
        }
        // In-projection: slices of the packed weight, or the three separate ones.
        let part =
            |t: &Option<Tensor>, i: usize| t.as_ref().map(|t| t.narrow(0, i * e, e)).transpose();
        let w = |i: usize, sep: &Option<Tensor>| -> Result<Tensor> {
            match (part(&self.in_proj_weight, i)?, sep) {
                (Some(w), _) => Ok(w),
                (None, Some(w)) => Ok(w.clone()),
                (None, None) => Err(Error::arg(MHA, "missing in-projection weight")),
            }
        };
        let q = q.linear(
            &w(0, &self.q_proj_weight)?,
            part(&self.in_proj_bias, 0)?.as_ref(),
        )?;
        let mut k = k.linear(
            &w(1, &self.k_proj_weight)?,
            part(&self.in_proj_bias, 1)?.as_ref(),
        )?;
        let mut v = v.linear(
            &w(2, &self.v_proj_weight)?,
            part(&self.in_proj_bias, 2)?.as_ref(),
        )?;
        // Masks as float biases: attn_mask [1 or N*H, L, S], key_padding_mask [N, S].
        let mut attn = match args.attn_mask {
            None if args.is_causal => {
                return Err(Error::arg(MHA, "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method `generate_square_subsequent_mask` to create this mask."));
            }
            None => None,
            Some(_) if args.is_causal && args.key_padding_mask.is_none() && !args.need_weights => {
                Some(bool_bias(&causal_keep(l, s, &q.device())?, &q)?.unsqueeze(0)?)
            }
            Some(m) => Some(match m.ndim() {
                2 if m.shape() == [l, s] => float_mask(m, &q, "attn_mask")?.unsqueeze(0)?,
                3 if m.shape() == [n * h, l, s] => float_mask(m, &q, "attn_mask")?,
                2 | 3 => {
                    let want = if m.ndim() == 2 {
                        vec![l, s]
                    } else {
                        vec![n * h, l, s]
                    };
                    return Err(Error::shape(
                        MHA,
                        format!(
                            "The shape of the {}D attn_mask is {:?}, but should be {want:?}.",
                            m.ndim(),
                            m.shape()
                        ),
                    ));
                }
                d => {
                    return Err(Error::shape(
                        MHA,
                        format!("attn_mask's dimension {d} is not supported"),
                    ))
                }
            }),
        };
        let mut pad = match args.key_padding_mask {
            None => None,
            Some(m) => {
                let m = if batched { m.clone() } else { m.unsqueeze(0)? };
                if m.shape() != [n, s] {
                    return Err(Error::shape(
                        MHA,
                        format!(
                            "expecting key_padding_mask shape of {:?}, but got {:?}",
                            [n, s],
                            m.shape()
                        ),
                    ));
                }
                Some(float_mask(&m, &q, "key_padding_mask")?)
            }
        };
        // bias_k / bias_v, then a zero key and value: one more key, masks padded with 0 (kept).
        let zero_col = |m: Tensor| -> Result<Tensor> {
            let mut sh = m.shape().to_vec();
            if let Some(x) = sh.last_mut() {
                *x = 1;
            }
            let z = Tensor::zeros(&sh, &m.device())?.to_dtype(m.dtype())?;
            Tensor::cat(&[m, z], -1)
        };
        let zero_kv = Tensor::zeros([1, n, e], &k.device())?.to_dtype(k.dtype())?;
        let extra = [
            (self.bias_k.as_ref(), self.bias_v.as_ref()),
            self.options
                .add_zero_attn
                .then_some((&zero_kv, &zero_kv))
                .unzip(),
        ];
        let mut s = s;
        for (bk, bv) in extra {
            if let (Some(bk), Some(bv)) = (bk, bv) {
                k = Tensor::cat(&[k, bk.expand([1, n, e])?], 0)?;
                v = Tensor::cat(&[v, bv.expand([1, n, e])?], 0)?;
                attn = attn.map(zero_col).transpose()?;
                pad = pad.map(zero_col).transpose()?;
                s += 1;
            }
        }
        let hd = e / h;
        let pad = pad
            .map(|p| {
                p.reshape([n, 1, 1, s])?
                    .expand([n, h, 1, s])?
                    .reshape([n * h, 1, s])
            })
            .transpose()?;
        let bias = match (attn, pad) {
            (Some(a), Some(p)) => Some(a.add(&p)?),
            (a, p) => a.or(p),
        };
        let heads = |t: &Tensor, len: usize| t.reshape([len, n * h, hd])?.transpose(0, 1);
        let (q, k, v) = (heads(&q, l)?, heads(&k, s)?, heads(&v, s)?);
        let p = if self.training {
            self.options.dropout
        } else {
            0.0
        };
        let (o, wts) = attend(
            &q,
            &k,
            &v,
            bias.as_ref(),
            1.0 / (hd as f64).sqrt(),
            p,
            !args.need_weights,
        )?;
        let o = o.transpose(0, 1)?.reshape([l, n, e])?;
        let o = self.out_proj.forward(&o)?;
        let o = match (batched, self.options.batch_first) {
            (false, _) => o.squeeze_dim(1)?,
            (true, true) => o.transpose(0, 1)?,
            (true, false) => o,
        };
        if !args.need_weights {
            return Ok((o, None));
        }
        let mut wts = wts.reshape([n, h, l, s])?;
        if args.average_attn_weights {
            wts = wts.mean_dims([1], false)?;
        }
        if !batched {
            wts = wts.squeeze_dim(0)?;
        }
        Ok((o, Some(wts)))
    }
}

/// PyTorch's `_canonical_mask`: a bool mask (`true` = masked) becomes -inf/0 in `like`'s dtype;
/// a float mask is used as it is.
fn float_mask(m: &Tensor, like: &Tensor, what: &str) -> Result<Tensor> {
    match m.dtype() {
        DType::Bool => Tensor::where_cond(
            m,
            &like.scalar_like(f64::NEG_INFINITY)?,
            &like.scalar_like(0.0)?,
        ),
        d if d.is_float() => Ok(m.clone()),
        d => Err(Error::arg(
            MHA,
            format!("only bool and floating types of {what} are supported, got {d:?}"),
        )),
    }
}
