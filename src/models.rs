//! Reference models shared by the examples, the tests and the browser demo (torchvision's
//! `models`, on a small scale). Each is an ordinary `#[derive(Module)]` struct with PyTorch's
//! parameter names, so its state_dicts load into and from the same PyTorch model.
//!
//! ```
//! use wgtorch::models::SimpleCnn;
//! use wgtorch::nn::ModuleExt;
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu;
//! let model = SimpleCnn::new(&dev)?;
//! let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names[0], "conv1.weight");
//! assert_eq!(names[7], "fc2.bias");
//! let conv = (32 * 3 * 9 + 32) + (64 * 32 * 9 + 64);
//! assert_eq!(model.num_parameters(), conv + (4096 * 256 + 256) + (256 * 10 + 10));
//! let logits = model.forward(&Tensor::zeros([2, 3, 32, 32], &dev)?)?;
//! assert_eq!(logits.shape(), &[2, 10]);
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::nn::{functional as F, Conv2d, Conv2dOptions, Linear, Module};
use crate::{Device, Result, Tensor};

/// The seed's SimpleCNN for `[N, 3, 32, 32]` inputs: conv 3→32 k3 p1, ReLU, max-pool 2, conv 32→64
/// k3 p1, ReLU, max-pool 2, flatten 4096, linear 4096→256, ReLU, linear 256→10. Parameter names
/// match PyTorch's (`conv1.weight`, ..., `fc2.bias`). It implements [`crate::nn::Forward`], so
/// it also goes into a `Sequential`.
///
/// ```
/// use std::sync::Arc;
/// use wgtorch::data::{DataLoader, Digits};
/// use wgtorch::models::SimpleCnn;
/// use wgtorch::nn::{functional as F, ModuleExt};
/// use wgtorch::optim::{Adam, Optimizer};
/// use wgtorch::Device;
/// let dev = Device::Cpu;
/// wgtorch::manual_seed(0);
/// let model = SimpleCnn::new(&dev)?;
/// let mut opt = Adam::new(model.parameters(), 1e-3)?;
/// let loader = DataLoader::new(Arc::new(Digits::load()?), 8, &dev)?;
/// let (x, y) = loader.epoch(0).next().unwrap()?; // one batch of 8 digits, [8, 3, 32, 32]
/// let mut losses = Vec::new();
/// for _ in 0..3 {
///     opt.zero_grad();
///     let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
///     losses.push(loss.item()?);
///     loss.backward()?;
///     opt.step()?;
/// }
/// assert!(losses[2] < losses[0], "{losses:?}");
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
#[module(forward)]
pub struct SimpleCnn {
    /// First convolution.
    pub conv1: Conv2d,
    /// Second convolution.
    pub conv2: Conv2d,
    /// Hidden fully-connected layer.
    pub fc1: Linear,
    /// Classifier.
    pub fc2: Linear,
}

impl SimpleCnn {
    /// A freshly initialised model on `dev` (PyTorch's default initialisation).
    pub fn new(dev: &Device) -> Result<SimpleCnn> {
        let pad1 = Conv2dOptions {
            padding: 1.into(),
            ..Default::default()
        };
        Ok(SimpleCnn {
            conv1: Conv2d::with_options(3, 32, 3, pad1, dev)?,
            conv2: Conv2d::with_options(32, 64, 3, pad1, dev)?,
            fc1: Linear::new(64 * 8 * 8, 256, dev)?,
            fc2: Linear::new(256, 10, dev)?,
        })
    }
    /// Logits `[N, 10]` for images `[N, 3, 32, 32]` on the model's device, f32 (or half under
    /// [`crate::amp::autocast`]). Only 32×32 images fit: the flatten is `reshape([-1, 4096])`,
    /// as PyTorch's `view(-1, 64 * 8 * 8)`, so other sizes are a shape error, or, when their
    /// features are a multiple of 4096 (e.g. 64×64), a wrong batch dimension.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = F::max_pool2d(&self.conv1.forward(x)?.relu()?, 2)?;
        let x = F::max_pool2d(&self.conv2.forward(&x)?.relu()?, 2)?;
        let x = x.reshape([-1, 64 * 8 * 8])?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
}
