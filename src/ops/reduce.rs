//! Reductions: sum, mean, amax/amin, max/min with indices, argmax/argmin, var/std, logsumexp,
//! prod, vector_norm, cumsum, softmax and log_softmax.

use crate::autograd::{is_grad_enabled, record, Saved};
use crate::error::InOp;
use crate::shape::{wrap_dim, IntoShape};
use crate::{DType, Error, Result, Tensor};

op_enum! {
    /// The reductions kernels implement over the last axis of `[rows, n]`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ReduceOp {
        /// Sum (`torch.sum`).
        Sum => "sum",
        /// Product (`torch.prod`).
        Prod => "prod",
        /// Largest value, NaN-propagating (`torch.amax`).
        Max => "amax",
        /// Smallest value, NaN-propagating (`torch.amin`).
        Min => "amin",
        /// Index of the first largest value (`torch.argmax`).
        ArgMax => "argmax",
        /// Index of the first smallest value (`torch.argmin`).
        ArgMin => "argmin",
    }
}

impl ReduceOp {
    /// The dtype a kernel writes for input dtype `x`: indices ([`DType::INDEX`]) for the arg
    /// ops; f32 for sums and products of half types, which accumulate in f32 on every device
    /// (PyTorch's accumulate type) and are rounded once by the caller, so partial sums past
    /// 65504 do not overflow. (The op layer converts integer inputs of sums and products to
    /// int64 first, PyTorch's result type for them.)
    pub fn out_dtype(self, x: DType) -> DType {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::INDEX,
            ReduceOp::Sum | ReduceOp::Prod if matches!(x, DType::F16 | DType::BF16) => DType::F32,
            _ => x,
        }
    }
}

/// Normalise a dim list (empty = all dims), sorted and deduplicated.
pub(crate) fn wrap_dims(op: &'static str, dims: &[isize], ndim: usize) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok((0..ndim).collect());
    }
    let mut v = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = wrap_dim(op, d, ndim)?;
        if v.contains(&w) {
            return Err(Error::arg(
                op,
                format!("dim {w} appears multiple times in the list of dims"),
            ));
        }
        v.push(w);
    }
    v.retain(|&d| d < ndim);
    v.sort();
    Ok(v)
}

fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, &s) in shape.iter().enumerate() {
        if dims.contains(&i) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(s);
        }
    }
    out
}

impl Tensor {
    /// Reduce `dims` with a kernel (no autograd): moves the reduced dims last, then reduces rows.
    fn reduce_raw(&self, op: ReduceOp, dims: &[usize], keepdim: bool) -> Result<Tensor> {
        let nd = self.ndim();
        let mut perm: Vec<usize> = (0..nd).filter(|d| !dims.contains(d)).collect();
        perm.extend(dims);
        let n: usize = dims.iter().map(|&d| self.shape()[d]).product();
        let rows: usize = self.numel() / n.max(1);
        let rows = if n == 0 {
            (0..nd)
                .filter(|d| !dims.contains(d))
                .map(|d| self.shape()[d])
                .product()
        } else {
            rows
        };
        let out_shape = reduced_shape(self.shape(), dims, keepdim);
        if n == 0
            && matches!(
                op,
                ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
            )
            && rows > 0
        {
            return Err(Error::arg(
                op.name(),
                format!(
                    "Expected reduction dim to have non-zero size (input shape {:?})",
                    self.shape()
                ),
            ));
        }
        // Reduced dims that end the shape of a contiguous f32/f64 tensor are rows already: reduce
        // them in place first, so only the (smaller) partial result is permuted. Half types take
        // one pass so that they round once.
        let mut k = nd;
        while k > 0 && dims.contains(&(k - 1)) {
            k -= 1;
        }
        let value_op = matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min);
        if value_op
            && matches!(self.dtype(), DType::F32 | DType::F64)
            && self.is_contiguous()
            && n > 0
            && k > 0
            && k < nd
            && dims.iter().any(|&d| d < k)
        {
            let tail: usize = self.shape()[k..].iter().product();
            let x = self.detach().dense()?;
            let s = x.storage().reduce_rows(op, self.numel() / tail, tail)?;
            let partial = Tensor::from_storage(s, &self.shape()[..k], self.device());
            let rest: Vec<usize> = dims.iter().copied().filter(|&d| d < k).collect();
            return partial.reduce_raw(op, &rest, false)?.reshape(&out_shape);
        }
        // A reduced dim that is innermost in the memory of a dense CPU tensor at offset 0 (a
        // gradient that arrives transposed, as attention's key gradient does): its runs are rows
        // of the storage, reduced in place first; the partial keeps the other dims' memory
        // order (strides divided by the run's length), and the rest reduce from there (the
        // partials rounded to the dtype once, as the path above does).
        if value_op
            && matches!(self.dtype(), DType::F32 | DType::F64)
            && !self.device().is_gpu()
            && n > 0
            && !self.is_contiguous()
            && self.storage_offset() == 0
            && self.layout().is_non_overlapping_and_dense()
        {
            let (shape, stride) = (self.shape(), self.stride());
            if let Some(&d) = dims.iter().find(|&&d| stride[d] == 1 && shape[d] > 1) {
                let run = shape[d];
                let s = self.storage().reduce_rows(op, self.numel() / run, run)?;
                let keep: Vec<usize> = (0..nd).filter(|&k| k != d).collect();
                let layout = crate::shape::Layout {
                    shape: keep.iter().map(|&k| shape[k]).collect(),
                    strides: keep.iter().map(|&k| stride[k] / run).collect(),
                    offset: 0,
                };
                let partial = Tensor::from_storage(s, &[self.numel() / run], self.device())
                    .with_layout(layout);
                let rest: Vec<usize> = dims
                    .iter()
                    .filter(|&&k| k != d)
                    .map(|&k| if k > d { k - 1 } else { k })
                    .collect();
                if rest.is_empty() {
                    // Contiguous, as every reduction's output is.
                    return partial.dense()?.reshape(&out_shape);
                }
                return partial.reduce_raw(op, &rest, false)?.reshape(&out_shape);
            }
        }
        // Sums over dims whose kept dims are contiguous in memory (a bias gradient, also one
        // seen through a transpose, as attention's sequence-first projections give it, or a
        // slice of a wider one, as its packed q/k/v projection's): column sums over the
        // storage, read row by row, instead of a transposing copy.
        if op == ReduceOp::Sum && n > 0 && !self.device().is_gpu() {
            let (shape, stride) = (self.shape(), self.stride());
            let kept: Vec<usize> = (0..nd)
                .filter(|d| !dims.contains(d) && shape[*d] != 1)
                .collect();
            // The kept dims are contiguous, row-major among themselves...
            let mut cols = 1;
            let inner = kept.iter().rev().all(|&d| {
                let at = stride[d] == cols;
                cols *= shape[d];
                at
            });
            // ...and the summed ones, outermost in memory first, are one run of rows
            // `row_stride` apart (the order of the terms does not matter to a sum).
            let mut summed: Vec<usize> = dims.iter().copied().filter(|&d| shape[d] != 1).collect();
            summed.sort_by_key(|&d| std::cmp::Reverse(stride[d]));
            let row_stride = summed.last().map_or(0, |&d| stride[d]);
            let rows_uniform = summed
                .windows(2)
                .all(|w| stride[w[0]] == shape[w[1]] * stride[w[1]]);
            if inner && rows_uniform && !kept.is_empty() {
                if let crate::backend::Storage::Cpu(c) = &*self.storage() {
                    let off = self.layout().offset;
                    if let Some(s) = crate::backend::cpu::sum_cols(c, off, n, cols, row_stride) {
                        let s = crate::backend::Storage::Cpu(s);
                        let t = Tensor::from_storage(s, &[cols], self.device());
                        return t.reshape(&out_shape);
                    }
                }
            }
        }
        let x = self.detach().permute_raw(&perm).dense()?;
        let s = x.storage().reduce_rows(op, rows, n)?;
        Ok(Tensor::from_storage(s, &out_shape, self.device()))
    }

    /// Sum over `dims` (empty: all), keeping them as size 1 if `keepdim`. Half types accumulate
    /// in f32 and round once; integer and bool sums are int64, as PyTorch's (wrapping past
    /// int64 on the CPU; on a GPU, where int64 is held as int32, a sum past int32 is an error,
    /// see [`DType::I64`]). The sum of no elements is 0.
    ///
    /// ```
    /// use wgtorch::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![i32::MAX, 1], [2], &Device::Cpu)?;
    /// let s = x.sum_all()?;
    /// assert_eq!(s.dtype(), DType::I64);
    /// assert_eq!(s.to_vec::<i64>()?, vec![i32::MAX as i64 + 1]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn sum_dims(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let axes = dims.to_dims("sum").ok();
        crate::onnx::trace::traced(
            || self.sum_dims_untraced(dims, keepdim),
            |r, out| {
                crate::onnx::forms::reduce(r, "ReduceSum", self, axes.as_deref(), keepdim, out)
            },
        )
    }

    /// [`sum_dims`](Self::sum_dims) itself; the public function records it for ONNX export.
    fn sum_dims_untraced(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let _p = crate::profiler::op("sum", &[self]);
        let dims = &dims.to_dims("sum")?;
        self.sum_scaled("sum", dims, keepdim, false)
    }
    /// Sum (or mean, when `mean`) over `dims`: reduced in the kernel's accumulation type
    /// ([`ReduceOp::out_dtype`]), divided by the count there, then rounded to the input's dtype.
    fn sum_scaled(
        &self,
        op: &'static str,
        dims: &[isize],
        keepdim: bool,
        mean: bool,
    ) -> Result<Tensor> {
        let d = wrap_dims(op, dims, self.ndim())?;
        if !self.dtype().is_float() {
            let _g = crate::no_grad();
            // A bool sum counts at most numel ones: below 2^31 the int32 kernel is exact, and on
            // a GPU it stays on the device (int64 sums there run on the host, see DType::I64).
            if self.dtype() == DType::Bool
                && self.device().is_gpu()
                && self.numel() <= i32::MAX as usize
            {
                let count = self
                    .to_dtype(DType::I32)?
                    .reduce_raw(ReduceOp::Sum, &d, keepdim)?;
                return count.to_dtype(DType::I64);
            }
            return self
                .to_dtype(DType::I64)?
                .reduce_raw(ReduceOp::Sum, &d, keepdim);
        }
        let x = crate::amp::upper(self)?;
        let n: usize = d.iter().map(|&i| x.shape()[i]).product();
        let out = {
            let _g = crate::no_grad();
            let acc = x.reduce_raw(ReduceOp::Sum, &d, keepdim)?;
            // True division: the mean of no elements is 0 / 0 = NaN, as PyTorch's.
            let acc = if mean { acc.div_scalar(n as f64)? } else { acc };
            acc.to_dtype(x.dtype())?
        };
        let saved = (x.shape().to_vec(), d, keepdim, mean.then_some(n));
        Ok(record(out, op, &[&x], saved, |s, g| {
            let (shape, d, keepdim, mean_of) = s;
            let g = if *keepdim {
                g.clone()
            } else {
                g.unsqueeze_dims(d)?
            };
            let g = match mean_of {
                Some(n) => g.div_scalar(*n as f64)?,
                None => g,
            };
            Ok(vec![Some(g.expand(shape)?)])
        }))
    }
    /// Sum of all elements (0-d).
    pub fn sum_all(&self) -> Result<Tensor> {
        self.sum_dims([], false)
    }
    /// Mean over `dims` (empty: all); half types accumulate in f32 (the mean of 100,000 f16
    /// ones is 1, not inf); the mean of no elements is NaN.
    pub fn mean_dims(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let axes = dims.to_dims("mean").ok();
        crate::onnx::trace::traced(
            || self.mean_dims_untraced(dims, keepdim),
            |r, out| {
                crate::onnx::forms::reduce(r, "ReduceMean", self, axes.as_deref(), keepdim, out)
            },
        )
    }

    /// [`mean_dims`](Self::mean_dims) itself; the public function records it for ONNX export.
    fn mean_dims_untraced(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let _p = crate::profiler::op("mean", &[self]);
        let dims = &dims.to_dims("mean")?;
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: "mean",
                dtype: self.dtype(),
                hint: "; mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype: use .to_dtype(DType::F32)",
            });
        }
        self.sum_scaled("mean", dims, keepdim, true)
    }
    /// Mean of all elements.
    pub fn mean_all(&self) -> Result<Tensor> {
        self.mean_dims([], false)
    }
    /// Maximum over `dims`; the gradient is split evenly among ties (PyTorch's amax).
    pub fn amax(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("amax")?;
        crate::onnx::trace::traced(
            || self.extreme(ReduceOp::Max, dims, keepdim),
            |r, out| crate::onnx::forms::reduce(r, "ReduceMax", self, Some(dims), keepdim, out),
        )
    }
    /// Minimum over `dims`.
    pub fn amin(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("amin")?;
        crate::onnx::trace::traced(
            || self.extreme(ReduceOp::Min, dims, keepdim),
            |r, out| crate::onnx::forms::reduce(r, "ReduceMin", self, Some(dims), keepdim, out),
        )
    }
    fn extreme(&self, op: ReduceOp, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let d = wrap_dims(op.name(), dims, self.ndim())?;
        let out = self.reduce_raw(op, &d, keepdim)?;
        let saved = (Saved::new(self), Saved::output(&out, op.name()), d, keepdim);
        Ok(record(out, op.name(), &[self], saved, |s, g| {
            let (x, y, d, keepdim) = s;
            let (x, y) = (x.get()?, y.get()?);
            let (g, y) = if *keepdim {
                (g.clone(), y)
            } else {
                (g.unsqueeze_dims(d)?, y.unsqueeze_dims(d)?)
            };
            let mask = x.eq(&y)?.to_dtype(x.dtype())?;
            let count = mask.sum_dims(d.iter().map(|&i| i as isize).collect::<Vec<_>>(), true)?;
            Ok(vec![Some(mask.div(&count)?.mul(&g)?)])
        }))
    }
    /// `(values, indices)` of the maximum along `dim` (torch.max with dim); the gradient goes to
    /// the index PyTorch picks (the first maximum).
    pub fn max_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Max, ReduceOp::ArgMax, dim, keepdim)
    }
    /// `(values, indices)` of the minimum along `dim`.
    pub fn min_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Min, ReduceOp::ArgMin, dim, keepdim)
    }
    fn extreme_dim(
        &self,
        vop: ReduceOp,
        iop: ReduceOp,
        dim: isize,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(vop.name(), dim, self.ndim())?;
        if self.ndim() == 0 {
            // PyTorch: dim 0 / -1 of a 0-d tensor is its one element (index 0).
            let (v, i) = self.reshape([1])?.extreme_dim(vop, iop, 0, false)?;
            return Ok((v.reshape([])?, i.reshape([])?));
        }
        let idx = self.reduce_raw(iop, &[d], true)?;
        let vals = self.detach().gather(d as isize, &idx)?;
        let saved = (self.shape().to_vec(), Saved::new(&idx), d);
        let vals = record(vals, vop.name(), &[self], saved, |(shape, idx, d), g| {
            let z = Tensor::full_dtype(shape, 0.0, g.dtype(), &g.device())?;
            Ok(vec![Some(z.scatter_add(*d as isize, &idx.get()?, g)?)])
        });
        if keepdim || self.ndim() == 0 {
            Ok((vals, idx))
        } else {
            Ok((vals.squeeze_dim(d as isize)?, idx.squeeze_dim(d as isize)?))
        }
    }
    /// Index of the maximum along `dim` (None: over the flattened tensor).
    pub fn argmax(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme(ReduceOp::ArgMax, dim, keepdim)
    }
    /// Index of the minimum along `dim`.
    pub fn argmin(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme(ReduceOp::ArgMin, dim, keepdim)
    }
    fn arg_extreme(&self, op: ReduceOp, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        match dim {
            Some(dim) => {
                let d = wrap_dim(op.name(), dim, self.ndim())?;
                if self.ndim() == 0 {
                    return self.reshape([1])?.reduce_raw(op, &[0], false);
                }
                self.reduce_raw(op, &[d], keepdim)
            }
            None => self.detach().reshape([-1])?.reduce_raw(op, &[0], false),
        }
    }
    /// Variance over `dims` with Bessel's correction when `unbiased`.
    pub fn var_dims(&self, dims: impl IntoShape, unbiased: bool, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("var")?;
        self.var_correction(dims, if unbiased { 1.0 } else { 0.0 }, keepdim)
    }
    /// Variance over `dims` divided by `max(0, n - correction)` (torch.var's `correction`):
    /// with no degrees of freedom left it is `ss / 0`, NaN for no elements or one (PyTorch
    /// warns and gives the same), inf when the squares do not sum to zero.
    pub fn var_correction(
        &self,
        dims: impl IntoShape,
        correction: f64,
        keepdim: bool,
    ) -> Result<Tensor> {
        let dims = &dims.to_dims("var")?;
        let d = wrap_dims("var", dims, self.ndim())?;
        let n: usize = d.iter().map(|&i| self.shape()[i]).product();
        let mean = self.mean_dims(dims, true)?;
        let ss = self.sub(&mean)?.square()?.sum_dims(dims, keepdim)?;
        ss.div_scalar((n as f64 - correction).max(0.0))
    }
    /// Standard deviation over `dims`.
    pub fn std_dims(&self, dims: impl IntoShape, unbiased: bool, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("std")?;
        self.var_dims(dims, unbiased, keepdim)?.sqrt()
    }
    /// Standard deviation with torch.std's `correction`.
    pub fn std_correction(
        &self,
        dims: impl IntoShape,
        correction: f64,
        keepdim: bool,
    ) -> Result<Tensor> {
        let dims = &dims.to_dims("std")?;
        self.var_correction(dims, correction, keepdim)?.sqrt()
    }
    /// `log(sum(exp(x)))` over `dims`, computed stably.
    pub fn logsumexp(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("logsumexp")?;
        let m = self.amax(dims, true)?.detach();
        let m = Tensor::where_cond(&m.abs()?.eq_scalar(f64::INFINITY)?, &m.zeros_like()?, &m)?;
        let s = self.sub(&m)?.exp()?.sum_dims(dims, true)?.log()?.add(&m)?;
        if keepdim {
            Ok(s)
        } else {
            let d = wrap_dims("logsumexp", dims, self.ndim())?;
            s.squeeze_dims(&d)
        }
    }
    /// Product over `dim`.
    pub fn prod_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let d = wrap_dim("prod", dim, self.ndim())?;
        if self.ndim() == 0 {
            return self.reshape([1])?.prod_dim(0, false);
        }
        if !self.dtype().is_float() {
            // PyTorch's product of integers (and bools) is int64.
            let _g = crate::no_grad();
            return self
                .to_dtype(DType::I64)?
                .reduce_raw(ReduceOp::Prod, &[d], keepdim);
        }
        // Half products accumulate in f32 (ReduceOp::out_dtype) and round once.
        let out = self.reduce_raw(ReduceOp::Prod, &[d], keepdim)?;
        let out = out.to_dtype(self.dtype())?;
        let saved = (Saved::new(self), d, keepdim);
        Ok(record(out, "prod", &[self], saved, |(x, d, keepdim), g| {
            // d/dx_i prod = prod of the others, computed without dividing by x_i.
            let (x, d) = (x.get()?, *d);
            let n = x.shape()[d];
            let g = if *keepdim {
                g.clone()
            } else {
                g.unsqueeze(d as isize)?
            };
            let mut parts = Vec::with_capacity(n);
            for i in 0..n {
                let mut others = Vec::new();
                if i > 0 {
                    others.push(x.narrow(d as isize, 0, i)?);
                }
                if i + 1 < n {
                    others.push(x.narrow(d as isize, i + 1, n - i - 1)?);
                }
                let p = if others.is_empty() {
                    g.ones_like()?
                } else {
                    Tensor::cat(&others, d as isize)?.prod_dim(d as isize, true)?
                };
                parts.push(p);
            }
            Ok(vec![Some(Tensor::cat(&parts, d as isize)?.mul(&g)?)])
        }))
    }
    /// p-norm over `dims` (torch.linalg.vector_norm); `ord` 2, 1 or infinity.
    pub fn vector_norm(&self, ord: f64, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = &dims.to_dims("norm")?;
        if ord == 2.0 {
            self.square()?.sum_dims(dims, keepdim)?.sqrt()
        } else if ord == 1.0 {
            self.abs()?.sum_dims(dims, keepdim)
        } else if ord.is_infinite() && ord > 0.0 {
            self.abs()?.amax(dims, keepdim)
        } else {
            self.abs()?
                .pow_scalar(ord)?
                .sum_dims(dims, keepdim)?
                .pow_scalar(1.0 / ord)
        }
    }
    /// Inclusive cumulative sum along `dim`; integers and bools give int64, as PyTorch's.
    pub fn cumsum(&self, dim: isize) -> Result<Tensor> {
        let d = wrap_dim("cumsum", dim, self.ndim())?;
        if !self.dtype().is_float() && self.dtype() != DType::I64 {
            let _g = crate::no_grad();
            return self.to_dtype(DType::I64)?.cumsum(dim);
        }
        if self.ndim() == 0 {
            return Ok(self.clone());
        }
        let nd = self.ndim();
        let mut perm: Vec<usize> = (0..nd).filter(|&i| i != d).collect();
        perm.push(d);
        let x = self.detach().permute_raw(&perm).dense()?;
        let n = self.shape()[d];
        let rows = self.numel() / n.max(1);
        let s = x.storage().cumsum_rows(rows, n)?;
        let y = Tensor::from_storage(s, x.shape(), self.device());
        let mut inv = vec![0; nd];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        let out = y.permute_raw(&inv);
        Ok(record(out, "cumsum", &[self], d, |&d, g| {
            Ok(vec![Some(
                g.flip([d as isize])?
                    .cumsum(d as isize)?
                    .flip([d as isize])?,
            )])
        }))
    }
    /// Softmax along `dim`, numerically stable.
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.softmax_untraced(dim),
            |r, out| {
                r.node(
                    "Softmax",
                    &[crate::onnx::trace::In::T(self)],
                    &[out],
                    vec![crate::onnx::trace::attr_i("axis", dim as i64)],
                )
            },
        )
    }

    /// [`softmax`](Self::softmax) itself; the public function records it for ONNX export.
    fn softmax_untraced(&self, dim: isize) -> Result<Tensor> {
        let _p = crate::profiler::op("softmax", &[self]);
        self.softmax_impl("softmax", dim, false)
    }
    /// Log-softmax along `dim`, numerically stable.
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.log_softmax_untraced(dim),
            |r, out| {
                r.node(
                    "LogSoftmax",
                    &[crate::onnx::trace::In::T(self)],
                    &[out],
                    vec![crate::onnx::trace::attr_i("axis", dim as i64)],
                )
            },
        )
    }

    /// [`log_softmax`](Self::log_softmax) itself; the public function records it for ONNX export.
    fn log_softmax_untraced(&self, dim: isize) -> Result<Tensor> {
        let _p = crate::profiler::op("log_softmax", &[self]);
        self.softmax_impl("log_softmax", dim, true)
    }
    /// Softmax or log-softmax: one fused kernel along the last dim where the backend has one
    /// (f32/f64 on the CPU, short f32 rows on a GPU), the composite everywhere else (and for the
    /// gradient under `create_graph`).
    fn softmax_impl(&self, op: &'static str, dim: isize, log: bool) -> Result<Tensor> {
        let x = crate::amp::upper(self)?;
        let nd = x.ndim();
        if x.numel() == 0 {
            // No rows to normalise (PyTorch returns the empty tensor; the max of an empty row
            // would be an error).
            wrap_dim(op, dim, nd)?;
            return x.mul_scalar(0.0);
        }
        if matches!(wrap_dim(op, dim, nd), Ok(d) if d + 1 == nd) {
            if let Some(y) = x.softmax_fused(op, log)? {
                return Ok(y);
            }
        }
        x.softmax_composite(op, dim, log)
    }
    /// The composite: both backends and autograd from the primitives; the oracle of the fused
    /// CPU kernel.
    fn softmax_composite(&self, op: &'static str, dim: isize, log: bool) -> Result<Tensor> {
        let m = self.amax([dim], true).in_op(op)?.detach();
        let z = self.sub(&m)?;
        if log {
            z.sub(&z.exp()?.sum_dims([dim], true)?.log()?)
        } else {
            let e = z.exp()?;
            e.div(&e.sum_dims([dim], true)?)
        }
    }
    /// The fused softmax over the last dim of a non-empty tensor (None where the backend has
    /// no kernel for its dtype and row length). Its gradient is a fused kernel too, except under
    /// `create_graph`, where the composite's formula is recorded so that it can be differentiated
    /// again.
    fn softmax_fused(&self, op: &'static str, log: bool) -> Result<Option<Tensor>> {
        let n = self.shape()[self.ndim() - 1];
        let rows = self.numel() / n;
        if !self.storage().has_fused_softmax(rows, n, false) {
            return Ok(None);
        }
        let x = self.detach().dense()?;
        let Some(s) = x.storage().softmax_rows(rows, n, log)? else {
            return Ok(None);
        };
        let out = Tensor::from_storage(s, self.shape(), self.device());
        let saved = (Saved::new(self), Saved::output(&out, op), log);
        let rule = |s: &(Saved, Saved, bool), g: &Tensor| {
            let (x, y, log) = s;
            let op = if *log { "log_softmax" } else { "softmax" };
            let y = if is_grad_enabled() {
                y.get()?;
                x.get()?.softmax_composite(op, -1, *log)?
            } else {
                y.get()?
            };
            Ok(vec![Some(softmax_backward(&y, g, *log)?)])
        };
        Ok(Some(record(out, op, &[self], saved, rule)))
    }
}

/// The input gradient of softmax (log-softmax when `log`) along the last dim from its output `y`
/// and the output gradient `g`: the backend's fused kernel when neither is recorded and it has
/// one, else tensor ops.
pub(super) fn softmax_backward(y: &Tensor, g: &Tensor, log: bool) -> Result<Tensor> {
    let n = y.shape().last().copied().unwrap_or(1);
    let rows = y.numel() / n.max(1);
    if !is_grad_enabled()
        && g.dtype() == y.dtype()
        && g.shape() == y.shape()
        && n > 0
        && y.storage().has_fused_softmax(rows, n, true)
    {
        let (yd, gd) = (y.dense()?, g.dense()?);
        let s = yd
            .storage()
            .softmax_backward_rows(&gd.storage(), rows, n, log)?;
        if let Some(s) = s {
            return Ok(Tensor::from_storage(s, y.shape(), y.device()));
        }
    }
    if log {
        g.sub(&y.exp()?.mul(&g.sum_dims([-1], true)?)?)
    } else {
        y.mul(&g.sub(&g.mul(y)?.sum_dims([-1], true)?)?)
    }
}
