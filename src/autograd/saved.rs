//! What a backward rule may keep from its forward pass: [`Saved`] tensors, whose version is
//! checked when the rule reads them, and plain data ([`SavedState`]).
//!
//! `record` takes a rule that is a plain `fn` (a closure that captures nothing) plus the state it
//! is handed back at backward time, and that state must implement [`SavedState`], which `Tensor`
//! does not. So a rule can only reach a forward tensor through a [`Saved`]: saving a tensor and
//! checking it for in-place changes are one act, and forgetting to list one does not compile.

use crate::{DType, Device, Error, Result, Tensor};
use std::cell::Cell;

/// A tensor a backward rule reads, with its storage version when the op ran. [`Saved::get`]
/// returns it only if no in-place op has changed it (or a view of it) since.
#[derive(Clone)]
pub(crate) struct Saved {
    tensor: Tensor,
    version: u64,
    /// The node that produced the tensor, for the message ("which is output 0 of ...").
    output_of: Option<&'static str>,
}

impl Saved {
    /// Save an input (or any tensor other than the op's own output), keeping its autograd link
    /// so that rules stay differentiable under `create_graph`.
    pub(crate) fn new(t: &Tensor) -> Saved {
        Saved {
            tensor: t.clone(),
            version: t.version(),
            output_of: t.grad_fn().map(|n| n.name),
        }
    }
    /// Save the output of op `name` itself: a detached alias of its storage (saving the tensor
    /// with its node would be a cycle, node -> rule -> output -> node, and leak).
    pub(crate) fn output(out: &Tensor, name: &'static str) -> Saved {
        Saved {
            tensor: out.detach(),
            version: out.version(),
            output_of: Some(name),
        }
    }
    /// The tensor, or PyTorch's error if an in-place op changed it after it was saved.
    pub(crate) fn get(&self) -> Result<Tensor> {
        let now = self.tensor.version();
        if now == self.version {
            return Ok(self.tensor.clone());
        }
        let t = &self.tensor;
        let origin = self
            .output_of
            .map(|n| format!(", which is output 0 of {n}Backward,"))
            .unwrap_or_default();
        Err(Error::Autograd(format!(
            "one of the variables needed for gradient computation has been modified by an inplace operation: [{} {:?}]{origin} is at version {now}; expected version {} instead. Hint: it was saved for {}Backward; clone() it before the in-place operation, or modify it after backward().",
            legacy_type_name(t.dtype(), t.device()),
            t.shape(),
            self.version,
            RUNNING.get(),
        )))
    }
    /// The saved tensor's shape (in-place ops never change it, so no version check).
    pub(crate) fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }
}

thread_local! {
    /// The node whose rule is running on this thread (named in the error).
    static RUNNING: Cell<&'static str> = const { Cell::new("(unknown)") };
}

/// Run `f` (a node's rule) with `name` as the node [`Saved::get`]'s error names.
pub(super) fn running<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let prev = RUNNING.replace(name);
    let out = f();
    RUNNING.set(prev);
    out
}

/// PyTorch's legacy type name, as its autograd messages print it (`torch.FloatTensor`); tensors on
/// a GPU get the device's prefix as CUDA's do (`torch.gpu.FloatTensor`).
fn legacy_type_name(dtype: DType, device: Device) -> String {
    let base = match dtype {
        DType::Bool => "BoolTensor",
        DType::I32 => "IntTensor",
        DType::I64 => "LongTensor",
        DType::F16 => "HalfTensor",
        DType::BF16 => "BFloat16Tensor",
        DType::F32 => "FloatTensor",
        DType::F64 => "DoubleTensor",
    };
    match device {
        Device::Cpu => format!("torch.{base}"),
        Device::Gpu(_) => format!("torch.gpu.{base}"),
    }
}

/// State a backward rule keeps: [`Saved`] tensors and plain data (shapes, dims, flags, op codes).
/// Deliberately not implemented for `Tensor`, so a forward tensor cannot be kept unchecked.
pub(crate) trait SavedState: Send + Sync + 'static {}

macro_rules! saved_state {
    ($($t:ty),* $(,)?) => { $(impl SavedState for $t {})* };
}
saved_state!(
    Saved,
    (),
    bool,
    usize,
    isize,
    u32,
    u64,
    i32,
    i64,
    f32,
    f64,
    &'static str,
    DType,
    Device,
    crate::shape::Layout,
    crate::ops::UnaryOp,
    crate::ops::BinaryOp,
    crate::ops::ReduceOp,
    crate::ops::ConvGeom,
);
impl<T: SavedState> SavedState for Vec<T> {}
impl<T: SavedState> SavedState for Option<T> {}
impl<T: SavedState, const N: usize> SavedState for [T; N] {}

macro_rules! saved_tuples {
    ($(($($n:ident),+))*) => { $(impl<$($n: SavedState),+> SavedState for ($($n,)+) {})* };
}
saved_tuples!((A)(A, B)(A, B, C)(A, B, C, D)(A, B, C, D, E)(
    A, B, C, D, E, F
)(A, B, C, D, E, F, G));
