//! BatchNorm1d/2d and LayerNorm layers.

use super::module::{Kind, Module};
use crate::{DType, Device, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// Batch normalisation over `[N, C, ...]` with running statistics (used in eval mode).
pub struct BatchNorm2d {
    /// Scale `[C]`.
    pub weight: Tensor,
    /// Shift `[C]`.
    pub bias: Tensor,
    /// Running mean `[C]` (buffer).
    pub running_mean: Tensor,
    /// Running variance `[C]` (buffer).
    pub running_var: Tensor,
    /// Batches seen in training (buffer, as in PyTorch's state_dict).
    pub num_batches_tracked: Tensor,
    /// Running-statistics momentum (PyTorch default 0.1).
    pub momentum: f64,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
    training: AtomicBool,
}

/// The same layer for `[N, C]` or `[N, C, L]` inputs.
pub type BatchNorm1d = BatchNorm2d;

impl BatchNorm2d {
    /// A layer for `c` channels.
    pub fn new(c: usize, dev: &Device) -> Result<BatchNorm2d> {
        Ok(BatchNorm2d {
            weight: Tensor::ones([c], dev)?.requires_grad_(true),
            bias: Tensor::zeros([c], dev)?.requires_grad_(true),
            running_mean: Tensor::zeros([c], dev)?,
            running_var: Tensor::ones([c], dev)?,
            num_batches_tracked: Tensor::full_dtype([], 0.0, DType::I32, dev)?,
            momentum: 0.1,
            eps: 1e-5,
            training: AtomicBool::new(true),
        })
    }
}

impl Module for BatchNorm2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let training = self.training.load(Ordering::Relaxed);
        if training {
            let _g = crate::no_grad();
            self.num_batches_tracked
                .copy_(&self.num_batches_tracked.add_scalar(1)?)?;
        }
        crate::ops::batch_norm(
            x,
            Some(&self.running_mean),
            Some(&self.running_var),
            Some(&self.weight),
            Some(&self.bias),
            training,
            self.momentum,
            self.eps,
        )
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("weight", &self.weight, Kind::Param);
        f("bias", &self.bias, Kind::Param);
        f("running_mean", &self.running_mean, Kind::Buffer);
        f("running_var", &self.running_var, Kind::Buffer);
        f(
            "num_batches_tracked",
            &self.num_batches_tracked,
            Kind::Buffer,
        );
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("weight", &mut self.weight, Kind::Param);
        f("bias", &mut self.bias, Kind::Param);
        f("running_mean", &mut self.running_mean, Kind::Buffer);
        f("running_var", &mut self.running_var, Kind::Buffer);
        f(
            "num_batches_tracked",
            &mut self.num_batches_tracked,
            Kind::Buffer,
        );
    }
    fn set_training(&mut self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
    }
}

/// Layer normalisation over the trailing `normalized_shape` dims, with affine parameters.
pub struct LayerNorm {
    /// Scale.
    pub weight: Tensor,
    /// Shift.
    pub bias: Tensor,
    /// Trailing shape normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
}

impl LayerNorm {
    /// A layer for inputs ending in `normalized_shape`.
    pub fn new(normalized_shape: &[usize], dev: &Device) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: Tensor::ones(normalized_shape, dev)?.requires_grad_(true),
            bias: Tensor::zeros(normalized_shape, dev)?.requires_grad_(true),
            normalized_shape: normalized_shape.to_vec(),
            eps: 1e-5,
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::ops::layer_norm(
            x,
            &self.normalized_shape,
            Some(&self.weight),
            Some(&self.bias),
            self.eps,
        )
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("weight", &self.weight, Kind::Param);
        f("bias", &self.bias, Kind::Param);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("weight", &mut self.weight, Kind::Param);
        f("bias", &mut self.bias, Kind::Param);
    }
}
