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
/// The next storage's serial number (storages made later have larger ones).
static NEXT_STORAGE: AtomicU64 = AtomicU64::new(1);

/// Storage shared by a tensor and its views, with the version counter in-place ops bump.
#[derive(Debug)]
pub struct StorageCell {
    pub(crate) data: RwLock<Storage>,
    version: AtomicU64,
    /// Increasing with creation: a compile capture tells the storages it made (later than its
    /// start) from those it found.
    serial: u64,
}

impl Drop for StorageCell {
    /// Host buffers go back to the CPU pool for the next tensor of the same size.
    fn drop(&mut self) {
        crate::profiler::memory(self.data.get_mut(), -1);
        if let Storage::Cpu(c) = self.data.get_mut() {
            let s = std::mem::replace(c, crate::backend::cpu::CpuStorage::Bool(Vec::new()));
            crate::backend::cpu::pool::recycle(s);
        }
    }
}

impl StorageCell {
    pub(crate) fn new(s: Storage) -> Arc<Self> {
        crate::profiler::memory(&s, 1);
        Arc::new(StorageCell {
            data: RwLock::new(s),
            version: AtomicU64::new(0),
            serial: NEXT_STORAGE.fetch_add(1, Ordering::Relaxed),
        })
    }
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }
    /// The serial number the next storage will get.
    pub(crate) fn next_serial() -> u64 {
        NEXT_STORAGE.load(Ordering::Relaxed)
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
    /// Hooks run after a backward pass accumulates into `grad` (leaves only).
    pub(crate) post_grad_hooks: Mutex<Vec<(u64, crate::autograd::GradHook)>>,
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
///
/// # Creation
///
/// Factories take the shape first and the device last; floating factories give `float32`, as
/// PyTorch's default dtype, and `arange` over integers gives `int64` through
/// [`Tensor::arange_dtype`].
///
/// ```
/// use wgtorch::{DType, Device, Tensor};
/// let dev = Device::Cpu;
/// wgtorch::manual_seed(0);
/// let z = Tensor::zeros([2, 3], &dev)?; // torch.zeros(2, 3)
/// let r = Tensor::randn([2, 3], &dev)?; // torch.randn(2, 3)
/// let t = Tensor::from_vec(vec![1i64, 2, 3], [3], &dev)?; // torch.tensor([1, 2, 3])
/// let s = Tensor::arange(0.0, 1.0, 0.25, &dev)?; // torch.arange(0, 1, 0.25)
/// assert_eq!((z.shape(), r.dtype(), t.dtype()), (&[2, 3][..], DType::F32, DType::I64));
/// assert_eq!(s.to_vec::<f32>()?, vec![0.0, 0.25, 0.5, 0.75]);
/// assert_eq!(r.ones_like()?.sum_all()?.item()?, 6.0); // torch.ones_like(r).sum()
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// # Views and copies
///
/// `view`, `reshape` (when the strides allow it), `t`, `permute`, `transpose`, `narrow`,
/// `select`, `expand`, `unsqueeze` and `squeeze` return views: they share storage, so an in-place
/// write through one is seen by the other. `contiguous` (when the layout is not already
/// contiguous), [`Tensor::copy`] (PyTorch's `clone`) and arithmetic return new storage.
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::arange(0.0, 6.0, 1.0, &Device::Cpu)?.view([2, 3])?;
/// let col = x.narrow(1, 1, 1)?; // x[:, 1:2]
/// assert!(col.shares_storage_with(&x) && !col.is_contiguous());
/// col.fill_(-1.0)?; // writes through the view
/// assert_eq!(x.to_vec::<f32>()?, vec![0.0, -1.0, 2.0, 3.0, -1.0, 5.0]);
/// let copy = x.t()?.contiguous()?;
/// assert!(!copy.shares_storage_with(&x));
/// assert!(x.t()?.view([6]).is_err()); // PyTorch's "view size is not compatible": use reshape
/// assert_eq!(x.t()?.reshape([6])?.to_vec::<f32>()?[..2], [0.0, 3.0]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// # Broadcasting
///
/// Binary ops broadcast as NumPy and PyTorch do: shapes are aligned from the right, and a size-1
/// dimension stretches to the other operand's size. Operators work on references and values.
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let col = Tensor::from_vec(vec![1.0f32, 2.0], [2, 1], &dev)?;
/// let row = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], [3], &dev)?;
/// let sum = &col + &row; // [2, 1] + [3] -> [2, 3]
/// assert_eq!(sum.shape(), &[2, 3]);
/// assert_eq!(sum.to_vec::<f32>()?, vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
/// assert!(col.add(&Tensor::zeros([3, 1], &dev)?).is_err()); // 2 vs 3: not broadcastable
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// # Autograd
///
/// `requires_grad_(true)` makes a leaf; ops on it record the graph, and `backward` fills
/// `grad()` of the leaves (and of non-leaves that called [`Tensor::retain_grad`]). Gradients
/// accumulate across calls until zeroed, as in PyTorch. Inside [`no_grad`](crate::no_grad)
/// nothing is recorded; [`Tensor::backward_with`] with `create_graph` records the backward pass
/// too, for higher-order gradients.
///
/// ```
/// use wgtorch::{no_grad, Device, Tensor};
/// let x = Tensor::from_vec(vec![3.0f64], [1], &Device::Cpu)?.requires_grad_(true);
/// let y = x.pow_scalar(3.0)?; // y = x³
/// y.retain_grad();
/// let loss = y.sum_all()?;
/// loss.backward_with(None, false, true)?; // create_graph=True
/// let dx = x.grad().unwrap(); // 3x² = 27, itself differentiable
/// assert_eq!(dx.item()?, 27.0);
/// assert_eq!(y.grad().unwrap().item()?, 1.0);
/// x.set_grad(None);
/// dx.sum_all()?.backward()?; // d(3x²)/dx = 6x = 18
/// assert_eq!(x.grad().unwrap().item()?, 18.0);
/// {
///     let _g = no_grad();
///     assert!(!(&x * 2.0).requires_grad());
/// }
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// # Devices and reading back
///
/// [`Device::best`](crate::Device::best) picks a hardware GPU when there is one, else the CPU.
/// GPU ops are queued, not waited for: reading a value back (`to_vec`, `item`) waits for them,
/// and [`Tensor::to_vec_async`] is the form that awaits instead of blocking (the only form in
/// the browser).
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let dev = Device::best();
/// let x = Tensor::ones([4], &dev)?;
/// let y = (&x * 3.0).to(&Device::Cpu)?; // x.to("cpu")
/// assert_eq!(y.device(), Device::Cpu);
/// let v = pollster::block_on((&x + 1.0).to_vec_async::<f32>())?; // any executor will do
/// assert_eq!(v, vec![2.0; 4]);
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
            post_grad_hooks: Mutex::new(Vec::new()),
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
            post_grad_hooks: Mutex::new(Vec::new()),
        }))
    }

    /// Unique id of this tensor object.
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// The id the next tensor will get (tensors made later have larger ones).
    pub(crate) fn next_id() -> u64 {
        NEXT_ID.load(Ordering::Relaxed)
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
        crate::onnx::trace::storage_read(&self.0.storage);
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
        if crate::onnx::trace::side_effect("sets a gradient (zero_grad, set_grad)") {
            return;
        }
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
                // A gradient elsewhere would reach the first backward kernel on the wrong device.
                if g.device() != self.device() {
                    return Err(Error::Autograd(format!(
                        "invalid gradient at index 0 - expected device {} but got {}",
                        self.device(),
                        g.device()
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
        crate::onnx::trace::refuse_under_capture("backward()")?;
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
