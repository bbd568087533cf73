//! Creating tensors.

use super::Tensor;
use crate::backend::cpu::{self, CpuElem, CpuStorage};
use crate::backend::{gpu, Storage};
use crate::dtype::Elem;
use crate::error::InOp;
use crate::shape::{checked_numel, IntoShape, MAX_NUMEL};
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

/// Check that a tensor of `shape` and `dtype` can exist on `device` before anything is allocated:
/// the element count in checked arithmetic ("shape [..] has too many elements") and, on a GPU, the
/// adapter's buffer limit, so host data for a GPU tensor is never generated past it. Returns the
/// element count.
fn admit(op: &'static str, shape: &[usize], dtype: DType, device: &Device) -> Result<usize> {
    let n = checked_numel(op, shape)?;
    gpu::check_alloc(device, op, n, dtype)?;
    Ok(n)
}

/// `n` values from `f(i)`, in a vector reserved fallibly.
fn generate<T>(op: &'static str, n: usize, f: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut v = cpu::try_vec(op, n)?;
    v.extend((0..n).map(f));
    Ok(v)
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
        shape: impl IntoShape,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = &shape.to_sizes("from_vec")?;
        check_len("from_vec", shape, data.len())?;
        Ok(Tensor::from_storage(
            place(T::wrap(data), device)?,
            shape,
            *device,
        ))
    }
    /// Like [`Tensor::from_vec`], copying a slice.
    pub fn from_slice<T: CpuElem>(
        data: &[T],
        shape: impl IntoShape,
        device: &Device,
    ) -> Result<Tensor> {
        let mut v = cpu::try_vec("from_slice", data.len())?;
        v.extend_from_slice(data);
        Tensor::from_vec(v, shape, device)
    }
    /// A 0-d tensor.
    pub fn scalar<T: CpuElem>(v: T, device: &Device) -> Result<Tensor> {
        Tensor::from_vec(vec![v], [], device)
    }
    /// Values given as f64, converted to `dtype`.
    pub fn from_f64(
        data: &[f64],
        shape: impl IntoShape,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = &shape.to_sizes("from_f64")?;
        check_len("from_f64", shape, data.len())?;
        Ok(Tensor::from_storage(
            place(CpuStorage::from_f64("from_f64", dtype, data)?, device)?,
            shape,
            *device,
        ))
    }
    /// `shape` filled with `value`, of `dtype`.
    pub fn full_dtype(
        shape: impl IntoShape,
        value: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = &shape.to_sizes("full")?;
        let n = checked_numel("full", shape)?;
        let s = match device {
            Device::Cpu => Storage::Cpu(CpuStorage::full("full", dtype, n, value)?),
            Device::Gpu(o) => {
                let ctx = gpu::context(*o)?;
                Storage::Gpu(gpu::full(&ctx, *o, n, value, dtype)?)
            }
        };
        Ok(Tensor::from_storage(s, shape, *device))
    }
    /// f32 tensor filled with `value`. Like every constructor, takes the shape as any
    /// [`IntoShape`]: `[2, 3]`, `&[2, 3]`, `x.shape()`, a `Vec`, `5` or `[]` (0-d).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let t = Tensor::full([2, 3], 7.0, &Device::Cpu)?;
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert!(Tensor::full([-1, 3], 7.0, &Device::Cpu).is_err()); // negative dimension
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn full(shape: impl IntoShape, value: f64, device: &Device) -> Result<Tensor> {
        Tensor::full_dtype(shape, value, DType::F32, device)
    }
    /// f32 zeros.
    pub fn zeros(shape: impl IntoShape, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, device).in_op("zeros")
    }
    /// f32 ones.
    pub fn ones(shape: impl IntoShape, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, device).in_op("ones")
    }
    /// `[start, end)` in steps of `step`, f32 (PyTorch's `arange` with float arguments).
    pub fn arange(start: f64, end: f64, step: f64, device: &Device) -> Result<Tensor> {
        Tensor::arange_dtype(start, end, step, DType::F32, device)
    }
    /// `arange` with an explicit dtype (I32 for index ranges). Non-finite bounds, a zero step, a
    /// step of the wrong sign and a length past [`crate::shape::MAX_NUMEL`] are errors, worded as
    /// PyTorch words them.
    pub fn arange_dtype(
        start: f64,
        end: f64,
        step: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let bad = |msg: String| Err(Error::arg("arange", msg));
        if !start.is_finite() || !end.is_finite() {
            return bad(format!("unsupported range: {start} -> {end}"));
        }
        if step == 0.0 || step.is_nan() {
            return bad(format!("step must be nonzero (got {step})"));
        }
        if (end - start) * step < 0.0 {
            return bad(format!("upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"));
        }
        let len = ((end - start) / step).ceil();
        if len > MAX_NUMEL as f64 {
            return bad(format!("invalid size, possible overflow? (start={start}, end={end}, step={step}: {len} elements)"));
        }
        let n = admit("arange", &[len as usize], dtype, device)?;
        let v = cpu::with_dtype!(dtype, T => T::wrap(generate("arange", n, |i| {
            T::from_f64(start + i as f64 * step)
        })?));
        Ok(Tensor::from_storage(place(v, device)?, &[n], *device))
    }
    /// `steps` values evenly spaced from `start` to `end`, both included: `torch.linspace`
    /// (float32, PyTorch's default dtype).
    ///
    /// ```
    /// use wgtorch::{DType, Device, Tensor};
    /// let dev = Device::Cpu;
    /// assert_eq!(Tensor::linspace(0.0, 1.0, 5, &dev)?.to_vec::<f32>()?, [0.0, 0.25, 0.5, 0.75, 1.0]);
    /// let i = Tensor::linspace_dtype(0.0, 10.0, 4, DType::I64, &dev)?; // dtype=torch.int64
    /// assert_eq!(i.to_vec::<i64>()?, [0, 3, 6, 10]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn linspace(start: f64, end: f64, steps: usize, device: &Device) -> Result<Tensor> {
        Tensor::linspace_dtype(start, end, steps, DType::F32, device)
    }
    /// [`Tensor::linspace`] in `dtype`. PyTorch's formula: `step = (end - start) / (steps - 1)`,
    /// the first half `start + i * step` and the second `end - (steps - 1 - i) * step` (so the
    /// last value is `end` exactly; one step gives `start`), computed in f64 and rounded to
    /// `dtype` (integers truncate, as PyTorch's). Bool is refused.
    pub fn linspace_dtype(
        start: f64,
        end: f64,
        steps: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        if dtype == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "linspace",
                dtype,
                hint: "",
            });
        }
        let n = admit("linspace", &[steps], dtype, device)?;
        let step = if n > 1 {
            (end - start) / (n - 1) as f64
        } else {
            0.0
        };
        let half = n / 2;
        let at = move |i: usize| {
            if i < half || n == 1 {
                start + step * i as f64
            } else {
                end - step * (n - 1 - i) as f64
            }
        };
        let v = cpu::with_dtype!(dtype, T => T::wrap(generate("linspace", n, |i| {
            T::from_f64(at(i))
        })?));
        Ok(Tensor::from_storage(place(v, device)?, &[n], *device))
    }
    /// The n×n identity.
    pub fn eye(n: usize, device: &Device) -> Result<Tensor> {
        let len = admit("eye", &[n, n], DType::F32, device)?;
        let v = generate("eye", len, |i| if i % (n + 1) == 0 { 1f32 } else { 0.0 })?;
        Tensor::from_vec(v, [n, n], device)
    }
    /// Uniform in [0, 1), from the default generator.
    pub fn rand(shape: impl IntoShape, device: &Device) -> Result<Tensor> {
        Tensor::rand_dtype(&shape.to_sizes("rand")?, DType::F32, device)
    }
    /// Uniform in [0, 1) of a floating `dtype`, drawn at that type's precision (as PyTorch's
    /// `uniform_`: a draw rounded to a coarser type could land on 1). f32 keeps the stream
    /// `rand` has always had, with the draws that round up to 1 kept just below it.
    fn rand_dtype(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        let n = admit("rand", shape, dtype, device)?;
        // Random bits per draw: the type's significand.
        let bits = match dtype {
            DType::F16 => 11,
            DType::BF16 => 8,
            DType::F32 => {
                let below_one = 1.0 - f32::EPSILON / 2.0;
                let v = crate::rng::with_default_generator(|g| {
                    generate("rand", n, |_| (g.uniform() as f32).min(below_one))
                })?;
                return Tensor::from_vec(v, shape, device);
            }
            DType::F64 => 53,
            DType::Bool | DType::I32 | DType::I64 => {
                return Err(Error::UnsupportedDType {
                    op: "rand",
                    dtype,
                    hint: " (uniform draws in [0, 1) need a floating dtype; use randint_like)",
                })
            }
        };
        let scale = 1.0 / (1u64 << bits) as f64;
        let v = crate::rng::with_default_generator(|g| {
            generate("rand", n, |_| (g.next_u64() >> (64 - bits)) as f64 * scale)
        })?;
        Tensor::from_f64(&v, shape, dtype, device)
    }
    /// Standard normal, from the default generator.
    pub fn randn(shape: impl IntoShape, device: &Device) -> Result<Tensor> {
        let shape = shape.to_sizes("randn")?;
        let n = admit("randn", &shape, DType::F32, device)?;
        let v =
            crate::rng::with_default_generator(|g| generate("randn", n, |_| g.normal() as f32))?;
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
    /// Uniform in [0, 1) with `self`'s shape, dtype and device (torch.rand_like), drawn at the
    /// dtype's precision, so a half draw is never 1. Integer and bool dtypes are an error.
    pub fn rand_like(&self) -> Result<Tensor> {
        Tensor::rand_dtype(self.shape(), self.dtype(), &self.device())
    }
    /// Standard normal with `self`'s shape, dtype and device (torch.randn_like; drawn as f32,
    /// then converted). Integer and bool dtypes are an error, as in PyTorch.
    pub fn randn_like(&self) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: "randn",
                dtype: self.dtype(),
                hint: " (normal draws need a floating dtype)",
            });
        }
        Tensor::randn(self.shape(), &self.device())?.to_dtype(self.dtype())
    }
    /// `shape` filled with `value`, with this tensor's dtype and device (torch.Tensor.new_full).
    ///
    /// ```
    /// use wgtorch::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu)?;
    /// let y = x.new_full([2, 3], 7.0)?;
    /// assert_eq!((y.shape(), y.dtype()), (&[2usize, 3][..], DType::I32));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn new_full(&self, shape: impl IntoShape, value: f64) -> Result<Tensor> {
        Tensor::full_dtype(shape, value, self.dtype(), &self.device()).in_op("new_full")
    }
    /// Zeros of `shape` with this tensor's dtype and device (torch.Tensor.new_zeros).
    pub fn new_zeros(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.new_full(shape, 0.0).in_op("new_zeros")
    }
    /// Ones of `shape` with this tensor's dtype and device (torch.Tensor.new_ones).
    pub fn new_ones(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.new_full(shape, 1.0).in_op("new_ones")
    }
    /// A tensor of `shape` with this tensor's dtype and device whose values are unspecified
    /// (torch.Tensor.new_empty); here they are zeros, as every new buffer is initialised.
    pub fn new_empty(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.new_full(shape, 0.0).in_op("new_empty")
    }
    /// A 0-d integer tensor of `dtype` holding `value` exactly (int64 past 2^53 included; for
    /// int32 the caller has checked that it fits).
    pub(crate) fn scalar_int(value: i64, dtype: DType, device: &Device) -> Result<Tensor> {
        match dtype {
            DType::I64 => Tensor::scalar(value, device),
            DType::I32 | DType::Bool | DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                Tensor::full_dtype([], value as f64, dtype, device)
            }
        }
    }
    /// A 0-d tensor of `value` with this tensor's dtype and device.
    pub(crate) fn scalar_like(&self, value: f64) -> Result<Tensor> {
        Tensor::full_dtype([], value, self.dtype(), &self.device())
    }
}

/// `shape` must hold exactly `len` elements (counted without wrapping).
fn check_len(op: &'static str, shape: &[usize], len: usize) -> Result<()> {
    let n = checked_numel(op, shape)?;
    if n != len {
        return Err(Error::shape(
            op,
            format!("shape {shape:?} needs {n} elements but {len} were given"),
        ));
    }
    Ok(())
}
