//! Functional forms of layers and losses, named as in `torch.nn.functional`, with PyTorch's
//! argument order: required arguments positional, keyword arguments in an options struct
//! (`xxx_with(.., XxxOptions { .., ..Default::default() })`).
//!
//! ```
//! use wgtorch::nn::functional as F;
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu;
//! let x = Tensor::ones([1, 1, 4, 4], &dev)?;
//! let w = Tensor::ones([2, 1, 3, 3], &dev)?;
//! let y = F::conv2d_with(&x, &w, None, F::Conv2dFuncOptions { padding: 1.into(), ..Default::default() })?;
//! let y = F::max_pool2d(&y.relu()?, 2)?.flatten(1, -1)?;
//! assert_eq!(y.shape(), &[1, 8]);
//! # Ok::<(), wgtorch::Error>(())
//! ```

pub use super::attention::{
    scaled_dot_product_attention, scaled_dot_product_attention_with, SdpaOptions,
};
use crate::{Error, Result, Tensor};

pub use crate::ops::{
    adaptive_avg_pool2d, avg_pool2d, avg_pool2d_with, batch_norm, batch_norm_with, conv2d,
    conv2d_with, layer_norm, layer_norm_with, max_pool2d, max_pool2d_with, AvgPool2dOptions,
    BatchNormFuncOptions, Conv2dFuncOptions, LayerNormFuncOptions, MaxPool2dOptions, Size2,
};
pub use crate::ops::{
    binary_cross_entropy, binary_cross_entropy_with, binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_with, cosine_similarity, cosine_similarity_with,
    cross_entropy, cross_entropy_with, huber_loss, huber_loss_with, kl_div, kl_div_with, l1_loss,
    l1_loss_with, margin_ranking_loss, margin_ranking_loss_with, mse_loss, mse_loss_with, nll_loss,
    nll_loss_with, smooth_l1_loss, smooth_l1_loss_with, BinaryCrossEntropyOptions,
    BinaryCrossEntropyWithLogitsOptions, CosineSimilarityOptions, CrossEntropyOptions,
    HuberLossOptions, KlDivOptions, L1LossOptions, MarginRankingLossOptions, MseLossOptions,
    NllLossOptions, Reduction, SmoothL1LossOptions,
};

/// `input @ weight^T + bias` (torch.nn.functional.linear): `weight` is
/// `[out_features, in_features]`, leading dims of `input` fold into rows.
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let y = F::linear(&Tensor::ones([2, 3], &dev)?, &Tensor::ones([4, 3], &dev)?, None)?;
/// assert_eq!(y.to_vec::<f32>()?, [3.0; 8]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    input.linear(weight, bias)
}

/// `embedding`'s keyword arguments (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbeddingFuncOptions {
    /// Lookups of this row (negative counts from the end) get no gradient.
    pub padding_idx: Option<isize>,
}

/// Rows of `weight` `[num_embeddings, embedding_dim]` picked by the integer `input`
/// (torch.nn.functional.embedding): the result is `input.shape() + [embedding_dim]`.
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let w = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], [3, 2], &dev)?;
/// let idx = Tensor::from_vec(vec![2i32, 0], [2], &dev)?;
/// assert_eq!(F::embedding(&idx, &w)?.to_vec::<f32>()?, [4.0, 5.0, 0.0, 1.0]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn embedding(input: &Tensor, weight: &Tensor) -> Result<Tensor> {
    input.embedding(weight)
}

/// [`embedding`] with its keyword arguments: lookups of `padding_idx` return that row but send
/// it no gradient, as PyTorch's.
pub fn embedding_with(
    input: &Tensor,
    weight: &Tensor,
    options: EmbeddingFuncOptions,
) -> Result<Tensor> {
    let out = input.embedding(weight)?;
    match options.padding_idx {
        None => Ok(out),
        Some(p) => {
            // The padding row, detached, where the index is padding: its values, without a
            // gradient into the row (a parameter's view: export and compile read it as such).
            let p = padding_index(p, weight.shape()[0])?;
            let is_pad = input.eq_scalar(p as i64)?.unsqueeze(-1)?;
            let row = weight.detach().select(0, p as i64)?;
            Tensor::where_cond(&is_pad, &row, &out)
        }
    }
}

/// `padding_idx` resolved against `num_embeddings` (PyTorch's check and message).
pub(crate) fn padding_index(p: isize, num_embeddings: usize) -> Result<usize> {
    let n = num_embeddings as isize;
    if p >= n || p < -n {
        return Err(Error::arg(
            "embedding",
            format!("Padding_idx must be within num_embeddings (padding_idx={p}, num_embeddings={num_embeddings})"),
        ));
    }
    Ok(if p < 0 { p + n } else { p } as usize)
}

/// Zero each element with probability `p` and scale the rest by `1/(1-p)` when `training`;
/// the input itself otherwise (torch.nn.functional.dropout). Masks come from the default
/// generator (seeded by `manual_seed`).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::ones([1000], &Device::Cpu)?;
/// let y = F::dropout(&x, 0.5, true)?.to_vec::<f32>()?;
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// assert_eq!(F::dropout(&x, 0.5, false)?.to_vec::<f32>()?, x.to_vec::<f32>()?);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn dropout(input: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    check_dropout_p(p)?;
    if !training || p == 0.0 {
        return Ok(input.clone());
    }
    if p == 1.0 {
        return input.mul_scalar(0.0);
    }
    let keep = 1.0 - p;
    let m: Vec<f32> = crate::with_default_generator(|g| {
        (0..input.numel())
            .map(|_| {
                if g.uniform() < keep {
                    (1.0 / keep) as f32
                } else {
                    0.0
                }
            })
            .collect()
    });
    let mask = Tensor::from_vec(m, input.shape(), &input.device())?.to_dtype(input.dtype())?;
    input.mul(&mask)
}

/// PyTorch's range check for a dropout probability.
pub(crate) fn check_dropout_p(p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::arg(
            "dropout",
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    Ok(())
}
