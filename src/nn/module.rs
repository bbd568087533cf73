//! The `Module` trait: forward, parameters and buffers with hierarchical names, train/eval,
//! state_dict and device moves.

use crate::{DType, Device, Error, Result, Tensor};
use std::collections::{HashMap, HashSet};

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
    /// Parameters with hierarchical names (`features.0.weight`). A tensor held by several
    /// modules (tied weights: the same `Tensor` handle, one [`Tensor::id`]) is listed once,
    /// under the first name that reaches it, as PyTorch's `remove_duplicate=True`; so an
    /// optimizer updates it once, with the gradient summed over its uses.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_unique(self, Kind::Param)
    }
    /// Parameters (handles sharing the module's tensors), each tied tensor once.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    /// Buffers with names, each shared buffer once (under its first name).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        named_unique(self, Kind::Buffer)
    }
    /// Parameters and buffers, PyTorch's state_dict order. A tied tensor appears under each of
    /// its names (the same tensor), as in PyTorch.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        self.visit(&mut |n, t, _| v.push((n.to_string(), t.clone())));
        v
    }
    /// Number of trainable scalars (a tied tensor counted once).
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
    /// A tied tensor is loaded under each of its names, in state_dict order (the last one wins,
    /// as in PyTorch); a state_dict saved from the tied model holds the same values under both.
    fn load_state_dict(&mut self, state: &[(String, Tensor)], strict: bool) -> Result<LoadReport> {
        let map: HashMap<&str, &Tensor> = state.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut report = LoadReport::default();
        let mut seen = HashSet::new();
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
    /// Tied tensors stay tied (one moved tensor in every slot that held the original), and a
    /// tensor already there is kept as it is (the same tensor, its gradient included).
    fn to_device(&mut self, device: &Device) -> Result<()> {
        self.convert(&|t| t.to(device))
    }
    /// Convert floating-point parameters and buffers to `dtype` (e.g. F16 for inference); tied
    /// tensors stay tied, as in [`ModuleExt::to_device`].
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        self.convert(&|t| {
            if t.dtype().is_float() {
                t.to_dtype(dtype)
            } else {
                Ok(t.clone())
            }
        })
    }
    /// Replace every tensor by `f(tensor)`, detached (a parameter keeps `requires_grad`). `f` runs
    /// once per distinct tensor and its result fills every slot that held it, so ties survive;
    /// a tensor `f` returns unchanged stays in place.
    #[doc(hidden)]
    fn convert(&mut self, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<()> {
        let _g = crate::no_grad();
        let mut done: HashMap<u64, Tensor> = HashMap::new();
        let mut err = None;
        self.visit_mut(&mut |_, t, k| {
            if err.is_some() {
                return;
            }
            if let Some(n) = done.get(&t.id()) {
                *t = n.clone();
                return;
            }
            match f(t) {
                Ok(n) if n.id() == t.id() => {}
                Ok(n) => {
                    // A parameter keeps its flag (a frozen one stays frozen), as in PyTorch.
                    let n = n
                        .detach()
                        .requires_grad_(k == Kind::Param && t.requires_grad());
                    done.insert(t.id(), n.clone());
                    *t = n;
                }
                Err(e) => err = Some(e),
            }
        });
        err.map_or(Ok(()), Err)
    }
}

/// The tensors of one kind, each distinct tensor once, under the first name that reaches it.
fn named_unique<M: Module + ?Sized>(m: &M, kind: Kind) -> Vec<(String, Tensor)> {
    let mut seen = HashSet::new();
    let mut v = Vec::new();
    m.visit(&mut |n, t, k| {
        if k == kind && seen.insert(t.id()) {
            v.push((n.to_string(), t.clone()))
        }
    });
    v
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
