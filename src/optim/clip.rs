//! Gradient clipping, computed on the device without reading gradients back.

use crate::{Result, Tensor};
use std::collections::HashSet;

/// Scale all gradients so that their joint `norm_type`-norm is at most `max_norm`; returns the
/// total norm before clipping (a 0-d tensor on the gradients' device). A tensor listed more than
/// once (the same [`Tensor::id`], e.g. tied weights gathered from two modules) is counted and
/// scaled once.
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Option<Tensor>> {
    let _g = crate::no_grad();
    let mut seen = HashSet::new();
    let grads: Vec<Tensor> = params
        .iter()
        .filter(|p| seen.insert(p.id()))
        .filter_map(|p| p.grad())
        .collect();
    let mut total: Option<Tensor> = None;
    for g in &grads {
        let n = if norm_type.is_infinite() {
            g.abs()?.amax([], false)?
        } else {
            g.abs()?.pow_scalar(norm_type)?.sum_all()?
        };
        total = Some(match total {
            None => n,
            Some(t) if norm_type.is_infinite() => t.maximum(&n)?,
            Some(t) => t.add(&n)?,
        });
    }
    let Some(total) = total else {
        return Ok(None);
    };
    let total = if norm_type.is_infinite() {
        total
    } else {
        total.pow_scalar(1.0 / norm_type)?
    };
    let coef = total
        .add_scalar(1e-6)?
        .reciprocal()?
        .mul_scalar(max_norm)?
        .clamp(None, Some(1.0))?;
    for g in &grads {
        g.mul_(&coef)?;
    }
    Ok(Some(total))
}

/// Clamp every gradient element to `[-clip, clip]`.
pub fn clip_grad_value_(params: &[Tensor], clip: f64) -> Result<()> {
    let _g = crate::no_grad();
    for p in params {
        if let Some(g) = p.grad() {
            g.clamp_(Some(-clip), Some(clip))?;
        }
    }
    Ok(())
}
