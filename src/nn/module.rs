//! The `Module` trait: forward, parameters and buffers with hierarchical names, train/eval,
//! state_dict and device moves.

use crate::{DType, Device, Error, Result, Tensor};
use std::collections::HashMap;

/// Whether a named tensor is a trainable parameter or a buffer (running statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Trained by optimizers.
    Param,
    /// State saved in the state_dict but not trained.
    Buffer,
}

/// A layer or model. Implement `forward` and the two visitors (list each parameter and buffer,
/// and each child with [`crate::visit_children!`]); everything else comes from [`ModuleExt`].
///
/// ```
/// use wgtorch::nn::{Linear, Module, ModuleExt};
/// use wgtorch::{Device, Tensor};
/// let fc = Linear::new(4, 2, true, &Device::Cpu)?;
/// let names: Vec<String> = fc.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// assert_eq!(fc.forward(&Tensor::zeros([3, 4], &Device::Cpu)?)?.shape(), &[3, 2]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub trait Module: Send + Sync {
    /// The layer's computation.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    /// Call `f` for every parameter and buffer, named relative to this module.
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind));
    /// Like `visit`, with the slots mutable (device moves, loading).
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind));
    /// Switch training mode (dropout, batch statistics); containers pass it to children.
    fn set_training(&mut self, _on: bool) {}
}

/// Visit named children from a `visit`/`visit_mut` implementation:
/// `visit_children!(f; self.conv1 => "conv1", self.fc => "fc")`.
#[macro_export]
macro_rules! visit_children {
    ($method:ident, $f:expr; $($child:expr => $name:expr),* $(,)?) => {{
        $(
            $child.$method(&mut |n, t, k| ($f)(&format!("{}.{}", $name, n), t, k));
        )*
    }};
}

/// What `load_state_dict` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Names the module has but the state_dict lacks.
    pub missing_keys: Vec<String>,
    /// Names in the state_dict the module does not have.
    pub unexpected_keys: Vec<String>,
}

/// Methods every module gets.
pub trait ModuleExt: Module {
    /// Parameters with hierarchical names (`features.0.weight`).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        self.visit(&mut |n, t, k| {
            if k == Kind::Param {
                v.push((n.to_string(), t.clone()))
            }
        });
        v
    }
    /// Parameters (handles sharing the module's tensors).
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    /// Buffers with names.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        self.visit(&mut |n, t, k| {
            if k == Kind::Buffer {
                v.push((n.to_string(), t.clone()))
            }
        });
        v
    }
    /// Parameters and buffers, PyTorch's state_dict order.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        self.visit(&mut |n, t, _| v.push((n.to_string(), t.clone())));
        v
    }
    /// Number of trainable scalars.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.numel()).sum()
    }
    /// Clear every parameter's gradient.
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
        }
    }
    /// Training mode.
    fn train(&mut self) {
        self.set_training(true)
    }
    /// Evaluation mode.
    fn eval(&mut self) {
        self.set_training(false)
    }
    /// Copy values from `state` into the module's tensors (converted to each tensor's device and
    /// dtype). With `strict`, missing or unexpected keys are an error; shape mismatches always are.
    fn load_state_dict(&mut self, state: &[(String, Tensor)], strict: bool) -> Result<LoadReport> {
        let map: HashMap<&str, &Tensor> = state.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut report = LoadReport::default();
        let mut seen = std::collections::HashSet::new();
        let mut mismatch = Vec::new();
        self.visit(&mut |n, t, _| match map.get(n) {
            Some(src) => {
                seen.insert(n.to_string());
                if src.shape() != t.shape() {
                    mismatch.push(format!("size mismatch for {n}: copying a param with shape {:?} from checkpoint, the shape in current model is {:?}.", src.shape(), t.shape()));
                }
            }
            None => report.missing_keys.push(n.to_string()),
        });
        report.unexpected_keys = state
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| !seen.contains(k))
            .collect();
        if !mismatch.is_empty()
            || (strict && (!report.missing_keys.is_empty() || !report.unexpected_keys.is_empty()))
        {
            let mut msg = String::from("Error(s) in loading state_dict:");
            if strict && !report.missing_keys.is_empty() {
                msg += &format!(
                    " Missing key(s) in state_dict: {}.",
                    report
                        .missing_keys
                        .iter()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            if strict && !report.unexpected_keys.is_empty() {
                msg += &format!(
                    " Unexpected key(s) in state_dict: {}.",
                    report
                        .unexpected_keys
                        .iter()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            for m in mismatch {
                msg += " ";
                msg += &m;
            }
            return Err(Error::arg("load_state_dict", msg));
        }
        let _g = crate::no_grad();
        let mut err = None;
        self.visit(&mut |n, t, _| {
            if let Some(src) = map.get(n) {
                if let Err(e) = t.copy_(src) {
                    err.get_or_insert(e);
                }
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
    /// Move every parameter and buffer to `device` (create optimizers afterwards, as in PyTorch).
    fn to_device(&mut self, device: &Device) -> Result<()> {
        self.convert(&|t| t.to(device))
    }
    /// Convert floating-point parameters and buffers to `dtype` (e.g. F16 for inference).
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        self.convert(&|t| {
            if t.dtype().is_float() {
                t.to_dtype(dtype)
            } else {
                Ok(t.clone())
            }
        })
    }
    #[doc(hidden)]
    fn convert(&mut self, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<()> {
        let _g = crate::no_grad();
        let mut err = None;
        self.visit_mut(&mut |_, t, k| match f(t) {
            Ok(n) => {
                let n = n.detach();
                *t = if k == Kind::Param {
                    n.requires_grad_(true)
                } else {
                    n
                };
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        });
        err.map_or(Ok(()), Err)
    }
}

impl<M: Module + ?Sized> ModuleExt for M {}

impl Module for Box<dyn Module> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        (**self).visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        (**self).visit_mut(f)
    }
    fn set_training(&mut self, on: bool) {
        (**self).set_training(on)
    }
}
