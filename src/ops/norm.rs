//! Normalisation: batch_norm (training and eval) and layer_norm, written with tensor ops.

use crate::{Error, Result, Tensor};

/// torch.nn.functional.batch_norm over `[N, C, ...]`. In training the batch statistics normalise
/// the input and the running statistics (if given) are updated in place with `momentum`
/// (unbiased variance, as PyTorch); in eval the running statistics are used.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
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

/// torch.nn.functional.layer_norm over the trailing `normalized_shape` dims.
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
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
