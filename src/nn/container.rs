//! Containers: Sequential, ModuleList and ModuleDict (PyTorch's naming: `0`, `1`, ... and the
//! dict's keys, in insertion order).

use super::module::{Forward, Kind, Module};
use crate::{Error, Result, Tensor};

/// Implement [`Module`] for a container whose children are the `(name, module)` pairs that
/// `$iter` / `$iter_mut` yield (the container itself holds no tensors).
macro_rules! container_module {
    ($t:ty, |$s:ident| $iter:expr, |$m:ident| $iter_mut:expr) => {
        impl Module for $t {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
                let $s = self;
                for (n, m) in $iter {
                    super::module::visit_child(m, &n, f)
                }
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
                let $m = self;
                for (n, m) in $iter_mut {
                    super::module::visit_child_mut(m, &n, f)
                }
            }
            fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
                let $s = self;
                for (n, m) in $iter {
                    m.visit_as_child(&n, f)
                }
            }
            fn visit_children_mut<'a>(&'a mut self, f: &mut dyn FnMut(&str, &'a mut dyn Module)) {
                let $m = self;
                for (n, m) in $iter_mut {
                    m.visit_as_child_mut(&n, f)
                }
            }
            fn set_training(&mut self, on: bool) {
                let $m = self;
                for (_, m) in $iter_mut {
                    m.set_training(on)
                }
            }
        }
    };
}

/// Layers applied in order (torch.nn.Sequential); children named `0`, `1`, ... as in PyTorch.
///
/// ```
/// use wgtorch::nn::{Linear, ModuleExt, ReLU, Sequential};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let net = Sequential::new().append(Linear::new(4, 8, &dev)?).append(ReLU::new()).append(Linear::new(8, 2, &dev)?);
/// assert_eq!(net.named_parameters()[2].0, "2.weight");
/// assert_eq!(net.forward(&Tensor::zeros([3, 4], &dev)?)?.shape(), &[3, 2]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential {
    /// The layers.
    pub layers: Vec<Box<dyn Forward>>,
}

impl Sequential {
    /// Empty.
    pub fn new() -> Sequential {
        Sequential::default()
    }
    /// Append a layer (builder style).
    pub fn append(mut self, m: impl Forward) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }
    /// Append a layer in place.
    pub fn push(&mut self, m: impl Forward) {
        self.layers.push(Box::new(m));
    }
    /// Number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }
    /// Whether it has no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
    /// Run the layers in order.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for l in &self.layers {
            y = l.forward(&y)?;
        }
        Ok(y)
    }
}

container_module!(
    Sequential,
    |s| s.layers.iter().enumerate().map(|(i, m)| (i.to_string(), m)),
    |s| s
        .layers
        .iter_mut()
        .enumerate()
        .map(|(i, m)| (i.to_string(), m))
);
super::layers::forward_by_inherent!(Sequential);

/// A list of modules that the owner calls itself (torch.nn.ModuleList); children named `0`,
/// `1`, ... A `Vec<M>` field of one module type does the same without boxing.
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
    pub fn append(mut self, m: impl Module) -> ModuleList {
        self.modules.push(Box::new(m));
        self
    }
    /// Append in place.
    pub fn push(&mut self, m: impl Module) {
        self.modules.push(Box::new(m));
    }
    /// Number of modules.
    pub fn len(&self) -> usize {
        self.modules.len()
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
    /// The modules in order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Module> {
        self.modules.iter().map(|m| m.as_dyn())
    }
}

container_module!(
    ModuleList,
    |s| s
        .modules
        .iter()
        .enumerate()
        .map(|(i, m)| (i.to_string(), m)),
    |s| s
        .modules
        .iter_mut()
        .enumerate()
        .map(|(i, m)| (i.to_string(), m))
);

/// Modules under string keys, in insertion order (torch.nn.ModuleDict): children named by
/// their keys. Inserting an existing key replaces that module in place (keeping its position),
/// as PyTorch's.
///
/// ```
/// use wgtorch::nn::{Linear, ModuleDict, ModuleExt, ReLU};
/// use wgtorch::Device;
/// let dev = Device::Cpu;
/// let mut heads = ModuleDict::new();
/// heads.insert("policy", Linear::new(4, 2, &dev)?)?;
/// heads.insert("act", ReLU::new())?;
/// heads.insert("value", Linear::new(4, 1, &dev)?)?;
/// assert_eq!(heads.keys().collect::<Vec<_>>(), ["policy", "act", "value"]);
/// assert_eq!(heads.named_parameters()[2].0, "value.weight");
/// assert!(heads.get("value").unwrap().downcast_ref::<Linear>().is_some());
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Default)]
pub struct ModuleDict {
    entries: Vec<(String, Box<dyn Module>)>,
}

impl ModuleDict {
    /// Empty.
    pub fn new() -> ModuleDict {
        ModuleDict::default()
    }
    /// Add `module` under `key` (replacing, in place, a module already there). A key must be a
    /// non-empty name without `.`, as PyTorch's.
    pub fn insert(&mut self, key: impl Into<String>, module: impl Module) -> Result<()> {
        let key = key.into();
        if key.is_empty() || key.contains('.') {
            return Err(Error::arg(
                "ModuleDict",
                format!("module name can't contain \".\" or be empty, got: \"{key}\""),
            ));
        }
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, m)) => *m = Box::new(module),
            None => self.entries.push((key, Box::new(module))),
        }
        Ok(())
    }
    /// The module under `key`.
    pub fn get(&self, key: &str) -> Option<&dyn Module> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, m)| m.as_dyn())
    }
    /// The module under `key`, mutable.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut dyn Module> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, m)| m.as_dyn_mut())
    }
    /// Remove and return the module under `key`.
    pub fn remove(&mut self, key: &str) -> Option<Box<dyn Module>> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }
    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }
    /// The keys in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }
    /// `(key, module)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &dyn Module)> {
        self.entries.iter().map(|(k, m)| (k.as_str(), m.as_dyn()))
    }
    /// Number of modules.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

container_module!(
    ModuleDict,
    |s| s.entries.iter().map(|(k, m)| (k.clone(), m)),
    |s| s.entries.iter_mut().map(|(k, m)| (k.clone(), m))
);
