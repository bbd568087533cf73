//! The Tensor type: shared storage, a layout (views), dtype, device and autograd state.

mod create;
mod read;

pub(crate) use create::place;
pub(crate) use read::block_on;

use crate::autograd::Node;
use crate::backend::Storage;
use crate::shape::Layout;
use crate::{DType, Device, Error, Result};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Storage shared by a tensor and its views, with the version counter in-place ops bump.
#[derive(Debug)]
pub struct StorageCell {
    pub(crate) data: RwLock<Storage>,
    version: AtomicU64,
}

impl Drop for StorageCell {
    /// Host buffers go back to the CPU pool for the next tensor of the same size.
    fn drop(&mut self) {
        if let Storage::Cpu(c) = self.data.get_mut() {
            let s = std::mem::replace(c, crate::backend::cpu::CpuStorage::Bool(Vec::new()));
            crate::backend::cpu::pool::recycle(s);
        }
    }
}

impl StorageCell {
    pub(crate) fn new(s: Storage) -> Arc<Self> {
        Arc::new(StorageCell {
            data: RwLock::new(s),
            version: AtomicU64::new(0),
        })
    }
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
    pub(crate) fn bump(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct TensorImpl {
    pub(crate) id: u64,
    pub(crate) storage: Arc<StorageCell>,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    pub(crate) requires_grad: AtomicBool,
    pub(crate) grad_fn: Option<Arc<Node>>,
    pub(crate) grad: Mutex<Option<Tensor>>,
    pub(crate) retains_grad: AtomicBool,
}

/// An n-dimensional array on a device, with PyTorch's semantics. Cloning a `Tensor` is cheap and
/// gives another handle to the same tensor (like a second Python reference); views made by
/// `view`, `permute`, `narrow`, ... share storage.
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu)?;
/// let b = a.t()?.matmul(&a)?;
/// assert_eq!(b.to_vec::<f32>()?, vec![10.0, 14.0, 14.0, 20.0]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

impl Tensor {
    pub(crate) fn from_parts(
        storage: Arc<StorageCell>,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Tensor {
        Tensor(Arc::new(TensorImpl {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            storage,
            layout,
            dtype,
            device,
            requires_grad: AtomicBool::new(false),
            grad_fn: None,
            grad: Mutex::new(None),
            retains_grad: AtomicBool::new(false),
        }))
    }
    /// A contiguous tensor over fresh storage.
    pub(crate) fn from_storage(s: Storage, shape: &[usize], device: Device) -> Tensor {
        let dtype = s.dtype();
        Tensor::from_parts(
            StorageCell::new(s),
            Layout::contiguous(shape),
            dtype,
            device,
        )
    }
    /// A view of this tensor's storage with another layout (no autograd).
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(self.0.storage.clone(), layout, self.0.dtype, self.0.device)
    }
    pub(crate) fn with_grad_fn(self, node: Arc<Node>) -> Tensor {
        let i = &self.0;
        Tensor(Arc::new(TensorImpl {
            id: i.id,
            storage: i.storage.clone(),
            layout: i.layout.clone(),
            dtype: i.dtype,
            device: i.device,
            requires_grad: AtomicBool::new(true),
            grad_fn: Some(node),
            grad: Mutex::new(None),
            retains_grad: AtomicBool::new(false),
        }))
    }

    /// Unique id of this tensor object.
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// Size of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }
    /// Alias of [`Tensor::shape`], PyTorch's name.
    pub fn size(&self) -> &[usize] {
        self.shape()
    }
    /// Size of dimension `dim` (negative counts from the end).
    pub fn dim_size(&self, dim: isize) -> Result<usize> {
        if self.ndim() == 0 {
            return Err(Error::arg(
                "size",
                format!("dimension specified as {dim} but tensor has no dimensions"),
            ));
        }
        Ok(self.shape()[crate::shape::wrap_dim("size", dim, self.ndim())?])
    }
    /// Strides in elements.
    pub fn stride(&self) -> &[usize] {
        &self.0.layout.strides
    }
    /// Offset of the first element in the storage.
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.layout.shape.len()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// Device.
    pub fn device(&self) -> Device {
        self.0.device
    }
    /// The layout (shape, strides, offset).
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Row-major contiguous.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }
    /// Whether two tensors share storage.
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }
    pub(crate) fn version(&self) -> u64 {
        self.0.storage.version()
    }
    pub(crate) fn storage(&self) -> parking_lot::RwLockReadGuard<'_, Storage> {
        self.0.storage.data.read_recursive()
    }

    // ---- autograd state ----

    /// Whether gradients are tracked for this tensor.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }
    /// Set `requires_grad` on a leaf (PyTorch's `requires_grad_`); returns the same tensor.
    /// Only floating-point tensors can require gradients; for others the flag stays off.
    pub fn requires_grad_(self, on: bool) -> Tensor {
        if self.dtype().is_float() {
            self.0.requires_grad.store(on, Ordering::Relaxed);
        }
        self
    }
    /// Set `requires_grad`, with PyTorch's error for a non-leaf or an integer tensor.
    pub fn set_requires_grad(&self, on: bool) -> Result<()> {
        if !self.is_leaf() {
            return Err(Error::Autograd(
                "you can only change requires_grad flags of leaf variables.".into(),
            ));
        }
        if on && !self.dtype().is_float() {
            return Err(Error::Autograd(format!(
                "only Tensors of floating point dtype can require gradients (got {})",
                self.dtype()
            )));
        }
        self.0.requires_grad.store(on, Ordering::Relaxed);
        Ok(())
    }
    /// A tensor with no `grad_fn` (created by the user, or detached).
    pub fn is_leaf(&self) -> bool {
        self.0.grad_fn.is_none()
    }
    /// The node that created this tensor, if it was recorded.
    pub fn grad_fn(&self) -> Option<&Arc<Node>> {
        self.0.grad_fn.as_ref()
    }
    /// The accumulated gradient (leaves, and non-leaves after `retain_grad`).
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().clone()
    }
    /// Replace the gradient (`None` is PyTorch's `zero_grad(set_to_none=True)`).
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock() = g;
    }
    /// Zero the gradient in place, keeping it allocated.
    pub fn zero_grad(&self) -> Result<()> {
        let g = self.grad();
        if let Some(g) = g {
            let _ng = crate::no_grad();
            g.zero_()?;
        }
        Ok(())
    }
    /// Keep `.grad()` for this non-leaf tensor after backward.
    pub fn retain_grad(&self) {
        self.0.retains_grad.store(true, Ordering::Relaxed);
    }
    pub(crate) fn retains_grad(&self) -> bool {
        self.0.retains_grad.load(Ordering::Relaxed)
    }
    /// A new tensor sharing storage, cut from the graph.
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.0.layout.clone())
    }
    /// Backpropagate from this scalar (PyTorch's `loss.backward()`).
    pub fn backward(&self) -> Result<()> {
        self.backward_with(None, false, false)
    }
    /// Backpropagate with an explicit upstream `gradient` (needed for non-scalars), optionally
    /// keeping the graph (`retain_graph`) and recording the backward pass (`create_graph`).
    pub fn backward_with(
        &self,
        gradient: Option<&Tensor>,
        retain_graph: bool,
        create_graph: bool,
    ) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Autograd(
                "element 0 of tensors does not require grad and does not have a grad_fn".into(),
            ));
        }
        let g = match gradient {
            Some(g) => {
                if g.shape() != self.shape() {
                    return Err(Error::Autograd(format!(
                        "Mismatch in shape: grad_output[0] has a shape of {:?} and output[0] has a shape of {:?}.",
                        g.shape(),
                        self.shape()
                    )));
                }
                g.clone()
            }
            None => {
                if self.numel() != 1 {
                    return Err(Error::Autograd(format!(
                        "grad can be implicitly created only for scalar outputs (got shape {:?})",
                        self.shape()
                    )));
                }
                self.ones_like()?
            }
        };
        crate::autograd::backward(self, g, retain_graph || create_graph, create_graph)
    }

    /// Device check for ops combining tensors.
    pub(crate) fn same_device(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.device() != other.device() {
            return Err(Error::DeviceMismatch {
                op,
                a: self.device(),
                b: other.device(),
            });
        }
        Ok(())
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={}",
            self.shape(),
            self.dtype(),
            self.device()
        )?;
        if let Some(n) = self.grad_fn() {
            write!(f, ", grad_fn={n:?}")?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad=True")?;
        }
        write!(f, ")")
    }
}
