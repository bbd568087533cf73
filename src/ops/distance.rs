//! Similarities between vectors: cosine_similarity.

use crate::shape::broadcast_shapes;
use crate::{Error, Result, Tensor};

/// Options of [`cosine_similarity_with`] (torch.nn.functional.cosine_similarity's keywords).
#[derive(Clone, Copy, Debug)]
pub struct CosineSimilarityOptions {
    /// The dim holding the vectors (default 1; negative counts from the end).
    pub dim: isize,
    /// Lower bound on each vector's norm (default 1e-8).
    pub eps: f64,
}

impl Default for CosineSimilarityOptions {
    fn default() -> Self {
        CosineSimilarityOptions { dim: 1, eps: 1e-8 }
    }
}

/// Cosine similarity along dim 1 of `x1` and `x2` (broadcast together)
/// (torch.nn.functional.cosine_similarity with its defaults).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let a = Tensor::from_slice(&[1.0f32, 0.0, 1.0, 1.0], [2, 2], &Device::Cpu)?;
/// let b = Tensor::from_slice(&[0.0f32, 2.0, 2.0, 2.0], [2, 2], &Device::Cpu)?;
/// let s = F::cosine_similarity(&a, &b)?.to_vec::<f32>()?;
/// assert!(s[0].abs() < 1e-7 && (s[1] - 1.0).abs() < 1e-6);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
    cosine_similarity_with(x1, x2, CosineSimilarityOptions::default())
}

/// [`cosine_similarity`] with PyTorch's keywords (`dim`, `eps`). As PyTorch computes it: each
/// input divided by its norm clamped to `eps`, then the dot product; the clamp is not
/// differentiated (PyTorch applies it in place under no_grad), and a zero vector's norm has a
/// zero gradient.
pub fn cosine_similarity_with(
    x1: &Tensor,
    x2: &Tensor,
    o: CosineSimilarityOptions,
) -> Result<Tensor> {
    let op = "cosine_similarity";
    x1.same_device(op, x2)?;
    let shape = broadcast_shapes(op, x1.shape(), x2.shape())?;
    let nd = shape.len() as isize;
    if !(-nd.max(1)..nd.max(1)).contains(&o.dim) {
        return Err(Error::arg(
            op,
            format!(
                "Dimension out of range (expected to be in range of [{}, {}], but got {})",
                -nd.max(1),
                nd.max(1) - 1,
                o.dim
            ),
        ));
    }
    let (a, b) = (
        crate::amp::upper(x1)?.expand(&shape)?,
        crate::amp::upper(x2)?.expand(&shape)?,
    );
    let unit = |x: &Tensor| -> Result<Tensor> {
        let sq = x.square()?.sum_dims([o.dim], true)?;
        let zero = sq.eq_scalar(0.0)?;
        let safe = Tensor::where_cond(&zero, &sq.ones_like()?, &sq)?.sqrt()?;
        let n = Tensor::where_cond(&zero, &sq.zeros_like()?, &safe)?;
        // The clamp's value without its gradient: n + (max(n, eps) - n), the bracket detached.
        let nd = n.detach();
        let n = n.add(&nd.clamp(Some(o.eps), None)?.sub(&nd)?)?;
        x.div(&n)
    };
    unit(&a)?.mul(&unit(&b)?)?.sum_dims([o.dim], false)
}
