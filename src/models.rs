//! Reference models shared by the examples, the tests and the browser demo.

use crate::nn::{Conv2d, Kind, Linear, Module};
use crate::{visit_children, Device, Result, Tensor};

/// The seed's SimpleCNN for `[N, 3, 32, 32]` inputs: conv 3→32 k3 p1, ReLU, max-pool 2, conv 32→64
/// k3 p1, ReLU, max-pool 2, flatten 4096, linear 4096→256, ReLU, linear 256→10. Parameter names
/// match PyTorch's (`conv1.weight`, ..., `fc2.bias`).
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
        Ok(SimpleCnn {
            conv1: Conv2d::new(3, 32, 3, 1, dev)?,
            conv2: Conv2d::new(32, 64, 3, 1, dev)?,
            fc1: Linear::new(64 * 8 * 8, 256, true, dev)?,
            fc2: Linear::new(256, 10, true, dev)?,
        })
    }
}

impl Module for SimpleCnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let pool = |t: &Tensor| crate::ops::max_pool2d(t, [2, 2], [2, 2], [0, 0]);
        let x = pool(&self.conv1.forward(x)?.relu()?)?;
        let x = pool(&self.conv2.forward(&x)?.relu()?)?;
        let x = x.reshape([-1, 64 * 8 * 8])?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        visit_children!(visit, f; self.conv1 => "conv1", self.conv2 => "conv2", self.fc1 => "fc1", self.fc2 => "fc2");
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        visit_children!(visit_mut, f; self.conv1 => "conv1", self.conv2 => "conv2", self.fc1 => "fc1", self.fc2 => "fc2");
    }
}
