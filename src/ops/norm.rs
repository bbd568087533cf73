//! Normalisation: batch_norm (training and eval) and layer_norm, written with tensor ops.

use crate::{Error, Result, Tensor};

/// `batch_norm`'s keyword arguments (PyTorch's names and defaults: no affine weight or bias,
/// evaluation mode, momentum 0.1, eps 1e-5).
#[derive(Clone, Copy, Debug)]
pub struct BatchNormFuncOptions<'a> {
    /// Per-channel scale `[C]`.
    pub weight: Option<&'a Tensor>,
    /// Per-channel shift `[C]`.
    pub bias: Option<&'a Tensor>,
    /// Normalise with the batch statistics (and update the running ones) instead of the
    /// running statistics.
    pub training: bool,
    /// Weight of the new batch statistic in the running averages.
    pub momentum: f64,
    /// Added to the variance.
    pub eps: f64,
}

impl Default for BatchNormFuncOptions<'_> {
    fn default() -> Self {
        BatchNormFuncOptions {
            weight: None,
            bias: None,
            training: false,
            momentum: 0.1,
            eps: 1e-5,
        }
    }
}

/// torch.nn.functional.batch_norm over `[N, C, ...]`, in evaluation mode (normalise with the
/// running statistics); the keyword arguments go through [`batch_norm_with`].
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], [2, 2], &dev)?;
/// let (rm, rv) = (Tensor::zeros([2], &dev)?, Tensor::ones([2], &dev)?);
/// let opts = F::BatchNormFuncOptions { training: true, ..Default::default() };
/// let y = F::batch_norm_with(&x, Some(&rm), Some(&rv), opts)?;
/// assert!((y.to_vec::<f32>()?[0] + 1.0).abs() < 1e-4);
/// let rm = rm.to_vec::<f32>()?; // running mean updated with momentum 0.1
/// assert!((rm[0] - 0.3).abs() < 1e-6 && (rm[1] - 0.5).abs() < 1e-6);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
) -> Result<Tensor> {
    batch_norm_with(
        input,
        running_mean,
        running_var,
        BatchNormFuncOptions::default(),
    )
}

/// [`batch_norm`] with its keyword arguments. In training the batch statistics normalise the
/// input and the running statistics (if given) are updated in place with `momentum` (unbiased
/// variance, as PyTorch); in eval the running statistics are used.
pub fn batch_norm_with(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    options: BatchNormFuncOptions<'_>,
) -> Result<Tensor> {
    let BatchNormFuncOptions {
        weight,
        bias,
        training,
        momentum,
        eps,
    } = options;
    if input.ndim() < 2 {
        return Err(Error::shape(
            "batch_norm",
            format!(
                "expected at least 2-D input [N, C, ...], got {:?}",
                input.shape()
            ),
        ));
    }
    let input = &crate::amp::upper(input)?;
    let c = input.shape()[1];
    let mut bshape = vec![1usize; input.ndim()];
    bshape[1] = c;
    for (name, t) in [
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ] {
        if let Some(t) = t {
            if t.numel() != c {
                return Err(Error::shape(
                    "batch_norm",
                    format!("{name} should contain {c} elements not {}", t.numel()),
                ));
            }
        }
    }
    let dims: Vec<isize> = (0..input.ndim() as isize).filter(|&d| d != 1).collect();
    let (mean, var) = if training {
        let n = input.numel() / c.max(1);
        if n <= 1 {
            return Err(Error::arg(
                "batch_norm",
                format!(
                    "Expected more than 1 value per channel when training, got input size {:?}",
                    input.shape()
                ),
            ));
        }
        let mean = input.mean_dims(&dims, true)?;
        let var = input.sub(&mean)?.square()?.mean_dims(&dims, true)?;
        if let (Some(rm), Some(rv)) = (running_mean, running_var) {
            let _g = crate::no_grad();
            let unbiased = var.mul_scalar(n as f64 / (n as f64 - 1.0))?;
            let new_m = rm
                .mul_scalar(1.0 - momentum)?
                .add(&mean.reshape([c])?.mul_scalar(momentum)?)?;
            let new_v = rv
                .mul_scalar(1.0 - momentum)?
                .add(&unbiased.reshape([c])?.mul_scalar(momentum)?)?;
            rm.copy_(&new_m)?;
            rv.copy_(&new_v)?;
        }
        (mean, var)
    } else {
        match (running_mean, running_var) {
            (Some(m), Some(v)) => (m.reshape(&bshape)?, v.reshape(&bshape)?),
            _ => {
                return Err(Error::arg(
                    "batch_norm",
                    "running_mean and running_var must be defined in evaluation mode",
                ))
            }
        }
    };
    let mut y = input.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(&w.reshape(&bshape)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.reshape(&bshape)?)?;
    }
    Ok(y)
}

/// `layer_norm`'s keyword arguments (PyTorch's names and defaults: no weight or bias, eps
/// 1e-5).
#[derive(Clone, Copy, Debug)]
pub struct LayerNormFuncOptions<'a> {
    /// Elementwise scale, shaped `normalized_shape`.
    pub weight: Option<&'a Tensor>,
    /// Elementwise shift, shaped `normalized_shape`.
    pub bias: Option<&'a Tensor>,
    /// Added to the variance.
    pub eps: f64,
}

impl Default for LayerNormFuncOptions<'_> {
    fn default() -> Self {
        LayerNormFuncOptions {
            weight: None,
            bias: None,
            eps: 1e-5,
        }
    }
}

/// torch.nn.functional.layer_norm over the trailing `normalized_shape` dims; the keyword
/// arguments go through [`layer_norm_with`].
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], [1, 2], &Device::Cpu)?;
/// let y = F::layer_norm(&x, &[2])?.to_vec::<f32>()?;
/// assert!((y[0] + 1.0).abs() < 1e-4 && (y[1] - 1.0).abs() < 1e-4);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn layer_norm(input: &Tensor, normalized_shape: &[usize]) -> Result<Tensor> {
    layer_norm_with(input, normalized_shape, LayerNormFuncOptions::default())
}

/// [`layer_norm`] with its keyword arguments.
pub fn layer_norm_with(
    input: &Tensor,
    normalized_shape: &[usize],
    options: LayerNormFuncOptions<'_>,
) -> Result<Tensor> {
    let LayerNormFuncOptions { weight, bias, eps } = options;
    let input = &crate::amp::upper(input)?;
    let k = normalized_shape.len();
    if k == 0 || k > input.ndim() || input.shape()[input.ndim() - k..] != *normalized_shape {
        return Err(Error::shape("layer_norm", format!("Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size {:?}", normalized_shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "), input.shape())));
    }
    let dims: Vec<isize> = (input.ndim() - k..input.ndim())
        .map(|d| d as isize)
        .collect();
    let mean = input.mean_dims(&dims, true)?;
    let var = input.sub(&mean)?.square()?.mean_dims(&dims, true)?;
    let mut y = input.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(w)?;
    }
    if let Some(b) = bias {
        y = y.add(b)?;
    }
    Ok(y)
}
