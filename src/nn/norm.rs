//! BatchNorm1d/2d and LayerNorm layers.

use super::functional::{self as F, BatchNormFuncOptions, LayerNormFuncOptions};
use super::layers::forward_by_inherent;
use super::module::Forward;
use super::Module;
use crate::{DType, Device, Result, Tensor};

/// `BatchNorm1d`/`BatchNorm2d`'s keyword arguments (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    /// Added to the variance.
    pub eps: f64,
    /// Weight of each new batch statistic in the running averages; `None` is a cumulative
    /// (equal-weight) average over the batches seen.
    pub momentum: Option<f64>,
    /// Learn a per-channel scale and shift.
    pub affine: bool,
    /// Keep running statistics (used in eval mode); without them the batch statistics are
    /// used in both modes.
    pub track_running_stats: bool,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            eps: 1e-5,
            momentum: Some(0.1),
            affine: true,
            track_running_stats: true,
        }
    }
}

/// Batch normalisation over `[N, C, ...]` with running statistics (used in eval mode)
/// (torch.nn.BatchNorm2d; also [`BatchNorm1d`] for `[N, C]` or `[N, C, L]`).
///
/// ```
/// use wgtorch::nn::{BatchNorm2d, BatchNormOptions, ModuleExt};
/// use wgtorch::Device;
/// let bn = BatchNorm2d::new(3, &Device::Cpu)?;
/// let names: Vec<String> = bn.state_dict().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]);
/// let plain = BatchNorm2d::with_options(3, BatchNormOptions { affine: false, track_running_stats: false, ..Default::default() }, &Device::Cpu)?;
/// assert!(plain.state_dict().is_empty());
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct BatchNorm2d {
    /// Scale `[C]` (with `affine`).
    #[param]
    pub weight: Option<Tensor>,
    /// Shift `[C]` (with `affine`).
    #[param]
    pub bias: Option<Tensor>,
    /// Running mean `[C]` (with `track_running_stats`).
    #[buffer]
    pub running_mean: Option<Tensor>,
    /// Running variance `[C]` (with `track_running_stats`).
    #[buffer]
    pub running_var: Option<Tensor>,
    /// Batches seen in training (with `track_running_stats`).
    #[buffer]
    pub num_batches_tracked: Option<Tensor>,
    /// Running-statistics momentum (`None`: cumulative average).
    pub momentum: Option<f64>,
    /// Added to the variance.
    pub eps: f64,
    #[module(training)]
    training: bool,
}

/// The same layer for `[N, C]` or `[N, C, L]` inputs.
pub type BatchNorm1d = BatchNorm2d;

impl BatchNorm2d {
    /// A layer for `num_features` channels with PyTorch's defaults.
    pub fn new(num_features: usize, dev: &Device) -> Result<BatchNorm2d> {
        BatchNorm2d::with_options(num_features, BatchNormOptions::default(), dev)
    }
    /// A layer with keyword arguments.
    pub fn with_options(
        num_features: usize,
        options: BatchNormOptions,
        dev: &Device,
    ) -> Result<BatchNorm2d> {
        let c = num_features;
        let (weight, bias) = if options.affine {
            (
                Some(Tensor::ones([c], dev)?.requires_grad_(true)),
                Some(Tensor::zeros([c], dev)?.requires_grad_(true)),
            )
        } else {
            (None, None)
        };
        let (running_mean, running_var, num_batches_tracked) = if options.track_running_stats {
            (
                Some(Tensor::zeros([c], dev)?),
                Some(Tensor::ones([c], dev)?),
                Some(Tensor::full_dtype([], 0.0, DType::I32, dev)?),
            )
        } else {
            (None, None, None)
        };
        Ok(BatchNorm2d {
            weight,
            bias,
            running_mean,
            running_var,
            num_batches_tracked,
            momentum: options.momentum,
            eps: options.eps,
            training: true,
        })
    }
    /// Normalise `[N, C, ...]`: with the batch's statistics in training (updating the running
    /// ones) or without running statistics, else with the running ones.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut momentum = self.momentum.unwrap_or(0.0);
        if self.training {
            if let Some(nbt) = &self.num_batches_tracked {
                let _g = crate::no_grad();
                nbt.copy_(&nbt.add_scalar(1)?)?;
                if self.momentum.is_none() {
                    // Cumulative moving average: the new batch weighs 1/batches seen.
                    let n = nbt.item()?;
                    momentum = 1.0 / n;
                }
            }
        }
        let use_batch_stats = self.training || self.running_mean.is_none();
        F::batch_norm_with(
            x,
            self.running_mean.as_ref(),
            self.running_var.as_ref(),
            BatchNormFuncOptions {
                weight: self.weight.as_ref(),
                bias: self.bias.as_ref(),
                training: use_batch_stats,
                momentum,
                eps: self.eps,
            },
        )
    }
}

/// `LayerNorm`'s keyword arguments (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormOptions {
    /// Added to the variance.
    pub eps: f64,
    /// Learn an elementwise scale (and shift, with `bias`).
    pub elementwise_affine: bool,
    /// Learn the shift (with `elementwise_affine`).
    pub bias: bool,
}

impl Default for LayerNormOptions {
    fn default() -> Self {
        LayerNormOptions {
            eps: 1e-5,
            elementwise_affine: true,
            bias: true,
        }
    }
}

/// Layer normalisation over the trailing `normalized_shape` dims, with affine parameters
/// (torch.nn.LayerNorm).
///
/// ```
/// use wgtorch::nn::{LayerNorm, LayerNormOptions, ModuleExt};
/// use wgtorch::{Device, Tensor};
/// let ln = LayerNorm::with_options(&[4], LayerNormOptions { bias: false, ..Default::default() }, &Device::Cpu)?;
/// assert_eq!(ln.state_dict().len(), 1);
/// assert_eq!(ln.forward(&Tensor::randn([2, 4], &Device::Cpu)?)?.shape(), &[2, 4]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct LayerNorm {
    /// Scale (with `elementwise_affine`).
    #[param]
    pub weight: Option<Tensor>,
    /// Shift (with `elementwise_affine` and `bias`).
    #[param]
    pub bias: Option<Tensor>,
    /// Trailing shape normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance.
    pub eps: f64,
}

impl LayerNorm {
    /// A layer for inputs ending in `normalized_shape`, with PyTorch's defaults.
    pub fn new(normalized_shape: &[usize], dev: &Device) -> Result<LayerNorm> {
        LayerNorm::with_options(normalized_shape, LayerNormOptions::default(), dev)
    }
    /// A layer with keyword arguments.
    pub fn with_options(
        normalized_shape: &[usize],
        options: LayerNormOptions,
        dev: &Device,
    ) -> Result<LayerNorm> {
        let affine = options.elementwise_affine;
        Ok(LayerNorm {
            weight: if affine {
                Some(Tensor::ones(normalized_shape, dev)?.requires_grad_(true))
            } else {
                None
            },
            bias: if affine && options.bias {
                Some(Tensor::zeros(normalized_shape, dev)?.requires_grad_(true))
            } else {
                None
            },
            normalized_shape: normalized_shape.to_vec(),
            eps: options.eps,
        })
    }
    /// Normalise over the trailing dims.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::layer_norm_with(
            x,
            &self.normalized_shape,
            LayerNormFuncOptions {
                weight: self.weight.as_ref(),
                bias: self.bias.as_ref(),
                eps: self.eps,
            },
        )
    }
}

forward_by_inherent!(BatchNorm2d, LayerNorm);
