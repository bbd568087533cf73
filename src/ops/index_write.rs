//! Writes at indices: `index_add`, `index_put` (PyTorch's advanced-indexing assignment) and
//! `masked_scatter`, with their in-place forms. All are composites of `scatter_add`, `gather`,
//! `index_select` and `where`, so both backends run them and indices are checked where those
//! kernels read them (on the device for a GPU: `backend/gpu/checks.rs`).

use crate::autograd::{record, Saved, SavedState};
use crate::shape::{broadcast_shapes, wrap_dim};
use crate::{DType, Error, Result, Scalar, Tensor};

/// Keyword arguments of [`Tensor::index_add_with`] (PyTorch's `alpha=1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexAddOptions {
    /// Factor applied to `source` before it is added.
    pub alpha: Scalar,
}

impl Default for IndexAddOptions {
    fn default() -> Self {
        IndexAddOptions {
            alpha: Scalar::Int(1),
        }
    }
}

/// How `index_put` lays the self tensor out: the indexed dims first, then the rest, flattened
/// to `[n_d, n_r]`; the broadcast index shape and where the indexing result puts it.
#[derive(Clone)]
struct Plan {
    /// Self's dims, indexed ones first.
    perm: Vec<usize>,
    /// Self's sizes in `perm` order.
    p_shape: Vec<usize>,
    /// Elements of the indexed dims, of the index shape and of the rest.
    n_d: usize,
    n_b: usize,
    n_r: usize,
    /// The index tensors' broadcast shape and the sizes of the dims not indexed.
    b_shape: Vec<usize>,
    r_shape: Vec<usize>,
    /// Dims not indexed that come before the index block in the result (adjacent indices).
    before: usize,
    /// The shape of `self[indices]`.
    result_shape: Vec<usize>,
    /// The values' shape (broadcast to `result_shape`).
    values_shape: Vec<usize>,
}

impl SavedState for Plan {}

impl Plan {
    /// The inverse of `perm`.
    fn inverse(&self) -> Vec<isize> {
        let mut inv = vec![0isize; self.perm.len()];
        for (i, &p) in self.perm.iter().enumerate() {
            inv[p] = i as isize;
        }
        inv
    }
    /// `t` (self's shape) as `[n_d, n_r]`.
    fn flatten(&self, t: &Tensor) -> Result<Tensor> {
        let perm: Vec<isize> = self.perm.iter().map(|&p| p as isize).collect();
        t.permute(&perm)?
            .reshape([self.n_d as isize, self.n_r as isize])
    }
    /// `[n_d, n_r]` back to self's shape (contiguous).
    fn unflatten(&self, t: &Tensor) -> Result<Tensor> {
        t.reshape(&self.p_shape)?
            .permute(self.inverse())?
            .contiguous()
    }
    /// Values of the indexing result's shape as `[n_b, n_r]` rows.
    fn rows(&self, v: &Tensor) -> Result<Tensor> {
        let nb = self.b_shape.len();
        let v = if self.before > 0 {
            let b = self.before;
            let perm: Vec<isize> = (b..b + nb)
                .chain(0..b)
                .chain(b + nb..self.result_shape.len())
                .map(|d| d as isize)
                .collect();
            v.permute(&perm)?
        } else {
            v.clone()
        };
        v.reshape([self.n_b as isize, self.n_r as isize])
    }
    /// `[n_b, n_r]` rows back to the indexing result's shape.
    fn unrows(&self, r: &Tensor) -> Result<Tensor> {
        let nb = self.b_shape.len();
        let mut shape = self.b_shape.clone();
        shape.extend_from_slice(&self.r_shape);
        let r = r.reshape(&shape)?;
        if self.before == 0 {
            return Ok(r);
        }
        let b = self.before;
        let perm: Vec<isize> = (nb..nb + b)
            .chain(0..nb)
            .chain(nb + b..shape.len())
            .map(|d| d as isize)
            .collect();
        r.permute(&perm)
    }
}

/// Elements of `shape` as an int32 count, or PyTorch-style overflow error naming `op`.
fn i32_count(op: &'static str, shape: &[usize]) -> Result<i32> {
    let n = crate::shape::checked_numel(op, shape)?;
    i32::try_from(n).map_err(|_| {
        Error::arg(
            op,
            format!(
                "{shape:?} has {n} elements; int32 indices reach {}",
                i32::MAX
            ),
        )
    })
}

impl Tensor {
    /// `self` with `alpha * source` added along `dim` at the positions `index` gives
    /// (torch.index_add): `out[.., index[i], ..] += alpha * source[.., i, ..]`; repeated
    /// indices accumulate. `index` is a 1-D int32 tensor with one entry per slice of `source`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([3, 2], &Device::Cpu)?;
    /// let i = Tensor::from_vec(vec![0i32, 2, 0], [3], &Device::Cpu)?;
    /// let s = Tensor::ones([3, 2], &Device::Cpu)?;
    /// assert_eq!(x.index_add(0, &i, &s)?.to_vec::<f32>()?, [2., 2., 0., 0., 1., 1.]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn index_add(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        self.index_add_with(dim, index, source, IndexAddOptions::default())
    }

    /// [`Tensor::index_add`] with PyTorch's keyword arguments (`alpha`).
    pub fn index_add_with(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        opts: IndexAddOptions,
    ) -> Result<Tensor> {
        const OP: &str = "index_add";
        self.same_device(OP, index)?;
        self.same_device(OP, source)?;
        let d = wrap_dim(OP, dim, self.ndim())?;
        if index.ndim() > 1 {
            return Err(Error::shape(OP, format!("index_add_(): Index is supposed to be a vector, but got dim: {} with type: {} and size: {:?}", index.ndim(), index.dtype(), index.shape())));
        }
        if !matches!(index.dtype(), DType::I32 | DType::I64) {
            return Err(Error::arg(
                OP,
                format!(
                    "index_add_(): Expected dtype int32/int64 for index but got: {}",
                    index.dtype()
                ),
            ));
        }
        let index = &index_i32(OP, index)?;
        if source.dtype() != self.dtype() {
            return Err(Error::arg(
                OP,
                format!(
                    "index_add_(): self ({}) and source ({}) must have the same scalar type",
                    self.dtype(),
                    source.dtype()
                ),
            ));
        }
        let as_1d = |s: &[usize]| if s.is_empty() { vec![1] } else { s.to_vec() };
        let (xs, ss) = (as_1d(self.shape()), as_1d(source.shape()));
        if xs.len() != ss.len() || (0..xs.len()).any(|i| i != d && xs[i] != ss[i]) {
            return Err(Error::shape(OP, format!("source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {:?} source.shape = {:?}", self.shape(), source.shape())));
        }
        let n = index.numel();
        if n != ss[d] {
            return Err(Error::shape(
                OP,
                format!(
                    "index_add_(): Number of indices ({n}) should be equal to source.size(dim): ({}), for dim: {d}",
                    ss[d]
                ),
            ));
        }
        if matches!(opts.alpha, Scalar::Float(_)) && !self.dtype().is_float() {
            return Err(Error::arg(
                OP,
                "For integral input tensors, argument alpha must not be a floating point number.",
            ));
        }
        let src = source.reshape(&ss)?;
        let src = if opts.alpha.to_f64() == 1.0 {
            src
        } else {
            src.mul_scalar(opts.alpha)?
        };
        let mut ishape = vec![1isize; ss.len()];
        ishape[d] = n as isize;
        // A broadcast view of the index: the CPU check reads each stored index once.
        let idx = index.reshape(&ishape)?.expand(&ss)?;
        self.reshape(&xs)?
            .scatter_add_as(OP, d as isize, &idx, &src)?
            .reshape(self.shape())
    }

    /// [`Tensor::index_add`] in place.
    pub fn index_add_(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<&Tensor> {
        self.assign("index_add_", |x| x.index_add(dim, index, source))
    }

    /// [`Tensor::index_add_with`] in place.
    pub fn index_add_with_(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        opts: IndexAddOptions,
    ) -> Result<&Tensor> {
        self.assign("index_add_", |x| x.index_add_with(dim, index, source, opts))
    }

    /// `self` with `self[indices] = values` (torch.index_put, PyTorch's advanced indexing):
    /// `indices` has one entry per leading dim, `None` for a full slice (`:`); int32 index
    /// tensors are broadcast together (negative indices count from the end), and a bool mask
    /// stands for the positions where it is true over as many dims as it has. `values` is
    /// broadcast to the shape of `self[indices]`. With `accumulate`, values at repeated positions
    /// are summed into `self`; without it, the last write to a position wins.
    ///
    /// Bool masks are read back to the host (their count sets the shape), and so are the indices
    /// when `accumulate` is false (to resolve repeated positions).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([2, 3], &Device::Cpu)?;
    /// let rows = Tensor::from_vec(vec![0i32, 1], [2], &Device::Cpu)?;
    /// let cols = Tensor::from_vec(vec![2i32, 0], [2], &Device::Cpu)?;
    /// let v = Tensor::from_vec(vec![5f32, 7.], [2], &Device::Cpu)?;
    /// let y = x.index_put(&[Some(&rows), Some(&cols)], &v, false)?;
    /// assert_eq!(y.to_vec::<f32>()?, [0., 0., 5., 7., 0., 0.]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn index_put(
        &self,
        indices: &[Option<&Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        const OP: &str = "index_put";
        self.same_device(OP, values)?;
        if values.dtype() != self.dtype() {
            return Err(Error::arg(OP, format!("Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.", self.dtype(), values.dtype())));
        }
        let (plan, lin) = self.index_plan(OP, indices, values.shape())?;
        let (out, hit, lin) = {
            let _g = crate::no_grad();
            let flat = plan.flatten(&self.detach())?;
            let vals = plan.rows(&values.detach().expand(&plan.result_shape)?)?;
            let nr = plan.n_r;
            let spread = |l: &Tensor| l.reshape([l.numel() as isize, 1])?.expand([l.numel(), nr]);
            if accumulate {
                let out = flat.scatter_add_as(OP, 0, &spread(&lin)?, &vals)?;
                (plan.unflatten(&out)?, None, lin)
            } else {
                // The last write to a position wins (PyTorch's CPU order): keep the last of
                // each run of equal positions. Reading back also reports bad indices now.
                let host = lin.to_vec::<i32>()?;
                let mut seen = std::collections::HashSet::with_capacity(host.len());
                let mut keep: Vec<i32> = (0..host.len())
                    .rev()
                    .filter(|&j| seen.insert(host[j]))
                    .map(|j| j as i32)
                    .collect();
                keep.reverse();
                let (lu, vu) = if keep.len() == host.len() {
                    (lin.clone(), vals)
                } else {
                    let k = Tensor::from_vec(keep, [seen.len()], &self.device())?;
                    (lin.index_select(0, &k)?, vals.index_select(0, &k)?)
                };
                let zeros = Tensor::full_dtype([plan.n_d, nr], 0.0, self.dtype(), &self.device())?;
                let put = zeros.scatter_add_as(OP, 0, &spread(&lu)?, &vu)?;
                let ones = Tensor::full_dtype([1], 1.0, DType::I32, &self.device())?
                    .expand([lu.numel()])?;
                let hit = Tensor::full_dtype([plan.n_d], 0.0, DType::I32, &self.device())?
                    .scatter_add_as(OP, 0, &lu, &ones)?
                    .gt_scalar(0)?
                    .reshape([-1, 1])?;
                let out = Tensor::where_cond(&hit, &put, &flat)?;
                (plan.unflatten(&out)?, Some(hit), lin)
            }
        };
        let saved = (Saved::new(&lin), hit.as_ref().map(Saved::new), plan);
        Ok(record(out, OP, &[self, values], saved, |s, g| {
            let (lin, hit, plan) = s;
            let gp = plan.flatten(g)?;
            let gself = match hit {
                Some(h) => gp.masked_fill(&h.get()?, 0.0)?,
                None => gp.clone(),
            };
            let gv = plan.unrows(&gp.index_select(0, &lin.get()?)?)?;
            Ok(vec![
                Some(plan.unflatten(&gself)?),
                Some(gv.sum_to(&plan.values_shape)?),
            ])
        }))
    }

    /// [`Tensor::index_put`] in place.
    pub fn index_put_(
        &self,
        indices: &[Option<&Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<&Tensor> {
        self.assign("index_put_", |x| x.index_put(indices, values, accumulate))
    }

    /// The layout of `self[indices]` and the flat position (in the indexed dims) of each
    /// indexed element, as int32 of the broadcast index shape flattened. Negative indices
    /// are wrapped; out-of-range ones are reported by the gather that checks them.
    fn index_plan(
        &self,
        op: &'static str,
        indices: &[Option<&Tensor>],
        values_shape: &[usize],
    ) -> Result<(Plan, Tensor)> {
        let ndim = self.ndim();
        let mut count = 0usize;
        for t in indices.iter().flatten() {
            self.same_device(op, t)?;
            count += match t.dtype() {
                DType::Bool => t.ndim().max(1),
                DType::I32 | DType::I64 => 1,
                _ => {
                    return Err(Error::arg(
                        op,
                        format!(
                        "tensors used as indices must be long, int, byte or bool tensors (got {})",
                        t.dtype()
                    ),
                    ))
                }
            };
        }
        count += indices.iter().filter(|t| t.is_none()).count();
        if count > ndim {
            return Err(Error::shape(
                op,
                format!("too many indices for tensor of dimension {ndim} (got {count})"),
            ));
        }
        // One optional int32 index per dim of self; masks become their nonzero coordinates.
        let mut per_dim: Vec<Option<Tensor>> = Vec::with_capacity(ndim);
        for t in indices {
            match t {
                None => per_dim.push(None),
                Some(t) if t.dtype() == DType::Bool => {
                    let p = per_dim.len();
                    if t.ndim() == 0 {
                        return Err(Error::arg(op, "a 0-d bool index is not supported; use a mask with the indexed tensor's shape"));
                    }
                    for (j, &m) in t.shape().iter().enumerate() {
                        if m != self.shape()[p + j] {
                            return Err(Error::shape(op, format!("The shape of the mask {:?} at index {j} does not match the shape of the indexed tensor {:?} at index {}", t.shape(), self.shape(), p + j)));
                        }
                    }
                    per_dim.extend(nonzero_coords(t)?.into_iter().map(Some));
                }
                Some(t) => per_dim.push(Some(index_i32(op, t)?)),
            }
        }
        per_dim.resize(ndim, None);
        let dims: Vec<usize> = (0..ndim).filter(|&d| per_dim[d].is_some()).collect();
        if dims.is_empty() {
            return Err(Error::arg(
                op,
                "at least one index tensor is needed (all entries were None)",
            ));
        }
        let mut b_shape: Vec<usize> = Vec::new();
        let mut first = true;
        for t in per_dim.iter().flatten() {
            b_shape = if first {
                t.shape().to_vec()
            } else {
                broadcast_shapes(op, &b_shape, t.shape()).map_err(|_| {
                    let shapes: Vec<String> = per_dim
                        .iter()
                        .flatten()
                        .map(|t| format!("{:?}", t.shape()))
                        .collect();
                    Error::shape(op, format!("shape mismatch: indexing tensors could not be broadcast together with shapes {}", shapes.join(", ")))
                })?
            };
            first = false;
        }
        let rest: Vec<usize> = (0..ndim).filter(|&d| per_dim[d].is_none()).collect();
        let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
        let before = if adjacent { dims[0] } else { 0 };
        let size = |d: &usize| self.shape()[*d];
        let r_shape: Vec<usize> = rest.iter().map(size).collect();
        let mut result_shape: Vec<usize> = r_shape[..before].to_vec();
        result_shape.extend_from_slice(&b_shape);
        result_shape.extend_from_slice(&r_shape[before..]);
        if crate::shape::broadcast_shapes(op, values_shape, &result_shape).ok()
            != Some(result_shape.clone())
        {
            return Err(Error::shape(op, format!("shape mismatch: value tensor of shape {values_shape:?} cannot be broadcast to indexing result of shape {result_shape:?}")));
        }
        let d_shape: Vec<usize> = dims.iter().map(size).collect();
        i32_count(op, &d_shape)?;
        let n_b = crate::shape::checked_numel(op, &b_shape)?;
        // Flat position in the indexed dims, row-major over them.
        let mut lin: Option<Tensor> = None;
        let mut stride = 1i64;
        for &d in dims.iter().rev() {
            let t = per_dim[d]
                .as_ref()
                .ok_or_else(|| Error::arg(op, "internal: missing index"))?;
            let comp = checked_component(
                op,
                &t.expand(&b_shape)?.reshape([n_b as isize])?,
                self.shape()[d],
                d,
            )?;
            let term = if stride == 1 {
                comp
            } else {
                comp.mul_scalar(stride)?
            };
            lin = Some(match lin {
                None => term,
                Some(l) => l.add(&term)?,
            });
            stride *= self.shape()[d] as i64;
        }
        let lin = lin.ok_or_else(|| Error::arg(op, "internal: no index"))?;
        let mut perm = dims.clone();
        perm.extend_from_slice(&rest);
        let plan = Plan {
            p_shape: perm.iter().map(size).collect(),
            perm,
            n_d: d_shape.iter().product(),
            n_b,
            n_r: r_shape.iter().product(),
            b_shape,
            r_shape,
            before,
            result_shape,
            values_shape: values_shape.to_vec(),
        };
        Ok((plan, lin))
    }

    /// `self` with the elements of `source` (read in order) written where `mask` is true
    /// (torch.masked_scatter); `mask` is bool and broadcasts with `self`. Reads the mask back.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::zeros([4], &Device::Cpu)?;
    /// let m = Tensor::from_vec(vec![true, false, true, false], [4], &Device::Cpu)?;
    /// let s = Tensor::from_vec(vec![1f32, 2., 3.], [3], &Device::Cpu)?;
    /// assert_eq!(x.masked_scatter(&m, &s)?.to_vec::<f32>()?, [1., 0., 2., 0.]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_scatter";
        self.same_device(OP, mask)?;
        self.same_device(OP, source)?;
        if mask.dtype() != DType::Bool {
            return Err(Error::arg(
                OP,
                format!(
                    "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
                    mask.dtype()
                ),
            ));
        }
        if source.dtype() != self.dtype() {
            return Err(Error::arg(
                OP,
                format!(
                    "masked_scatter: expected self and source to have same dtypes but got {} and {}",
                    self.dtype(),
                    source.dtype()
                ),
            ));
        }
        let shape = broadcast_shapes(OP, self.shape(), mask.shape())?;
        let n_all = i32_count(OP, &shape)?;
        let (x, m) = (self.expand(&shape)?, mask.expand(&shape)?);
        let pos: Vec<i32> = m
            .to_f64_vec()?
            .iter()
            .zip(0..n_all)
            .filter(|(&v, _)| v != 0.0)
            .map(|(_, i)| i)
            .collect();
        let n = pos.len();
        if source.numel() < n {
            return Err(Error::shape(
                OP,
                format!(
                    "Number of elements of source < number of ones in mask ({} < {n})",
                    source.numel()
                ),
            ));
        }
        let src = source.reshape([-1])?.narrow(0, 0, n)?;
        let pos = Tensor::from_vec(pos, [n], &self.device())?;
        let put = Tensor::full_dtype([n_all as usize], 0.0, self.dtype(), &self.device())?
            .scatter_add_as(OP, 0, &pos, &src)?
            .reshape(&shape)?;
        Tensor::where_cond(&m, &put, &x)
    }

    /// [`Tensor::masked_scatter`] in place (`mask` broadcasts to `self`'s shape).
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<&Tensor> {
        self.assign("masked_scatter_", |x| x.masked_scatter(mask, source))
    }
}

/// The coordinates of a bool mask's true elements, one int32 tensor per dim (read back).
fn nonzero_coords(mask: &Tensor) -> Result<Vec<Tensor>> {
    let shape = mask.shape();
    let v = mask.to_f64_vec()?;
    let k = shape.len();
    let mut coords: Vec<Vec<i32>> = vec![Vec::new(); k];
    for (flat, _) in v.iter().enumerate().filter(|(_, &x)| x != 0.0) {
        let mut r = flat;
        for j in (0..k).rev() {
            coords[j].push((r % shape[j]) as i32);
            r /= shape[j];
        }
    }
    coords
        .into_iter()
        .map(|c| {
            let n = c.len();
            Tensor::from_vec(c, [n], &mask.device())
        })
        .collect()
}

/// `idx` (int32, 1-D) as positions in `[0, size)` along self's dim `dim`: negative indices in
/// `[-size, 0)` count from the end; any other value out of range is reported as PyTorch does
/// ("index 5 is out of bounds for dimension 0 with size 3") by the gather that passes the
/// values through (on a GPU at the next readback).
fn checked_component(op: &'static str, idx: &Tensor, size: usize, dim: usize) -> Result<Tensor> {
    let s = i32::try_from(size)
        .map_err(|_| Error::arg(op, format!("dimension {dim} of size {size} is past int32")))?;
    let neg = idx
        .lt_scalar(0)?
        .logical_and(&idx.gt_scalar(-(s as i64) - 1)?)?;
    let wrapped = Tensor::where_cond(&neg, &idx.add_scalar(s)?, idx)?;
    // A table that is its own position along `dim`, so the gather reports the user's dim.
    let mut tshape = vec![1isize; dim + 1];
    tshape[dim] = -1;
    let table =
        Tensor::arange_dtype(0.0, size as f64, 1.0, DType::I32, &idx.device())?.reshape(&tshape)?;
    tshape[dim] = idx.numel() as isize;
    table
        .gather_as(op, dim as isize, &wrapped.reshape(&tshape)?)?
        .reshape([-1])
}

/// An index tensor as int32, the type these composites compute positions in. int64 is
/// converted after checking that every value fits (on a GPU it is held as int32 already), so
/// an index past int32 is reported with its value, never wrapped into range.
fn index_i32(op: &'static str, t: &Tensor) -> Result<Tensor> {
    if t.dtype() == DType::I64 && !t.device().is_gpu() {
        let v = t.to_vec::<i64>()?;
        if let Some(bad) = v.iter().find(|v| i32::try_from(**v).is_err()) {
            return Err(Error::arg(
                op,
                format!("index {bad} is out of bounds (indices must fit in int32 here)"),
            ));
        }
    }
    if t.dtype() == DType::I32 {
        Ok(t.clone())
    } else {
        t.to_dtype(DType::I32)
    }
}
