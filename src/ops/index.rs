//! Indexing: gather, scatter_add, index_select, embedding, one_hot, masked_select.

use crate::autograd::{record, Saved};
use crate::shape::wrap_dim;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// The index tensor of `op` is an int64 ([`DType::INDEX`], PyTorch's) or int32 tensor on
    /// `self`'s device. Its values are checked by the kernels that read them (on the host for
    /// the CPU, on the device for a GPU, reported at the next readback:
    /// `backend/gpu/checks.rs`).
    fn check_index(&self, op: &'static str, index: &Tensor) -> Result<()> {
        self.same_device(op, index)?;
        if !index.dtype().is_int() {
            return Err(Error::DTypeMismatch {
                op,
                expected: DType::INDEX,
                found: index.dtype(),
            });
        }
        Ok(())
    }

    /// `out[i][j] = self[i][index[i][j]]` along `dim` (torch.gather).
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.gather_as("gather", dim, index)
    }

    /// `gather` for `op`: shape, dtype and index errors name `op` (index_select, embedding and
    /// the losses are gathers).
    pub(crate) fn gather_as(&self, op: &'static str, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.check_index(op, index)?;
        let d = wrap_dim(op, dim, self.ndim())?;
        if self.ndim() == 0 && index.ndim() <= 1 {
            // PyTorch treats a 0-d input (and index) as one element along dim 0.
            let out = self.reshape([1])?.gather_as(op, 0, &index.reshape([-1])?)?;
            return out.reshape(index.shape());
        }
        if index.ndim() != self.ndim() {
            return Err(Error::shape(op, format!("Index tensor must have the same number of dimensions as input tensor ({:?} vs {:?})", index.shape(), self.shape())));
        }
        for i in 0..self.ndim() {
            if i != d && index.shape()[i] > self.shape()[i] {
                return Err(Error::shape(op, format!("Size does not match at dimension {i} expected index {:?} to be smaller than self {:?} apart from dimension {d}", index.shape(), self.shape())));
            }
        }
        let x = self.dense()?;
        let s = x
            .storage()
            .gather(op, x.shape(), d, &index.storage(), index.layout())?;
        let out = Tensor::from_storage(s, index.shape(), self.device());
        let saved = (self.shape().to_vec(), Saved::new(index), d, op);
        Ok(record(out, op, &[self], saved, |s, g| {
            let (shape, idx, d, op) = s;
            Ok(vec![Some(Tensor::zeros_scatter_add(
                op,
                shape,
                *d,
                &idx.get()?,
                g,
            )?)])
        }))
    }

    /// `zeros(shape).scatter_add(dim, index, src)` where `index` and `src` have one shape (the
    /// gradient of `gather`): on the CPU the zeros are the output, written in place, not a base
    /// that is copied first (a loss over a large vocabulary scatters a few values into a
    /// `[N, C]` gradient).
    pub(super) fn zeros_scatter_add(
        op: &'static str,
        shape: &[usize],
        dim: usize,
        index: &Tensor,
        src: &Tensor,
    ) -> Result<Tensor> {
        use crate::backend::{cpu, Storage};
        let in_place = match (&*index.storage(), &*src.storage()) {
            (Storage::Cpu(i), Storage::Cpu(s)) if index.shape() == src.shape() => {
                let n = crate::shape::checked_numel(op, shape)?;
                let mut out = cpu::CpuStorage::full(op, src.dtype(), n, 0.0)?;
                cpu::scatter_add_any(op, &mut out, shape, dim, i, index.layout(), s, src.layout())?;
                Some(out)
            }
            _ => None,
        };
        let Some(s) = in_place else {
            let z = Tensor::full_dtype(shape, 0.0, src.dtype(), &src.device())?;
            return z.scatter_add_as(op, dim as isize, index, src);
        };
        let out = Tensor::from_storage(Storage::Cpu(s), shape, src.device());
        let saved = (Saved::new(index), dim, op);
        Ok(record(out, op, &[src], saved, |s, g| {
            let (idx, d, op) = s;
            Ok(vec![Some(g.gather_as(op, *d as isize, &idx.get()?)?)])
        }))
    }

    /// `self` with `src` added at the positions `index` gives along `dim` (torch.scatter_add).
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_add_as("scatter_add", dim, index, src)
    }

    /// `scatter_add` for `op` (one_hot and gather's gradient are scatter_adds).
    pub(crate) fn scatter_add_as(
        &self,
        op: &'static str,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
    ) -> Result<Tensor> {
        self.check_index(op, index)?;
        self.same_device(op, src)?;
        let d = wrap_dim(op, dim, self.ndim())?;
        if self.ndim() == 0 && index.ndim() <= 1 && src.ndim() <= 1 {
            // As gather: a 0-d tensor is one element along dim 0.
            let (i, s) = (index.reshape([-1])?, src.reshape([-1])?);
            return self
                .reshape([1])?
                .scatter_add_as(op, 0, &i, &s)?
                .reshape([]);
        }
        if index.ndim() != self.ndim() || src.ndim() != self.ndim() {
            return Err(Error::shape(op, format!("Index tensor must have the same number of dimensions as self tensor (self {:?}, index {:?}, src {:?})", self.shape(), index.shape(), src.shape())));
        }
        for i in 0..self.ndim() {
            if index.shape()[i] > src.shape()[i] || (i != d && index.shape()[i] > self.shape()[i]) {
                return Err(Error::shape(op, format!("Expected index {:?} to be smaller than self {:?} apart from dimension {d} and to be smaller size than src {:?}", index.shape(), self.shape(), src.shape())));
            }
        }
        let src = src.to_dtype(self.dtype())?;
        let base = self.dense()?;
        // The kernel reads src at the index's shape.
        let sl = crate::shape::Layout {
            shape: index.shape().to_vec(),
            ..src.layout().clone()
        };
        let s = base.storage().scatter_add(
            op,
            base.shape(),
            d,
            &index.storage(),
            index.layout(),
            &src.storage(),
            &sl,
        )?;
        let out = Tensor::from_storage(s, self.shape(), self.device());
        let saved = (Saved::new(index), src.shape().to_vec(), d, op);
        Ok(record(out, op, &[self, &src], saved, |s, g| {
            let (idx, src_shape, d, op) = s;
            let idx = idx.get()?;
            let gs = g.gather_as(op, *d as isize, &idx)?;
            let gs = if gs.shape() == src_shape.as_slice() {
                gs
            } else {
                // src larger than index: the rest of src received no gradient.
                let rel = crate::shape::Layout {
                    shape: idx.shape().to_vec(),
                    ..crate::shape::Layout::contiguous(src_shape)
                };
                gs.strided_scatter(src_shape, &rel)?
            };
            Ok(vec![Some(g.clone()), Some(gs)])
        }))
    }

    /// Rows (or slices) `index` of dimension `dim` (torch.index_select); `index` is 1-D.
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.index_select_as("index_select", dim, index),
            |r, out| crate::onnx::forms::gather(r, self, dim, index, out),
        )
    }

    fn index_select_as(&self, op: &'static str, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.check_index(op, index)?;
        let d = wrap_dim(op, dim, self.ndim())?;
        if index.ndim() > 1 {
            return Err(Error::shape(
                op,
                format!(
                    "index_select(): Index is supposed to be a vector (got shape {:?})",
                    index.shape()
                ),
            ));
        }
        let index = index.reshape([-1])?;
        if self.ndim() == 0 {
            return self
                .reshape([1])?
                .index_select_as(op, 0, &index)?
                .reshape([]);
        }
        let mut shape = self.shape().to_vec();
        shape[d] = index.numel();
        let mut ishape = vec![1isize; self.ndim()];
        ishape[d] = index.numel() as isize;
        // A broadcast view of the index (the CPU check reads each stored index once).
        let idx = index.reshape(&ishape)?.expand(&shape)?;
        self.gather_as(op, dim, &idx)
    }

    /// Look up rows of `weight` (torch.nn.functional.embedding): `self` holds indices.
    pub fn embedding(&self, weight: &Tensor) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.embedding_untraced(weight),
            |r, out| crate::onnx::forms::gather(r, weight, 0, self, out),
        )
    }

    /// [`embedding`](Self::embedding) itself; the public function records it for ONNX export.
    fn embedding_untraced(&self, weight: &Tensor) -> Result<Tensor> {
        let _p = crate::profiler::op("embedding", &[self, weight]);
        if weight.ndim() != 2 {
            return Err(Error::shape(
                "embedding",
                format!(
                    "weight must be 2-D [num_embeddings, embedding_dim], got {:?}",
                    weight.shape()
                ),
            ));
        }
        let mut shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
        shape.push(weight.shape()[1] as isize);
        weight
            .index_select_as("embedding", 0, &self.reshape([-1])?)?
            .reshape(&shape)
    }

    /// One-hot encoding of integer labels, as int64 (PyTorch's) with a trailing dimension of
    /// `num_classes` (a scatter of ones, as in PyTorch: a label outside `[0, num_classes)` is an
    /// error).
    pub fn one_hot(&self, num_classes: usize) -> Result<Tensor> {
        let mut shape = self.shape().to_vec();
        shape.push(num_classes);
        // Scattered in int32 (each count is 0 or 1, and int32 stays on a GPU's device), then
        // widened.
        let zeros = Tensor::full_dtype(&shape, 0.0, DType::I32, &self.device())?;
        let idx = self.unsqueeze(-1)?;
        let ones = Tensor::full_dtype([1], 1.0, DType::I32, &self.device())?;
        let ones = ones.reshape(vec![1; idx.ndim()])?.expand(idx.shape())?;
        zeros
            .scatter_add_as("one_hot", -1, &idx, &ones)?
            .to_dtype(DType::INDEX)
    }

    /// The elements where `mask` is true, as a 1-D tensor (reads the mask back to size the result).
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        self.same_device("masked_select", mask)?;
        if mask.dtype() != DType::Bool {
            return Err(Error::DTypeMismatch {
                op: "masked_select",
                expected: DType::Bool,
                found: mask.dtype(),
            });
        }
        let shape = crate::shape::broadcast_shapes("masked_select", self.shape(), mask.shape())?;
        let x = self.expand(&shape)?.reshape([-1])?;
        let m = mask.expand(&shape)?.to_f64_vec()?;
        let pos: Vec<i32> = m
            .iter()
            .enumerate()
            .filter(|(_, &v)| v != 0.0)
            .map(|(i, _)| i as i32)
            .collect();
        let n = pos.len();
        let idx = Tensor::from_vec(pos, [n], &self.device())?;
        x.index_select(0, &idx)
    }
}
