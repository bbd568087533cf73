//! Reading tensors back, moving them between devices and dtypes.

use super::Tensor;
use crate::backend::cpu::{CpuElem, CpuStorage};
use crate::backend::{gpu, Storage};
use crate::{DType, Device, Error, Result};

impl Tensor {
    /// The elements in row-major order, as host values (async: the only form in the browser).
    pub async fn to_vec_async<T: CpuElem>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch {
                op: "to_vec",
                expected: self.dtype(),
                found: T::DTYPE,
            });
        }
        crate::onnx::trace::host_read(self, "to_vec");
        let host = self.host_storage_async().await?;
        Ok(T::slice(&host).expect("dtype checked").to_vec())
    }
    /// The elements in row-major order (blocks until the device has computed them).
    pub fn to_vec<T: CpuElem>(&self) -> Result<Vec<T>> {
        block_on(self.to_vec_async())
    }
    /// The value of a one-element tensor, as f64 (async form).
    pub async fn item_async(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                format!(
                    "a Tensor with {} elements cannot be converted to Scalar",
                    self.numel()
                ),
            ));
        }
        crate::onnx::trace::host_read(self, "item");
        Ok(self.host_storage_async().await?.to_f64_vec()[0])
    }
    /// The value of a one-element tensor, as f64 (blocking).
    pub fn item(&self) -> Result<f64> {
        block_on(self.item_async())
    }
    /// The value of a one-element integer or bool tensor, exactly (PyTorch's `int(t.item())`
    /// for int64 values past 2^53, which [`Tensor::item`]'s f64 rounds).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let t = Tensor::scalar(i64::MAX, &Device::Cpu)?;
    /// assert_eq!(t.item_i64()?, i64::MAX);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn item_i64(&self) -> Result<i64> {
        if self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: "item_i64",
                dtype: self.dtype(),
                hint: "; use item() for floating-point tensors",
            });
        }
        self.item()?; // the element-count check
        let host = block_on(self.host_storage_async())?;
        crate::backend::cpu::with_cpu!(&host, v, _T => Ok(crate::dtype::Elem::to_i64(v[0])))
    }
    /// All elements widened to f64 (any dtype).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        crate::onnx::trace::host_read(self, "to_f64_vec");
        Ok(block_on(self.host_storage_async())?.to_f64_vec())
    }

    /// Contiguous host copy of the elements.
    pub(crate) async fn host_storage_async(&self) -> Result<CpuStorage> {
        let t = self.contiguous()?;
        let s = t.storage().clone();
        match s {
            Storage::Cpu(c) => {
                let l = t.layout();
                Ok(crate::backend::cpu::contiguous(&c, l))
            }
            Storage::Gpu(g) => {
                // contiguous() gave offset 0 unless the view was already contiguous. A zero-size
                // view reads nothing, wherever it starts (a slice of an empty tensor may start
                // past its buffer's end).
                let off = if t.numel() == 0 {
                    0
                } else {
                    t.storage_offset()
                };
                let full = gpu::download(&g, off + t.numel()).await?;
                Ok(crate::backend::cpu::contiguous(
                    &full,
                    &crate::shape::Layout {
                        offset: off,
                        ..crate::shape::Layout::contiguous(t.shape())
                    },
                ))
            }
        }
    }

    /// A contiguous tensor with the same values (self if already contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.contiguous_untraced(),
            |r, out| crate::onnx::forms::identity(r, self, out),
        )
    }

    /// [`contiguous`](Self::contiguous) itself; the public function records it for ONNX export.
    fn contiguous_untraced(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let _p = crate::profiler::op("contiguous", &[self]);
        self.copy_as(self.dtype(), "contiguous")
    }

    /// A contiguous copy in new storage, differentiable: PyTorch's `x.clone()` (Rust's `clone`
    /// gives another handle to the same tensor, like a second Python reference).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([2], &Device::Cpu)?.requires_grad_(true);
    /// let (alias, copy) = (x.clone(), x.copy()?);
    /// assert!(alias.shares_storage_with(&x) && !copy.shares_storage_with(&x));
    /// copy.sum_all()?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![1.0, 1.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    #[doc(alias = "clone")]
    pub fn copy(&self) -> Result<Tensor> {
        self.copy_as(self.dtype(), "clone")
    }

    /// Contiguous and starting at offset 0 of its storage (what the backend's dense kernels read).
    pub(crate) fn dense(&self) -> Result<Tensor> {
        if self.is_contiguous() && self.storage_offset() == 0 {
            return Ok(self.clone());
        }
        self.copy_as(self.dtype(), "contiguous")
    }

    /// A fresh contiguous copy converted to `dtype` (differentiable), recorded as `name`.
    pub(crate) fn copy_as(&self, dtype: DType, name: &'static str) -> Result<Tensor> {
        let ordinal = match self.device() {
            Device::Gpu(n) => n,
            Device::Cpu => 0,
        };
        let s = self.storage().cast(self.layout(), dtype, ordinal)?;
        let out = Tensor::from_storage(s, self.shape(), self.device());
        let dt = self.dtype();
        Ok(crate::autograd::record(out, name, &[self], dt, |dt, g| {
            Ok(vec![Some(g.to_dtype(*dt)?)])
        }))
    }

    /// Convert to `dtype` (a copy; self if the dtype already matches).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.to_dtype_untraced(dtype),
            |r, out| crate::onnx::forms::cast(r, self, out),
        )
    }

    /// [`to_dtype`](Self::to_dtype) itself; the public function records it for ONNX export.
    fn to_dtype_untraced(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let _p = crate::profiler::op("to", &[self]);
        if !dtype.is_float() || !self.dtype().is_float() {
            // Conversions to or from integers are not differentiable.
            let _g = crate::no_grad();
            return self.copy_as(dtype, "to_dtype");
        }
        self.copy_as(dtype, "to_dtype")
    }

    /// Copy to `device` (self if already there). Differentiable.
    pub fn to(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let _p = crate::profiler::op("to", &[self]);
        block_on(self.to_async(device))
    }

    /// [`Tensor::to`] that awaits the GPU instead of blocking: the form for moving a GPU tensor
    /// off its device in the browser.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::ones([3], &Device::best())?;
    /// let host = pollster::block_on(x.to_async(&Device::Cpu))?; // `.await` in async code
    /// assert_eq!(host.to_vec::<f32>()?, vec![1.0; 3]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub async fn to_async(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let host = self.host_storage_async().await?;
        let s = super::create::place(host, device)?;
        let out = Tensor::from_storage(s, self.shape(), *device);
        let back = self.device();
        Ok(crate::autograd::record(out, "to", &[self], back, |d, g| {
            Ok(vec![Some(g.to(d)?)])
        }))
    }

    /// True if any element is NaN or infinite (one device-side reduction, one scalar read).
    pub fn has_non_finite(&self) -> Result<bool> {
        let _g = crate::no_grad();
        let s = self.to_dtype(DType::F32)?.abs()?.sum_all()?;
        Ok(!s.item()?.is_finite())
    }
}

/// Block on a future: native only. In the browser blocking would hang the page, so the blocking
/// API answers with an error that points to the async form.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn block_on<T, F: std::future::Future<Output = Result<T>>>(f: F) -> Result<T> {
    // Host data is ready at once, so the first poll finishes; anything that would wait for the GPU
    // gets an error pointing to the async form instead of hanging the page.
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    fn noop(_: *const ()) {}
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(Error::WouldBlock(
            "reading GPU data back cannot block in the browser: use to_vec_async().await / item_async().await".into(),
        )),
    }
}
