//! Creating tensors.

use super::Tensor;
use crate::backend::cpu::{CpuElem, CpuStorage};
use crate::backend::{gpu, Storage};
use crate::shape::numel;
use crate::{DType, Device, Error, Result};

/// Place host data on `device`.
pub(crate) fn place(data: CpuStorage, device: &Device) -> Result<Storage> {
    match device {
        Device::Cpu => Ok(Storage::Cpu(data)),
        Device::Gpu(n) => {
            let ctx = gpu::context(*n)?;
            Ok(Storage::Gpu(gpu::upload(&ctx, *n, &data)?))
        }
    }
}

impl Tensor {
    /// A tensor holding `data` with `shape` (row-major), on `device`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let t = Tensor::from_vec(vec![1i32, 2, 3], [3], &Device::Cpu)?;
    /// assert_eq!(t.dtype(), wgtorch::DType::I32);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn from_vec<T: CpuElem>(
        data: Vec<T>,
        shape: impl AsRef<[usize]>,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.as_ref();
        if numel(shape) != data.len() {
            return Err(Error::shape(
                "from_vec",
                format!(
                    "shape {shape:?} needs {} elements but {} were given",
                    numel(shape),
                    data.len()
                ),
            ));
        }
        Ok(Tensor::from_storage(
            place(T::wrap(data), device)?,
            shape,
            *device,
        ))
    }
    /// Like [`Tensor::from_vec`], copying a slice.
    pub fn from_slice<T: CpuElem>(
        data: &[T],
        shape: impl AsRef<[usize]>,
        device: &Device,
    ) -> Result<Tensor> {
        Tensor::from_vec(data.to_vec(), shape, device)
    }
    /// A 0-d tensor.
    pub fn scalar<T: CpuElem>(v: T, device: &Device) -> Result<Tensor> {
        Tensor::from_vec(vec![v], [], device)
    }
    /// Values given as f64, converted to `dtype`.
    pub fn from_f64(
        data: &[f64],
        shape: impl AsRef<[usize]>,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.as_ref();
        if numel(shape) != data.len() {
            return Err(Error::shape(
                "from_f64",
                format!(
                    "shape {shape:?} needs {} elements but {} were given",
                    numel(shape),
                    data.len()
                ),
            ));
        }
        Ok(Tensor::from_storage(
            place(CpuStorage::from_f64(dtype, data), device)?,
            shape,
            *device,
        ))
    }
    /// `shape` filled with `value`, of `dtype`.
    pub fn full_dtype(
        shape: impl AsRef<[usize]>,
        value: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.as_ref();
        let n = numel(shape);
        let s = match device {
            Device::Cpu => Storage::Cpu(CpuStorage::full(dtype, n, value)),
            Device::Gpu(o) => {
                let ctx = gpu::context(*o)?;
                Storage::Gpu(gpu::full(&ctx, *o, n, value, dtype)?)
            }
        };
        Ok(Tensor::from_storage(s, shape, *device))
    }
    /// f32 tensor filled with `value`.
    pub fn full(shape: impl AsRef<[usize]>, value: f64, device: &Device) -> Result<Tensor> {
        Tensor::full_dtype(shape, value, DType::F32, device)
    }
    /// f32 zeros.
    pub fn zeros(shape: impl AsRef<[usize]>, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, device)
    }
    /// f32 ones.
    pub fn ones(shape: impl AsRef<[usize]>, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, device)
    }
    /// `[start, end)` in steps of `step`, f32 (PyTorch's `arange` with float arguments).
    pub fn arange(start: f64, end: f64, step: f64, device: &Device) -> Result<Tensor> {
        Tensor::arange_dtype(start, end, step, DType::F32, device)
    }
    /// `arange` with an explicit dtype (I32 for index ranges).
    pub fn arange_dtype(
        start: f64,
        end: f64,
        step: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        if step == 0.0 || (end - start) * step < 0.0 {
            return Err(Error::arg("arange", format!("upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})")));
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        gpu::check_alloc(device, "arange", n, dtype)?;
        let v: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        Tensor::from_f64(&v, [n], dtype, device)
    }
    /// The n×n identity.
    pub fn eye(n: usize, device: &Device) -> Result<Tensor> {
        gpu::check_alloc(device, "eye", n.saturating_mul(n), DType::F32)?;
        let mut v = vec![0f32; n * n];
        for i in 0..n {
            v[i * n + i] = 1.0;
        }
        Tensor::from_vec(v, [n, n], device)
    }
    /// Uniform in [0, 1), from the default generator.
    pub fn rand(shape: impl AsRef<[usize]>, device: &Device) -> Result<Tensor> {
        let n = numel(shape.as_ref());
        gpu::check_alloc(device, "rand", n, DType::F32)?;
        let v: Vec<f32> =
            crate::rng::with_default_generator(|g| (0..n).map(|_| g.uniform() as f32).collect());
        Tensor::from_vec(v, shape, device)
    }
    /// Standard normal, from the default generator.
    pub fn randn(shape: impl AsRef<[usize]>, device: &Device) -> Result<Tensor> {
        let n = numel(shape.as_ref());
        gpu::check_alloc(device, "randn", n, DType::F32)?;
        let v: Vec<f32> =
            crate::rng::with_default_generator(|g| (0..n).map(|_| g.normal() as f32).collect());
        Tensor::from_vec(v, shape, device)
    }
    /// Same shape, dtype and device, filled with `value`.
    pub fn full_like(&self, value: f64) -> Result<Tensor> {
        Tensor::full_dtype(self.shape(), value, self.dtype(), &self.device())
    }
    /// Zeros like `self`.
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.full_like(0.0)
    }
    /// Ones like `self`.
    pub fn ones_like(&self) -> Result<Tensor> {
        self.full_like(1.0)
    }
    /// Uniform like `self` (f32 then converted).
    pub fn rand_like(&self) -> Result<Tensor> {
        Tensor::rand(self.shape(), &self.device())?.to_dtype(self.dtype())
    }
    /// Standard normal like `self`.
    pub fn randn_like(&self) -> Result<Tensor> {
        Tensor::randn(self.shape(), &self.device())?.to_dtype(self.dtype())
    }
    /// A 0-d tensor of `value` with this tensor's dtype and device.
    pub(crate) fn scalar_like(&self, value: f64) -> Result<Tensor> {
        Tensor::full_dtype([], value, self.dtype(), &self.device())
    }
}
