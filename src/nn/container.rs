//! Sequential and ModuleList.

use super::module::{Kind, Module};
use crate::{Error, Result, Tensor};

/// Children applied in order; named `0`, `1`, ... as in PyTorch.
///
/// ```
/// use wgtorch::nn::{Linear, ModuleExt, ReLU, Sequential};
/// use wgtorch::Device;
/// let dev = Device::Cpu;
/// let net = Sequential::new().append(Linear::new(4, 8, true, &dev)?).append(ReLU {}).append(Linear::new(8, 2, true, &dev)?);
/// assert_eq!(net.named_parameters()[2].0, "2.weight");
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential {
    /// The layers.
    pub layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    /// Empty.
    pub fn new() -> Sequential {
        Sequential::default()
    }
    /// Append a layer (builder style).
    pub fn append(mut self, m: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }
}

fn visit_list(layers: &[Box<dyn Module>], f: &mut dyn FnMut(&str, &Tensor, Kind)) {
    for (i, l) in layers.iter().enumerate() {
        l.visit(&mut |n, t, k| f(&format!("{i}.{n}"), t, k));
    }
}
fn visit_list_mut(layers: &mut [Box<dyn Module>], f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
    for (i, l) in layers.iter_mut().enumerate() {
        l.visit_mut(&mut |n, t, k| f(&format!("{i}.{n}"), t, k));
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for l in &self.layers {
            y = l.forward(&y)?;
        }
        Ok(y)
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        visit_list(&self.layers, f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        visit_list_mut(&mut self.layers, f)
    }
    fn set_training(&mut self, on: bool) {
        self.layers.iter_mut().for_each(|l| l.set_training(on));
    }
}

/// A list of modules that the owner calls itself (it has no forward of its own).
#[derive(Default)]
pub struct ModuleList {
    /// The modules.
    pub modules: Vec<Box<dyn Module>>,
}

impl ModuleList {
    /// Empty.
    pub fn new() -> ModuleList {
        ModuleList::default()
    }
    /// Append (builder style).
    pub fn append(mut self, m: impl Module + 'static) -> ModuleList {
        self.modules.push(Box::new(m));
        self
    }
}

impl Module for ModuleList {
    fn forward(&self, _x: &Tensor) -> Result<Tensor> {
        Err(Error::arg(
            "ModuleList",
            "ModuleList has no forward(); call its modules",
        ))
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        visit_list(&self.modules, f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        visit_list_mut(&mut self.modules, f)
    }
    fn set_training(&mut self, on: bool) {
        self.modules.iter_mut().for_each(|l| l.set_training(on));
    }
}
