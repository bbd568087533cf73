//! The module traits: [`Module`] (parameters, buffers and child modules with hierarchical names,
//! train/eval) and [`Forward`] (one tensor in, one out); [`ModuleExt`] derives everything else
//! (named_parameters, state_dict, load_state_dict, named_modules, apply, device moves, ...).
//! Write modules with `#[derive(Module)]` (see [`macro@Module`]); containers and the blanket impls
//! for `Vec<M>`, `Option<M>` and `Box<M>` live here too.

use crate::{DType, Device, Error, Result, Tensor};
use std::any::Any;
use std::collections::{HashMap, HashSet};

/// Whether a named tensor is a trainable parameter or a buffer (running statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Trained by optimizers.
    Param,
    /// State saved in the state_dict but not trained.
    Buffer,
}

/// A layer or model: a container of parameters, buffers and child modules (PyTorch's
/// `nn.Module` without `forward`). Derive it: `#[derive(Module)]` writes the visitors and the
/// train/eval propagation from the struct's fields, and the struct keeps an inherent `forward`
/// with any signature. Layers that map one tensor to one tensor also implement [`Forward`].
///
/// ```
/// use wgtorch::nn::{Dropout, Linear, Module, ModuleExt};
/// use wgtorch::{Device, Result, Tensor};
///
/// #[derive(Module)]
/// struct Vae {
///     fc1: Linear,
///     fc21: Linear,
///     fc22: Linear,
///     drop: Dropout,
///     latent: usize, // configuration: skipped
/// }
///
/// impl Vae {
///     fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
///         let h = self.drop.forward(&self.fc1.forward(x)?.relu()?)?;
///         let (mu, logvar) = (self.fc21.forward(&h)?, self.fc22.forward(&h)?);
///         Ok((mu.clone(), mu, logvar))
///     }
/// }
///
/// let dev = Device::Cpu;
/// let mut vae = Vae {
///     fc1: Linear::new(4, 8, &dev)?,
///     fc21: Linear::new(8, 2, &dev)?,
///     fc22: Linear::new(8, 2, &dev)?,
///     drop: Dropout::new(0.5)?,
///     latent: 2,
/// };
/// vae.eval(); // reaches the Dropout
/// let names: Vec<String> = vae.state_dict().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "fc21.weight", "fc21.bias", "fc22.weight", "fc22.bias"]);
/// let (_recon, mu, _logvar) = vae.forward(&Tensor::zeros([3, 4], &dev)?)?;
/// assert_eq!(mu.shape(), &[3, 2]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// Implementing it by hand: `visit`/`visit_mut` list every parameter and buffer of this module
/// and its descendants, named relative to this module, in PyTorch's state_dict order (own
/// parameters, own buffers, then each child's, prefixed `child.`); `visit_children` names each
/// direct child; `set_training` stores the flag (if the module keeps one) and passes it to
/// every child.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a module",
    note = "in a #[derive(Module)] struct, every field that is not a #[param], a #[buffer] or plain configuration (numbers, bool, String, Device, DType, ...) is a child module; mark other fields #[module(skip)]"
)]
pub trait Module: ModuleBase + Send + Sync + 'static {
    /// Call `f` for every parameter and buffer, named relative to this module.
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind));
    /// Like `visit`, with the slots mutable (device moves, loading).
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind));
    /// Call `f` for each direct child module with its name (`fc1`, `0`, ...). Leaves have none.
    fn visit_children<'a>(&'a self, _f: &mut dyn FnMut(&str, &'a dyn Module)) {}
    /// Like `visit_children`, with the children mutable.
    fn visit_children_mut<'a>(&'a mut self, _f: &mut dyn FnMut(&str, &'a mut dyn Module)) {}
    /// Switch training mode (dropout, batch statistics) here and in every descendant.
    fn set_training(&mut self, _on: bool) {}
    /// This module's own training flag, for modules whose forward depends on it (Dropout,
    /// BatchNorm, a derived struct with a `#[module(training)]` field); `None` otherwise.
    fn training_flag(&self) -> Option<bool> {
        None
    }
    /// How this module appears as a child named `name` of another: itself, by default.
    /// `Option<M>` appears only when `Some`, and a `Box` as the module it holds.
    #[doc(hidden)]
    fn visit_as_child<'a>(&'a self, name: &str, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        f(name, self.base_dyn())
    }
    /// Mutable form of `visit_as_child`.
    #[doc(hidden)]
    fn visit_as_child_mut<'a>(
        &'a mut self,
        name: &str,
        f: &mut dyn FnMut(&str, &'a mut dyn Module),
    ) {
        f(name, self.base_dyn_mut())
    }
    /// The module as `dyn Module` (a `Box` gives the module it holds).
    #[doc(hidden)]
    fn as_dyn(&self) -> &dyn Module {
        self.base_dyn()
    }
    /// Mutable form of `as_dyn`.
    #[doc(hidden)]
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self.base_dyn_mut()
    }
    /// The concrete module as `Any` (a `Box` gives the module it holds), for downcasts.
    #[doc(hidden)]
    fn as_any(&self) -> &dyn Any {
        self.base_any()
    }
    /// Mutable form of `as_any`.
    #[doc(hidden)]
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self.base_any_mut()
    }
}

/// Conversions every sized module gets for free (a blanket impl); [`Module`]'s hidden methods
/// build on them so that a `Box` can forward them to the module it holds.
#[doc(hidden)]
pub trait ModuleBase {
    /// `self` as `dyn Module`.
    fn base_dyn(&self) -> &dyn Module;
    /// `self` as `dyn Module`, mutable.
    fn base_dyn_mut(&mut self) -> &mut dyn Module;
    /// `self` as `Any`.
    fn base_any(&self) -> &dyn Any;
    /// `self` as `Any`, mutable.
    fn base_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Module> ModuleBase for T {
    fn base_dyn(&self) -> &dyn Module {
        self
    }
    fn base_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
    fn base_any(&self) -> &dyn Any {
        self
    }
    fn base_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A module that maps one tensor to one tensor (every built-in single-input layer): what
/// [`crate::nn::Sequential`] chains. A module with another signature keeps an inherent
/// `forward` instead; `#[module(forward)]` on a derived struct implements this trait with its
/// inherent `forward(&self, &Tensor) -> Result<Tensor>`.
///
/// ```
/// use wgtorch::nn::{Forward, Linear, ReLU, Sequential};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let layers: Vec<Box<dyn Forward>> = vec![Box::new(Linear::new(4, 3, &dev)?), Box::new(ReLU::new())];
/// let mut x = Tensor::ones([2, 4], &dev)?;
/// for l in &layers {
///     x = l.forward(&x)?;
/// }
/// assert_eq!(x.shape(), &[2, 3]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub trait Forward: Module {
    /// The layer's computation.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

impl dyn Module {
    /// Whether the module is a `T`.
    pub fn is<T: Module>(&self) -> bool {
        self.as_any().is::<T>()
    }
    /// The module as a `T`, if it is one (e.g. every `Linear` in [`ModuleExt::apply`]).
    ///
    /// ```
    /// use wgtorch::nn::{Linear, Module, ReLU};
    /// use wgtorch::Device;
    /// let m: Box<dyn Module> = Box::new(Linear::new(2, 3, &Device::Cpu)?);
    /// assert_eq!(m.downcast_ref::<Linear>().unwrap().weight.shape(), &[3, 2]);
    /// assert!(m.downcast_ref::<ReLU>().is_none());
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn downcast_ref<T: Module>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }
    /// The module as a mutable `T`, if it is one.
    pub fn downcast_mut<T: Module>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }
}

impl dyn Forward {
    /// Whether the layer is a `T`.
    pub fn is<T: Module>(&self) -> bool {
        self.as_any().is::<T>()
    }
    /// The layer as a `T`, if it is one.
    pub fn downcast_ref<T: Module>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }
    /// The layer as a mutable `T`, if it is one.
    pub fn downcast_mut<T: Module>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }
}

/// `prefix.name`, or `name` when the prefix is empty.
#[doc(hidden)]
pub fn join_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The tensor slots a `#[param]` or `#[buffer]` field may have: `Tensor`, `Option<Tensor>`
/// (visited when `Some`) and `Vec<Tensor>` (named `name.0`, `name.1`, ..., as PyTorch's
/// `ParameterList`). Used by the derive.
pub trait TensorSlots {
    /// Call `f` for each tensor under `name`.
    fn visit_slots(&self, name: &str, kind: Kind, f: &mut dyn FnMut(&str, &Tensor, Kind));
    /// Mutable form.
    fn visit_slots_mut(
        &mut self,
        name: &str,
        kind: Kind,
        f: &mut dyn FnMut(&str, &mut Tensor, Kind),
    );
}

impl TensorSlots for Tensor {
    fn visit_slots(&self, name: &str, kind: Kind, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f(name, self, kind)
    }
    fn visit_slots_mut(
        &mut self,
        name: &str,
        kind: Kind,
        f: &mut dyn FnMut(&str, &mut Tensor, Kind),
    ) {
        f(name, self, kind)
    }
}

impl<S: TensorSlots> TensorSlots for Option<S> {
    fn visit_slots(&self, name: &str, kind: Kind, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        if let Some(s) = self {
            s.visit_slots(name, kind, f)
        }
    }
    fn visit_slots_mut(
        &mut self,
        name: &str,
        kind: Kind,
        f: &mut dyn FnMut(&str, &mut Tensor, Kind),
    ) {
        if let Some(s) = self {
            s.visit_slots_mut(name, kind, f)
        }
    }
}

impl<S: TensorSlots> TensorSlots for Vec<S> {
    fn visit_slots(&self, name: &str, kind: Kind, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        for (i, s) in self.iter().enumerate() {
            s.visit_slots(&join_name(name, &i.to_string()), kind, f)
        }
    }
    fn visit_slots_mut(
        &mut self,
        name: &str,
        kind: Kind,
        f: &mut dyn FnMut(&str, &mut Tensor, Kind),
    ) {
        for (i, s) in self.iter_mut().enumerate() {
            s.visit_slots_mut(&join_name(name, &i.to_string()), kind, f)
        }
    }
}

/// Visit a child module's tensors with names prefixed `name.` (used by the derive and by
/// hand-written containers).
pub fn visit_child<M: Module + ?Sized>(
    child: &M,
    name: &str,
    f: &mut dyn FnMut(&str, &Tensor, Kind),
) {
    child.visit(&mut |n, t, k| f(&join_name(name, n), t, k))
}

/// Mutable form of [`visit_child`].
pub fn visit_child_mut<M: Module + ?Sized>(
    child: &mut M,
    name: &str,
    f: &mut dyn FnMut(&str, &mut Tensor, Kind),
) {
    child.visit_mut(&mut |n, t, k| f(&join_name(name, n), t, k))
}

/// A list of modules is a module whose children are named `0`, `1`, ... (PyTorch's
/// `ModuleList` naming), so a `Vec<Block>` field gives `blocks.0.weight`.
impl<M: Module> Module for Vec<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        for (i, m) in self.iter().enumerate() {
            visit_child(m, &i.to_string(), f)
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        for (i, m) in self.iter_mut().enumerate() {
            visit_child_mut(m, &i.to_string(), f)
        }
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        for (i, m) in self.iter().enumerate() {
            m.visit_as_child(&i.to_string(), f)
        }
    }
    fn visit_children_mut<'a>(&'a mut self, f: &mut dyn FnMut(&str, &'a mut dyn Module)) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_as_child_mut(&i.to_string(), f)
        }
    }
    fn set_training(&mut self, on: bool) {
        self.iter_mut().for_each(|m| m.set_training(on))
    }
}

/// An optional child (PyTorch's `self.proj = None`): present in names and traversals only when
/// `Some`.
impl<M: Module> Module for Option<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        if let Some(m) = self {
            m.visit(f)
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        if let Some(m) = self {
            m.visit_mut(f)
        }
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        if let Some(m) = self {
            m.visit_children(f)
        }
    }
    fn visit_children_mut<'a>(&'a mut self, f: &mut dyn FnMut(&str, &'a mut dyn Module)) {
        if let Some(m) = self {
            m.visit_children_mut(f)
        }
    }
    fn set_training(&mut self, on: bool) {
        if let Some(m) = self {
            m.set_training(on)
        }
    }
    fn training_flag(&self) -> Option<bool> {
        self.as_ref().and_then(|m| m.training_flag())
    }
    fn visit_as_child<'a>(&'a self, name: &str, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        if let Some(m) = self {
            m.visit_as_child(name, f)
        }
    }
    fn visit_as_child_mut<'a>(
        &'a mut self,
        name: &str,
        f: &mut dyn FnMut(&str, &'a mut dyn Module),
    ) {
        if let Some(m) = self {
            m.visit_as_child_mut(name, f)
        }
    }
}

/// A boxed module (`Box<dyn Module>`, `Box<dyn Forward>`, `Box<Linear>`) is the module it holds:
/// same names, same children, and downcasts reach the module inside.
impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        (**self).visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        (**self).visit_mut(f)
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        (**self).visit_children(f)
    }
    fn visit_children_mut<'a>(&'a mut self, f: &mut dyn FnMut(&str, &'a mut dyn Module)) {
        (**self).visit_children_mut(f)
    }
    fn set_training(&mut self, on: bool) {
        (**self).set_training(on)
    }
    fn training_flag(&self) -> Option<bool> {
        (**self).training_flag()
    }
    fn visit_as_child<'a>(&'a self, name: &str, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        (**self).visit_as_child(name, f)
    }
    fn visit_as_child_mut<'a>(
        &'a mut self,
        name: &str,
        f: &mut dyn FnMut(&str, &'a mut dyn Module),
    ) {
        (**self).visit_as_child_mut(name, f)
    }
    fn as_dyn(&self) -> &dyn Module {
        (**self).as_dyn()
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        (**self).as_dyn_mut()
    }
    fn as_any(&self) -> &dyn Any {
        (**self).as_any()
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        (**self).as_any_mut()
    }
}

impl<M: Forward + ?Sized> Forward for Box<M> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }
}

/// What `load_state_dict` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Names the module has but the state_dict lacks.
    pub missing_keys: Vec<String>,
    /// Names in the state_dict the module does not have.
    pub unexpected_keys: Vec<String>,
}

/// Methods every module gets (a blanket impl over [`Module`]): PyTorch's `nn.Module` methods
/// `named_parameters`, `parameters`, `buffers`, `state_dict`, `load_state_dict`, `train`,
/// `eval`, `named_modules`, `children`, `apply`, `zero_grad`, and the device and dtype moves
/// (`to_device`, `to_dtype`: PyTorch's `.to(...)`).
///
/// ```
/// use wgtorch::nn::{Linear, ModuleExt};
/// use wgtorch::optim::{Optimizer, Sgd};
/// use wgtorch::Device;
/// let fc = Linear::new(3, 2, &Device::Cpu)?;
/// let params = fc.parameters(); // handles sharing the layer's tensors
/// assert_eq!(params.len(), 2);
/// assert!(params.iter().all(|p| p.requires_grad()));
/// let opt = Sgd::new(params, 0.1)?; // what an optimizer takes
/// assert_eq!(opt.param_groups()[0].params[0].shape(), &[2, 3]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
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
    /// Buffers, each shared buffer once.
    fn buffers(&self) -> Vec<Tensor> {
        self.named_buffers().into_iter().map(|(_, t)| t).collect()
    }
    /// Parameters and buffers, PyTorch's state_dict order. A tied tensor appears under each of
    /// its names (the same tensor), as in PyTorch. The tensors are handles to the module's own
    /// tensors, not copies (PyTorch's `state_dict()` shares storage too); save them with
    /// [`crate::io::save`].
    ///
    /// ```
    /// use wgtorch::nn::{BatchNorm1d, ModuleExt};
    /// use wgtorch::Device;
    /// let bn = BatchNorm1d::new(4, &Device::Cpu)?;
    /// let sd = bn.state_dict();
    /// assert_eq!(sd[2].0, "running_mean");
    /// assert_eq!(bn.parameters().len(), 2); // the buffers are not parameters
    /// assert_eq!(sd.len(), 5);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        self.visit(&mut |n, t, _| v.push((n.to_string(), t.clone())));
        v
    }
    /// Number of trainable scalars (a tied tensor counted once).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.numel()).sum()
    }
    /// Clear every parameter's gradient (PyTorch's `set_to_none=True`).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
        }
    }
    /// Training mode, in this module and every descendant (PyTorch's `train()`; modules start
    /// in it).
    ///
    /// ```
    /// use wgtorch::nn::{Dropout, Linear, ModuleExt, Sequential};
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let fc = Linear::new(64, 64, &dev)?;
    /// let mut net = Sequential::new().append(fc).append(Dropout::new(0.5)?);
    /// let x = Tensor::ones([2, 64], &dev)?;
    /// net.eval(); // dropout off: the forward pass is deterministic
    /// assert_eq!(net.training(), Some(false));
    /// assert_eq!(net.forward(&x)?.to_vec::<f32>()?, net.forward(&x)?.to_vec::<f32>()?);
    /// net.train(); // dropout on: about half the outputs are zeroed
    /// assert_eq!(net.training(), Some(true));
    /// let zeros = net.forward(&x)?.to_vec::<f32>()?.iter().filter(|&&v| v == 0.0).count();
    /// assert!(zeros > 16 && zeros < 112, "{zeros}");
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    fn train(&mut self) {
        self.set_training(true)
    }
    /// Evaluation mode, in this module and every descendant (dropout off, running statistics).
    fn eval(&mut self) {
        self.set_training(false)
    }
    /// The training flag: this module's own, else that of the first module in
    /// [`ModuleExt::named_modules`] order that keeps one; `None` when no module in the tree
    /// keeps one (nothing in it behaves differently in training and evaluation).
    fn training(&self) -> Option<bool> {
        self.named_modules()
            .into_iter()
            .find_map(|(_, m)| m.training_flag())
    }
    /// This module (named `""`) and every descendant, pre-order, with dotted names
    /// (`features`, `features.0`, ...), as PyTorch's `named_modules()`.
    fn named_modules(&self) -> Vec<(String, &dyn Module)> {
        let mut v = Vec::new();
        collect_modules(self.as_dyn(), String::new(), &mut v);
        v
    }
    /// This module and every descendant, pre-order.
    fn modules(&self) -> Vec<&dyn Module> {
        self.named_modules().into_iter().map(|(_, m)| m).collect()
    }
    /// The direct children with their names.
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut v = Vec::new();
        self.visit_children(&mut |n, m| v.push((n.to_string(), m)));
        v
    }
    /// The direct children.
    fn children(&self) -> Vec<&dyn Module> {
        self.named_children().into_iter().map(|(_, m)| m).collect()
    }
    /// Call `f` on every descendant and then on this module (children first, as PyTorch's
    /// `apply`); stops at the first error. Reach concrete layers with
    /// [`downcast_mut`](trait.Module.html#method.downcast_mut):
    ///
    /// ```
    /// use wgtorch::nn::{init, Linear, Module, ModuleExt, ReLU, Sequential};
    /// use wgtorch::Device;
    /// let dev = Device::Cpu;
    /// let mut net = Sequential::new().append(Linear::new(4, 8, &dev)?).append(ReLU::new()).append(Linear::new(8, 2, &dev)?);
    /// net.apply(|m| {
    ///     if let Some(fc) = m.downcast_mut::<Linear>() {
    ///         init::constant_(&fc.weight, 0.5)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// assert!(net.parameters()[0].to_vec::<f32>()?.iter().all(|&w| w == 0.5));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    fn apply(&mut self, mut f: impl FnMut(&mut dyn Module) -> Result<()>) -> Result<()> {
        apply_post_order(self.as_dyn_mut(), &mut f)
    }
    /// Copy values from `state` into the module's tensors in place (converted to each tensor's
    /// device and dtype; no graph is recorded). With `strict`, missing or unexpected keys are an
    /// error; shape mismatches always are ([`Error::InvalidArgument`] with PyTorch's message,
    /// `Error(s) in loading state_dict: ...`, and nothing is copied). Returns the keys that were
    /// missing or unexpected (both empty under `strict`).
    /// A tied tensor is loaded under each of its names, in state_dict order (the last one wins,
    /// as in PyTorch); a state_dict saved from the tied model holds the same values under both.
    ///
    /// ```
    /// use wgtorch::nn::{Linear, LinearOptions, ModuleExt};
    /// use wgtorch::Device;
    /// let dev = Device::Cpu;
    /// let src = Linear::new(3, 2, &dev)?;
    /// let mut dst = Linear::new(3, 2, &dev)?;
    /// dst.load_state_dict(&src.state_dict(), true)?;
    /// assert_eq!(dst.weight.to_vec::<f32>()?, src.weight.to_vec::<f32>()?);
    ///
    /// // A model without a bias: strict loading refuses the extra key, non-strict reports it.
    /// let mut nb = Linear::with_options(3, 2, LinearOptions { bias: false }, &dev)?;
    /// let err = nb.load_state_dict(&src.state_dict(), true).unwrap_err();
    /// assert!(err.to_string().contains("Unexpected key(s) in state_dict: \"bias\""));
    /// let report = nb.load_state_dict(&src.state_dict(), false)?;
    /// assert_eq!(report.unexpected_keys, ["bias"]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
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

/// `m` and its descendants, pre-order, named from `name`.
fn collect_modules<'a>(m: &'a dyn Module, name: String, out: &mut Vec<(String, &'a dyn Module)>) {
    let mut kids = Vec::new();
    m.visit_children(&mut |n, c| kids.push((join_name(&name, n), c)));
    out.push((name, m));
    for (n, c) in kids {
        collect_modules(c, n, out);
    }
}

/// Children first, then `m`.
fn apply_post_order(
    m: &mut dyn Module,
    f: &mut dyn FnMut(&mut dyn Module) -> Result<()>,
) -> Result<()> {
    let mut res = Ok(());
    m.visit_children_mut(&mut |_, c| {
        if res.is_ok() {
            res = apply_post_order(c, f);
        }
    });
    res?;
    f(m)
}

impl<M: Module + ?Sized> ModuleExt for M {}
