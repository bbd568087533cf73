//! The crate's error type: every fallible public function returns [`Result<T>`].
//!
//! Messages follow PyTorch's wording where PyTorch has one, and always name the op and the
//! shapes, dtypes or devices involved.

use crate::{DType, Device};

/// Everything that can go wrong in wgtorch.
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let a = Tensor::zeros([2, 3], &Device::Cpu).unwrap();
/// let b = Tensor::zeros([4], &Device::Cpu).unwrap();
/// let err = a.add(&b).unwrap_err();
/// assert!(err.to_string().contains("must match the size"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes could not be broadcast together.
    #[error("{op}: the size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension {dim} (shapes {lhs:?} and {rhs:?})")]
    Broadcast {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// Shape of the first operand.
        lhs: Vec<usize>,
        /// Shape of the second operand.
        rhs: Vec<usize>,
        /// The dimension (counted from the left of the broadcast shape) where they disagree.
        dim: usize,
        /// Size of the first operand at `dim`.
        a: usize,
        /// Size of the second operand at `dim`.
        b: usize,
    },
    /// Shapes that an op needs to agree do not.
    #[error("{op}: {msg}")]
    Shape {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// What disagrees, naming the shapes.
        msg: String,
    },
    /// Tensors on different devices were combined.
    #[error("Expected all tensors to be on the same device, but found at least two devices, {a} and {b}! (in {op})")]
    DeviceMismatch {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The first device found.
        a: Device,
        /// The other device found.
        b: Device,
    },
    /// Tensors of different dtypes were combined where the op needs one dtype.
    #[error("{op}: expected {expected} but found {found}")]
    DTypeMismatch {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The dtype the op needed.
        expected: DType,
        /// The dtype it got.
        found: DType,
    },
    /// The op is not defined for this dtype.
    #[error("{op}: not implemented for dtype {dtype}{hint}")]
    UnsupportedDType {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The dtype it got.
        dtype: DType,
        /// What to do instead, starting with "; " when set (empty otherwise).
        hint: &'static str,
    },
    /// The device cannot hold this dtype.
    #[error("dtype {dtype} is not supported on device {device} ({adapter}); use .to_dtype(DType::F32) or keep the tensor on the CPU")]
    DTypeNotOnDevice {
        /// The dtype (`F64` on a GPU; half types always have a packed form there).
        dtype: DType,
        /// The device that cannot hold it.
        device: Device,
        /// The adapter's name, as the driver reports it.
        adapter: String,
    },
    /// A dimension index out of range.
    #[error(
        "{op}: Dimension out of range (expected to be in range of [{min}, {max}], but got {dim})"
    )]
    DimOutOfRange {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The dimension given (negative dims count from the end).
        dim: isize,
        /// Smallest valid dimension (`-ndim`).
        min: isize,
        /// Largest valid dimension (`ndim - 1`).
        max: isize,
    },
    /// An index out of range.
    #[error("{op}: index {index} is out of bounds for dimension {dim} with size {size}")]
    IndexOutOfRange {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The index given.
        index: i64,
        /// The dimension it indexes.
        dim: usize,
        /// The size of that dimension.
        size: usize,
    },
    /// `view` on a tensor whose strides do not allow it.
    #[error("view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead. (shape {shape:?} -> {target:?}, strides {strides:?})")]
    ViewNonContiguous {
        /// Shape of the tensor viewed.
        shape: Vec<usize>,
        /// Its strides, in elements.
        strides: Vec<usize>,
        /// The shape asked for (`-1` as given).
        target: Vec<isize>,
    },
    /// Bad argument value.
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// What is wrong with the argument and what is allowed.
        msg: String,
    },
    /// Autograd misuse, worded as PyTorch words it.
    #[error("{0}")]
    Autograd(String),
    /// No GPU adapter, or the adapter could not give a device.
    #[error("no GPU available: {0}")]
    NoGpu(String),
    /// The adapter's limits were exceeded.
    #[error("{op}: {what} needs {needed} but adapter \"{adapter}\" allows at most {limit} ({limit_name})")]
    GpuLimit {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// What exceeds the limit (a buffer, a binding, a dispatch).
        what: String,
        /// What the op needs, in the limit's unit.
        needed: u64,
        /// What the adapter allows.
        limit: u64,
        /// The limit's name in `wgpu::Limits` (`max_storage_buffer_binding_size`, ...).
        limit_name: &'static str,
        /// The adapter's name, as the driver reports it.
        adapter: String,
    },
    /// An error reported by the GPU driver (out of memory, lost device, ...).
    #[error("GPU error on adapter \"{adapter}\" in {op}: {msg}")]
    Gpu {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The adapter's name, as the driver reports it.
        adapter: String,
        /// The driver's message.
        msg: String,
    },
    /// An allocation failed or could never succeed (too many bytes for the host or the adapter).
    /// Worded like PyTorch's "not enough memory: you tried to allocate N bytes".
    #[error("{op}: out of memory on {device}: tried to allocate {bytes} bytes ({}){detail}", human_bytes(*bytes))]
    OutOfMemory {
        /// The op that failed, by PyTorch's name (`add`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// The device that could not allocate.
        device: Device,
        /// The size of the failed allocation.
        bytes: u64,
        /// Extra context (the adapter and its limit, the pool's state), starting with "; " when set.
        detail: String,
    },
    /// The DataLoader could not load a batch: the dataset's `get` for sample `index` returned an
    /// error (`source`) or panicked (`msg` holds the panic's message). `index` is None when the
    /// prefetch thread failed outside `get`.
    #[error("DataLoader: {}{msg}", index.map(|i| format!("sample {i}: ")).unwrap_or_default())]
    DataLoader {
        /// The sample whose `get` failed, if the failure was in one.
        index: Option<usize>,
        /// The panic's message, or empty when `source` holds the error.
        msg: String,
        /// The error `get` returned.
        #[source]
        source: Option<Box<Error>>,
    },
    /// A blocking call where blocking is impossible (the browser).
    #[error("{0}")]
    WouldBlock(String),
    /// I/O. `path` is the file involved, or empty for an error converted with `?` / `From`.
    #[error("{}{source}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Io {
        /// The file involved, or empty.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A collective or the process group failed (the `mpi` feature's `distributed` module): the
    /// ranks' calls differ, a collective timed out, or MPI returned an error.
    #[error("{op}: {msg}")]
    Distributed {
        /// The collective, by PyTorch's name (`all_reduce`, `broadcast`, ...).
        op: &'static str,
        /// What went wrong, naming the ranks involved.
        msg: String,
    },
    /// An error raised by user code with [`Error::msg`].
    #[error("{0}")]
    Msg(String),
}

/// `?` on an I/O result in a function returning [`Result`] (the error names no path).
impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io {
            path: String::new(),
            source,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// [`Error::in_op`] on a `Result`.
pub(crate) trait InOp<T> {
    /// Report an error as coming from `op`.
    fn in_op(self, op: &'static str) -> Result<T>;
}

impl<T> InOp<T> for Result<T> {
    fn in_op(self, op: &'static str) -> Result<T> {
        self.map_err(|e| e.in_op(op))
    }
}

impl Error {
    /// An error with a message, for user code that returns [`Result`] from its own functions
    /// (PyTorch code's `raise RuntimeError(...)`).
    ///
    /// ```
    /// use wgtorch::{Device, Error, Result, Tensor};
    /// fn check_batch(x: &Tensor) -> Result<()> {
    ///     if x.ndim() != 4 {
    ///         return Err(Error::msg(format!("expected a 4-D batch, got shape {:?}", x.shape())));
    ///     }
    ///     Ok(())
    /// }
    /// let err = check_batch(&Tensor::zeros([3], &Device::Cpu)?).unwrap_err();
    /// assert_eq!(err.to_string(), "expected a 4-D batch, got shape [3]");
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn msg(msg: impl std::fmt::Display) -> Self {
        Error::Msg(msg.to_string())
    }
    /// Shapes that do not agree ([`Error::Shape`]): "`op`: `msg`".
    ///
    /// ```
    /// let e = wgtorch::Error::shape("my_layer", "expected 3 channels, got 4");
    /// assert_eq!(e.to_string(), "my_layer: expected 3 channels, got 4");
    /// ```
    pub fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Shape {
            op,
            msg: msg.into(),
        }
    }
    /// The same error, reported by `op`: a composite op names itself rather than the primitive
    /// it called (`linear`'s shape error says "linear", not "matmul").
    pub(crate) fn in_op(mut self, op: &'static str) -> Self {
        match &mut self {
            Error::Broadcast { op: o, .. }
            | Error::Shape { op: o, .. }
            | Error::DeviceMismatch { op: o, .. }
            | Error::DTypeMismatch { op: o, .. }
            | Error::UnsupportedDType { op: o, .. }
            | Error::DimOutOfRange { op: o, .. }
            | Error::IndexOutOfRange { op: o, .. }
            | Error::InvalidArgument { op: o, .. }
            | Error::GpuLimit { op: o, .. }
            | Error::Gpu { op: o, .. }
            | Error::OutOfMemory { op: o, .. }
            | Error::Distributed { op: o, .. } => *o = op,
            Error::DTypeNotOnDevice { .. }
            | Error::ViewNonContiguous { .. }
            | Error::Autograd(_)
            | Error::DataLoader { .. }
            | Error::NoGpu(_)
            | Error::WouldBlock(_)
            | Error::Io { .. }
            | Error::Msg(_) => {}
        }
        self
    }
    pub(crate) fn oom(op: &'static str, device: Device, bytes: u64) -> Self {
        Error::OutOfMemory {
            op,
            device,
            bytes,
            detail: String::new(),
        }
    }
    /// A bad argument value ([`Error::InvalidArgument`]): "`op`: `msg`".
    ///
    /// ```
    /// let e = wgtorch::Error::arg("my_dropout", "p must be in [0, 1], got 1.5");
    /// assert_eq!(e.to_string(), "my_dropout: p must be in [0, 1], got 1.5");
    /// ```
    pub fn arg(op: &'static str, msg: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            msg: msg.into(),
        }
    }
}

/// `1536` -> "1.50 KiB": byte counts as a person reads them.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}
