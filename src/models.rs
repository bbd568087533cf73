//! Reference models shared by the examples, the tests and the browser demo.

use crate::nn::{functional as F, Conv2d, Conv2dOptions, Linear, Module};
use crate::{Device, Result, Tensor};

/// The seed's SimpleCNN for `[N, 3, 32, 32]` inputs: conv 3→32 k3 p1, ReLU, max-pool 2, conv 32→64
/// k3 p1, ReLU, max-pool 2, flatten 4096, linear 4096→256, ReLU, linear 256→10. Parameter names
/// match PyTorch's (`conv1.weight`, ..., `fc2.bias`).
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
    /// Logits `[N, 10]` for images `[N, 3, 32, 32]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = F::max_pool2d(&self.conv1.forward(x)?.relu()?, 2)?;
        let x = F::max_pool2d(&self.conv2.forward(&x)?.relu()?, 2)?;
        let x = x.reshape([-1, 64 * 8 * 8])?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
}
