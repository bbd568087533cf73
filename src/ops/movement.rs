//! Shape and movement ops. Views share storage; their backward rules map the gradient back.

use crate::autograd::{record, record_view};
use crate::error::InOp;
use crate::ops::reduce::wrap_dims;
use crate::shape::{checked_numel, infer_shape, wrap_dim, IntoShape, Layout};
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    pub(crate) fn permute_raw(&self, dims: &[usize]) -> Tensor {
        self.with_layout(self.layout().permute(dims))
    }

    /// A view with another shape; one size may be `-1` (inferred). Refuses layouts that would
    /// need a copy, as PyTorch does. `shape` is any [`IntoShape`]: `[-1, 5]`, `&[2, 5]`,
    /// `x.shape()`, a `Vec`, `-1`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 10.0, 1.0, &Device::Cpu)?;
    /// assert_eq!(x.view(&[-1, 5])?.shape(), &[2, 5]);
    /// assert!(x.view([-1, -1]).is_err()); // only one dimension can be inferred
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn view(&self, shape: impl IntoShape) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.view_untraced(shape),
            |r, out| crate::onnx::forms::reshape(r, self, out),
        )
    }

    /// [`view`](Self::view) itself; the public function records it for ONNX export.
    fn view_untraced(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = infer_shape("view", &shape.to_dims("view")?, self.numel())?;
        let strides =
            self.layout()
                .view_strides(&shape)
                .ok_or_else(|| Error::ViewNonContiguous {
                    shape: self.shape().to_vec(),
                    strides: self.stride().to_vec(),
                    target: shape.iter().map(|&s| s as isize).collect(),
                })?;
        let out = self.with_layout(Layout {
            shape: shape.clone(),
            strides,
            offset: self.storage_offset(),
        });
        let in_shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
        Ok(record(out, "view", &[self], in_shape, |in_shape, g| {
            Ok(vec![Some(g.reshape(in_shape)?)])
        }))
    }
    /// Another shape (one size may be `-1`); a view when the strides allow it, else a copy.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([2, 3, 4], &Device::Cpu)?;
    /// assert_eq!(x.permute([2, 0, 1])?.reshape([-1, 6])?.shape(), &[4, 6]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn reshape(&self, shape: impl IntoShape) -> Result<Tensor> {
        let target = infer_shape("reshape", &shape.to_dims("reshape")?, self.numel())?;
        if self.layout().view_strides(&target).is_some() {
            return self.view(&target).in_op("reshape");
        }
        self.contiguous()?.view(&target).in_op("reshape")
    }
    /// Reorder dimensions (a view); dims may be negative.
    pub fn permute(&self, dims: impl IntoShape) -> Result<Tensor> {
        let perm = dims.to_dims("permute").ok();
        crate::onnx::trace::traced(
            || self.permute_untraced(dims),
            |r, out| crate::onnx::forms::permute(r, self, perm.as_deref(), out),
        )
    }

    /// [`permute`](Self::permute) itself; the public function records it for ONNX export.
    fn permute_untraced(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = &dims.to_dims("permute")?;
        let nd = self.ndim();
        if dims.len() != nd {
            return Err(Error::shape(
                "permute",
                format!(
                    "number of dims don't match in permute: input has {nd} dims, got {} ({dims:?})",
                    dims.len()
                ),
            ));
        }
        let mut d = Vec::with_capacity(nd);
        for &x in dims {
            let w = wrap_dim("permute", x, nd)?;
            if d.contains(&w) {
                return Err(Error::arg(
                    "permute",
                    format!("repeated dim in permute ({dims:?})"),
                ));
            }
            d.push(w);
        }
        let out = self.permute_raw(&d);
        let mut inv = vec![0isize; nd];
        for (i, &p) in d.iter().enumerate() {
            inv[p] = i as isize;
        }
        Ok(record(out, "permute", &[self], inv, |inv, g| {
            Ok(vec![Some(g.permute(inv)?)])
        }))
    }
    /// Swap two dimensions.
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        let nd = self.ndim();
        let (a, b) = (
            wrap_dim("transpose", dim0, nd)?,
            wrap_dim("transpose", dim1, nd)?,
        );
        if nd == 0 {
            return Ok(self.clone());
        }
        let mut p: Vec<isize> = (0..nd as isize).collect();
        p.swap(a, b);
        self.permute(&p)
    }
    /// Transpose of a tensor with at most 2 dims.
    pub fn t(&self) -> Result<Tensor> {
        match self.ndim() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(0, 1),
            n => Err(Error::shape(
                "t",
                format!("t() expects a tensor with <= 2 dimensions, but self is {n}D"),
            )),
        }
    }
    /// Remove dimension `dim` if it has size 1.
    pub fn squeeze_dim(&self, dim: isize) -> Result<Tensor> {
        let d = wrap_dim("squeeze", dim, self.ndim())?;
        if self.ndim() == 0 || self.shape()[d] != 1 {
            return Ok(self.clone());
        }
        let mut s: Vec<isize> = self.shape().iter().map(|&x| x as isize).collect();
        s.remove(d);
        self.reshape(&s)
    }
    /// Remove the size-1 dimensions among `dims` (which may be negative).
    pub fn squeeze_dims(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = dims.to_dims("squeeze")?;
        if dims.is_empty() {
            return Ok(self.clone());
        }
        let dims = wrap_dims("squeeze", &dims, self.ndim())?;
        let s: Vec<isize> = self
            .shape()
            .iter()
            .enumerate()
            .filter(|(i, &x)| !(dims.contains(i) && x == 1))
            .map(|(_, &x)| x as isize)
            .collect();
        self.reshape(&s)
    }
    /// Remove every size-1 dimension.
    pub fn squeeze(&self) -> Result<Tensor> {
        let s: Vec<isize> = self
            .shape()
            .iter()
            .filter(|&&x| x != 1)
            .map(|&x| x as isize)
            .collect();
        self.reshape(&s)
    }
    /// Insert a size-1 dimension at `dim`.
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let d = wrap_dim("unsqueeze", dim, self.ndim() + 1)?;
        let mut s: Vec<isize> = self.shape().iter().map(|&x| x as isize).collect();
        s.insert(d, 1);
        self.reshape(&s)
    }
    /// Insert size-1 dimensions so that they sit at positions `dims` (sorted) of the result.
    pub(crate) fn unsqueeze_dims(&self, dims: &[usize]) -> Result<Tensor> {
        let mut s: Vec<isize> = self.shape().iter().map(|&x| x as isize).collect();
        for &d in dims {
            s.insert(d, 1);
        }
        self.reshape(&s)
    }
    /// Flatten dims `start_dim..=end_dim` into one.
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Tensor> {
        if self.ndim() == 0 {
            return self.reshape([1]);
        }
        let (a, b) = (
            wrap_dim("flatten", start_dim, self.ndim())?,
            wrap_dim("flatten", end_dim, self.ndim())?,
        );
        if a > b {
            return Err(Error::arg("flatten", "start_dim cannot come after end_dim"));
        }
        let mut s: Vec<isize> = self.shape()[..a].iter().map(|&x| x as isize).collect();
        s.push(self.shape()[a..=b].iter().product::<usize>() as isize);
        s.extend(self.shape()[b + 1..].iter().map(|&x| x as isize));
        self.reshape(&s)
    }
    /// Broadcast to `shape` without copying (stride 0 on expanded dims); `-1` keeps a dim's size.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([3, 1], &Device::Cpu)?;
    /// assert_eq!(x.expand([2, -1, 4])?.shape(), &[2, 3, 4]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn expand(&self, shape: impl IntoShape) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.expand_untraced(shape),
            |r, out| crate::onnx::forms::expand(r, self, out),
        )
    }

    /// [`expand`](Self::expand) itself; the public function records it for ONNX export.
    fn expand_untraced(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = &self.expand_sizes(&shape.to_dims("expand")?)?;
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let l = self.layout().broadcast_to("expand", shape)?;
        let out = self.with_layout(l);
        let in_shape = self.shape().to_vec();
        Ok(record(out, "expand", &[self], in_shape, |in_shape, g| {
            Ok(vec![Some(g.sum_to(in_shape)?)])
        }))
    }
    /// `expand`'s target sizes: `-1` keeps an existing dim, other negative sizes are refused with
    /// PyTorch's messages.
    fn expand_sizes(&self, dims: &[isize]) -> Result<Vec<usize>> {
        let lead = dims.len().saturating_sub(self.ndim());
        let mut out = Vec::with_capacity(dims.len());
        for (i, &d) in dims.iter().enumerate() {
            let existing = i.checked_sub(lead).map(|j| self.shape()[j]);
            out.push(match (usize::try_from(d), existing) {
                (Ok(d), _) => d,
                (Err(_), Some(s)) if d == -1 => s,
                (Err(_), None) if d == -1 => {
                    return Err(Error::shape("expand", format!("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}")));
                }
                (Err(_), Some(s)) if s != 1 => {
                    return Err(Error::shape("expand", format!("The expanded size of the tensor ({d}) must match the existing size ({s}) at non-singleton dimension {i}. Target sizes: {dims:?}. Tensor sizes: {:?}", self.shape())));
                }
                (Err(_), _) => {
                    return Err(Error::arg(
                        "expand",
                        format!("Trying to create tensor with negative dimension {d}: {dims:?}"),
                    ));
                }
            });
        }
        Ok(out)
    }
    /// Sum a broadcast gradient back to `shape`.
    pub fn sum_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        if shape.len() > self.ndim() {
            return Err(Error::shape(
                "sum_to",
                format!("cannot sum shape {:?} to {shape:?}", self.shape()),
            ));
        }
        let lead = self.ndim() - shape.len();
        let mut dims: Vec<isize> = (0..lead as isize).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push((lead + i) as isize);
            }
        }
        let r = self.sum_dims(&dims, true)?;
        r.reshape(shape)
    }

    /// A strided view described relative to this tensor's own layout by `f`; its backward writes
    /// the gradient into the same positions of a zero tensor.
    fn view_op(
        &self,
        name: &'static str,
        f: impl Fn(&Layout) -> Layout + Send + Sync + 'static,
    ) -> Result<Tensor> {
        let out = self.with_layout(f(self.layout()));
        let base = self.shape().to_vec();
        let rel = f(&Layout::contiguous(&base));
        Ok(record_view(out, name, self, base, rel))
    }
    /// Zeros of `base` shape with `self` written at the positions `rel` (relative to a contiguous
    /// tensor of `base` shape). Differentiable; its backward reads those positions back.
    pub(crate) fn strided_scatter(&self, base: &[usize], rel: &Layout) -> Result<Tensor> {
        let z = Tensor::full_dtype(base, 0.0, self.dtype(), &self.device())?;
        {
            let src = self.contiguous()?;
            let mut dst = z.0.storage.data.write();
            dst.copy_into(rel, &src.storage(), src.layout())?;
        }
        let rel = rel.clone();
        Ok(record(z, "strided_scatter", &[self], rel, |rel, g| {
            let rel = rel.clone();
            let g = g.contiguous()?;
            let v = g.view_op("as_strided", move |l| Layout {
                offset: l.offset + rel.offset,
                ..rel.clone()
            })?;
            Ok(vec![Some(v)])
        }))
    }

    /// A contiguous copy in fresh storage (not recorded by autograd; PyTorch's `clone` of a
    /// detached tensor).
    pub(crate) fn fresh_copy(&self) -> Result<Tensor> {
        let out = Tensor::full_dtype(self.shape(), 0.0, self.dtype(), &self.device())?;
        {
            let mut dst = out.0.storage.data.write();
            dst.copy_into(out.layout(), &self.storage(), self.layout())?;
        }
        Ok(out)
    }

    /// `length` elements of `dim` from `start` (a view).
    pub fn narrow(&self, dim: isize, start: usize, length: usize) -> Result<Tensor> {
        let d = self.dim_of_nonscalar("narrow", dim)?;
        let size = self.shape()[d];
        if start > size {
            return Err(Error::arg(
                "narrow",
                format!("start out of range (expected to be in range of [-{size}, {size}], but got {start})"),
            ));
        }
        if length > size - start {
            return Err(Error::arg(
                "narrow",
                format!("start ({start}) + length ({length}) exceeds dimension size ({size})."),
            ));
        }
        self.slice(dim, start, start + length, 1)
    }
    /// Wrap `dim` for an op that needs at least one dimension (PyTorch: "narrow() cannot be
    /// applied to a 0-dim tensor.").
    fn dim_of_nonscalar(&self, op: &'static str, dim: isize) -> Result<usize> {
        if self.ndim() == 0 {
            return Err(Error::arg(
                op,
                format!("{op}() cannot be applied to a 0-dim tensor."),
            ));
        }
        wrap_dim(op, dim, self.ndim())
    }
    /// The slice at `index` along `dim`, with that dim removed (a view): PyTorch's
    /// `x.select(dim, index)`, and `x[index]` for dim 0. A negative `index` counts from the end.
    /// Errors: a 0-d tensor, `dim` out of range, `index` out of range ([`Error::IndexOutOfRange`]).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 6.0, 1.0, &Device::Cpu)?.view([2, 3])?;
    /// assert_eq!(x.select(0, 1)?.to_vec::<f32>()?, vec![3.0, 4.0, 5.0]); // x[1]
    /// assert_eq!(x.select(1, -1)?.to_vec::<f32>()?, vec![2.0, 5.0]); // x[:, -1]
    /// assert!(x.select(1, 3).is_err());
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn select(&self, dim: isize, index: i64) -> Result<Tensor> {
        let d = self.dim_of_nonscalar("select", dim)?;
        let size = self.shape()[d];
        let i = if index < 0 {
            index + size as i64
        } else {
            index
        };
        if i < 0 || i >= size as i64 {
            return Err(Error::IndexOutOfRange {
                op: "select",
                index,
                dim: d,
                size,
            });
        }
        self.narrow(d as isize, i as usize, 1)?
            .squeeze_dim(d as isize)
    }
    /// Every slice along `dim`, that dim removed (views): `torch.unbind`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 6.0, 1.0, &Device::Cpu)?.view([2, 3])?;
    /// let cols = x.unbind(1)?;
    /// assert_eq!(cols.len(), 3);
    /// assert_eq!(cols[2].to_vec::<f32>()?, vec![2.0, 5.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn unbind(&self, dim: isize) -> Result<Vec<Tensor>> {
        let d = self.dim_of_nonscalar("unbind", dim)?;
        (0..self.shape()[d])
            .map(|i| self.select(d as isize, i as i64))
            .collect()
    }
    /// Move the dims `source` to the positions `destination`, the other dims keeping their
    /// order (a view): `torch.movedim` / `moveaxis`. Both take one dim or a list; negative dims
    /// count from the end. Errors (PyTorch's): lists of different lengths, a repeated dim.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([2, 3, 4], &Device::Cpu)?;
    /// assert_eq!(x.movedim([0], [-1])?.shape(), &[3, 4, 2]);
    /// assert_eq!(x.movedim([0, 1], [2, 0])?.shape(), &[3, 4, 2]);
    /// assert!(x.movedim([0, 0], [1, 2]).is_err());
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn movedim(&self, source: impl IntoShape, destination: impl IntoShape) -> Result<Tensor> {
        let op = "movedim";
        let (src, dst) = (source.to_dims(op)?, destination.to_dims(op)?);
        let nd = self.ndim();
        if src.len() != dst.len() {
            return Err(Error::arg(op, format!("Invalid source or destination dims: source ({src:?} dims) should contain the same number of dims as destination ({dst:?} dims)")));
        }
        // A 0-d tensor takes dim 0 or -1, as PyTorch's wrap rule for scalars.
        let wrap = |d: isize| wrap_dim(op, d, nd.max(1));
        let src: Vec<usize> = src.iter().map(|&d| wrap(d)).collect::<Result<_>>()?;
        let dst: Vec<usize> = dst.iter().map(|&d| wrap(d)).collect::<Result<_>>()?;
        for (name, dims) in [("source", &src), ("destination", &dst)] {
            let mut seen = vec![false; nd.max(1)];
            for &d in dims {
                if std::mem::replace(&mut seen[d], true) {
                    return Err(Error::arg(
                        op,
                        format!("repeated dim in `{name}` ({dims:?})"),
                    ));
                }
            }
        }
        if nd == 0 {
            return Ok(self.clone());
        }
        let mut order: Vec<Option<usize>> = vec![None; nd];
        for (&s, &d) in src.iter().zip(&dst) {
            order[d] = Some(s);
        }
        let mut rest = (0..nd).filter(|d| !src.contains(d));
        let perm: Vec<usize> = order
            .into_iter()
            .map(|o| {
                // Distinct sources and destinations leave one free dim per free slot.
                o.or_else(|| rest.next())
                    .ok_or_else(|| Error::arg(op, "source and destination do not pair up"))
            })
            .collect::<Result<_>>()?;
        self.permute(perm)
    }
    /// `x[..., start:end:step, ...]` on `dim` (a view). `end` is clamped to the size.
    pub fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.slice_untraced(dim, start, end, step),
            |r, out| crate::onnx::forms::slice(r, self, dim, start, end, step, out),
        )
    }

    /// [`slice`](Self::slice) itself; the public function records it for ONNX export.
    fn slice_untraced(&self, dim: isize, start: usize, end: usize, step: usize) -> Result<Tensor> {
        let d = self.dim_of_nonscalar("slice", dim)?;
        if step == 0 {
            return Err(Error::arg("slice", "slice step must be positive"));
        }
        let size = self.shape()[d];
        let end = end.min(size);
        let start = start.min(end);
        let len = (end - start).div_ceil(step);
        self.view_op("slice", move |l| {
            let mut l = l.clone();
            l.offset += start * l.strides[d];
            l.shape[d] = len;
            if len > 1 {
                // step < size here, so the stride stays within the storage's span.
                l.strides[d] *= step;
            }
            l
        })
    }
    /// The diagonal of dims `d1`, `d2`, appended as the last dimension (a view).
    pub fn diagonal(&self, d1: isize, d2: isize) -> Result<Tensor> {
        let (a, b) = (
            wrap_dim("diagonal", d1, self.ndim())?,
            wrap_dim("diagonal", d2, self.ndim())?,
        );
        if a == b {
            return Err(Error::arg(
                "diagonal",
                "diagonal dimensions cannot be identical",
            ));
        }
        self.view_op("diagonal", move |l| {
            let n = l.shape[a].min(l.shape[b]);
            let s = l.strides[a] + l.strides[b];
            let mut shape = Vec::new();
            let mut strides = Vec::new();
            for i in 0..l.shape.len() {
                if i != a && i != b {
                    shape.push(l.shape[i]);
                    strides.push(l.strides[i]);
                }
            }
            shape.push(n);
            strides.push(s);
            Layout {
                shape,
                strides,
                offset: l.offset,
            }
        })
    }

    /// Concatenate along `dim`; the result has the inputs' promoted dtype (PyTorch's
    /// `result_type`).
    pub fn cat(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || Tensor::cat_untraced(tensors, dim),
            |r, out| crate::onnx::forms::cat(r, tensors, dim, out),
        )
    }

    /// [`cat`](Self::cat) itself; the public function records it for ONNX export.
    fn cat_untraced(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| Error::arg("cat", "expected a non-empty list of Tensors"))?;
        if let Some(i) = tensors.iter().position(|t| t.ndim() == 0) {
            return Err(Error::arg(
                "cat",
                format!("zero-dimensional tensor (at position {i}) cannot be concatenated"),
            ));
        }
        let d = wrap_dim("cat", dim, first.ndim())?;
        let dtype = tensors
            .iter()
            .fold(first.dtype(), |a, t| DType::promote(a, t.dtype()));
        let mut total = 0usize;
        for t in tensors {
            first.same_device("cat", t)?;
            if t.ndim() != first.ndim()
                || t.shape()
                    .iter()
                    .enumerate()
                    .any(|(i, &s)| i != d && s != first.shape()[i])
            {
                return Err(Error::shape("cat", format!("Sizes of tensors must match except in dimension {d}. Expected {:?} but got {:?}", first.shape(), t.shape())));
            }
            total = total.saturating_add(t.shape()[d]);
        }
        let mut shape = first.shape().to_vec();
        shape[d] = total;
        checked_numel("cat", &shape)?;
        let tensors: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.to_dtype(dtype))
            .collect::<Result<_>>()?;
        let out = Tensor::full_dtype(&shape, 0.0, dtype, &first.device())?;
        let mut sizes = Vec::new();
        {
            let mut dst = out.0.storage.data.write();
            let mut at = 0;
            for t in &tensors {
                let mut l = Layout::contiguous(&shape);
                l.offset = at * l.strides[d];
                l.shape[d] = t.shape()[d];
                dst.copy_into(&l, &t.storage(), t.layout())?;
                sizes.push((at, t.shape()[d]));
                at += t.shape()[d];
            }
        }
        let inputs: Vec<&Tensor> = tensors.iter().collect();
        Ok(record(out, "cat", &inputs, (sizes, d), |(sizes, d), g| {
            sizes
                .iter()
                .map(|&(s, n)| g.narrow(*d as isize, s, n).map(Some))
                .collect()
        }))
    }
    /// Stack along a new dimension `dim`.
    pub fn stack(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| Error::arg("stack", "expected a non-empty list of Tensors"))?;
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(Error::shape("stack", format!("stack expects each tensor to be equal size, but got {:?} at entry 0 and {:?}", first.shape(), t.shape())));
            }
        }
        let parts: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.unsqueeze(dim))
            .collect::<Result<_>>()?;
        Tensor::cat(&parts, dim)
    }
    /// Pieces of `size` along `dim` (the last may be smaller).
    pub fn split(&self, size: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = self.dim_of_nonscalar("split", dim)?;
        if size == 0 {
            return Err(Error::arg("split", "split_size must be positive"));
        }
        let n = self.shape()[d];
        (0..n.div_ceil(size))
            .map(|i| self.narrow(dim, i * size, size.min(n - i * size)))
            .collect()
    }
    /// Pieces with the given sizes along `dim` (torch.split with a list of sizes).
    pub fn split_sizes(&self, sizes: impl IntoShape, dim: isize) -> Result<Vec<Tensor>> {
        let signed = sizes.to_dims("split")?;
        let sizes = &signed
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<std::result::Result<Vec<usize>, _>>()
            .map_err(|_| Error::arg("split", format!("split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={signed:?}")))?;
        let d = self.dim_of_nonscalar("split", dim)?;
        if sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s)) != Some(self.shape()[d]) {
            return Err(Error::shape("split", format!("split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension {d}), but got split_sizes={sizes:?}", self.shape()[d])));
        }
        let mut at = 0;
        sizes
            .iter()
            .map(|&s| {
                let t = self.narrow(dim, at, s);
                at += s;
                t
            })
            .collect()
    }
    /// `chunks` pieces along `dim` (PyTorch's sizing: ceil(n / chunks) each).
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        if chunks == 0 {
            return Err(Error::arg(
                "chunk",
                "chunk expects `chunks` to be greater than 0",
            ));
        }
        let n = self.dim_size(dim)?;
        self.split(n.div_ceil(chunks).max(1), dim)
    }
    /// Reverse the order along `dims` (a copy); each dim at most once, negative dims allowed.
    pub fn flip(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = &dims.to_dims("flip")?;
        let mut x = self.clone();
        if dims.is_empty() {
            return Ok(x);
        }
        // A 0-d tensor accepts dim 0 / -1 and has nothing to reverse.
        for w in wrap_dims("flip", dims, self.ndim())? {
            let n = self.shape()[w];
            let idx = Tensor::arange_dtype(
                (n as f64) - 1.0,
                -1.0,
                -1.0,
                crate::DType::I32,
                &self.device(),
            )?;
            x = x.index_select(w as isize, &idx)?;
        }
        Ok(x)
    }
    /// Tile the tensor `repeats` times along each dim (torch.Tensor.repeat).
    pub fn repeat(&self, repeats: impl IntoShape) -> Result<Tensor> {
        let repeats = &repeats.to_sizes("repeat")?;
        if repeats.len() < self.ndim() {
            return Err(Error::arg("repeat", "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
        }
        let lead = repeats.len() - self.ndim();
        let mut padded = vec![1usize; lead];
        padded.extend(self.shape());
        let mut inter: Vec<isize> = Vec::new();
        let mut expanded = Vec::new();
        let mut out = Vec::new();
        for (i, &s) in padded.iter().enumerate() {
            inter.push(1);
            inter.push(s as isize);
            expanded.push(repeats[i]);
            expanded.push(s);
            out.push(crate::shape::checked_mul("repeat", repeats[i], s, &expanded)? as isize);
        }
        self.reshape(&inter)?
            .expand(&expanded)?
            .contiguous()?
            .reshape(&out)
    }
}
