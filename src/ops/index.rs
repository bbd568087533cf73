//! Indexing: gather, scatter_add, index_select, embedding, one_hot, masked_select.

use crate::autograd::record;
use crate::backend::Storage;
use crate::shape::wrap_dim;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    fn check_index(&self, op: &'static str, index: &Tensor) -> Result<()> {
        self.same_device(op, index)?;
        if index.dtype() != DType::I32 {
            return Err(Error::DTypeMismatch {
                op,
                expected: DType::I32,
                found: index.dtype(),
            });
        }
        Ok(())
    }

    /// Bounds-check index values when they live on the host (on a GPU an out-of-range index reads
    /// zero rather than forcing a device round trip every call).
    fn check_bounds(op: &'static str, index: &Tensor, dim: usize, size: usize) -> Result<()> {
        if let Storage::Cpu(_) = &*index.storage() {
            for v in index.to_f64_vec()? {
                if v < 0.0 || v as usize >= size {
                    return Err(Error::IndexOutOfRange {
                        op,
                        index: v as i64,
                        dim,
                        size,
                    });
                }
            }
        }
        Ok(())
    }

    /// `out[i][j] = self[i][index[i][j]]` along `dim` (torch.gather).
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.check_index("gather", index)?;
        let d = wrap_dim("gather", dim, self.ndim())?;
        if self.ndim() == 0 && index.ndim() <= 1 {
            // PyTorch treats a 0-d input (and index) as one element along dim 0.
            let out = self.reshape(&[1])?.gather(0, &index.reshape(&[-1])?)?;
            return out.reshape_to(index.shape());
        }
        if index.ndim() != self.ndim() {
            return Err(Error::shape("gather", format!("Index tensor must have the same number of dimensions as input tensor ({:?} vs {:?})", index.shape(), self.shape())));
        }
        for i in 0..self.ndim() {
            if i != d && index.shape()[i] > self.shape()[i] {
                return Err(Error::shape("gather", format!("Size does not match at dimension {i} expected index {:?} to be smaller than self {:?} apart from dimension {d}", index.shape(), self.shape())));
            }
        }
        Tensor::check_bounds("gather", index, d, self.shape()[d])?;
        let x = self.dense()?;
        let s = x
            .storage()
            .gather(x.shape(), d, &index.storage(), index.layout())?;
        let out = Tensor::from_storage(s, index.shape(), self.device());
        let (shape, idx) = (self.shape().to_vec(), index.clone());
        Ok(record(out, "gather", &[self], &[], move |g| {
            let z = Tensor::full_dtype(&shape, 0.0, g.dtype(), &g.device())?;
            Ok(vec![Some(z.scatter_add(d as isize, &idx, g)?)])
        }))
    }

    /// `self` with `src` added at the positions `index` gives along `dim` (torch.scatter_add).
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.check_index("scatter_add", index)?;
        self.same_device("scatter_add", src)?;
        let d = wrap_dim("scatter_add", dim, self.ndim())?;
        if self.ndim() == 0 && index.ndim() <= 1 && src.ndim() <= 1 {
            // As gather: a 0-d tensor is one element along dim 0.
            let (i, s) = (index.reshape(&[-1])?, src.reshape(&[-1])?);
            return self.reshape(&[1])?.scatter_add(0, &i, &s)?.reshape(&[]);
        }
        if index.ndim() != self.ndim() || src.ndim() != self.ndim() {
            return Err(Error::shape("scatter_add", format!("Index tensor must have the same number of dimensions as self tensor (self {:?}, index {:?}, src {:?})", self.shape(), index.shape(), src.shape())));
        }
        for i in 0..self.ndim() {
            if index.shape()[i] > src.shape()[i] || (i != d && index.shape()[i] > self.shape()[i]) {
                return Err(Error::shape("scatter_add", format!("Expected index {:?} to be smaller than self {:?} apart from dimension {d} and to be smaller size than src {:?}", index.shape(), self.shape(), src.shape())));
            }
        }
        Tensor::check_bounds("scatter_add", index, d, self.shape()[d])?;
        let src = src.to_dtype(self.dtype())?;
        let base = self.dense()?;
        // The kernel reads src at the index's shape.
        let sl = crate::shape::Layout {
            shape: index.shape().to_vec(),
            ..src.layout().clone()
        };
        let s = base.storage().scatter_add(
            base.shape(),
            d,
            &index.storage(),
            index.layout(),
            &src.storage(),
            &sl,
        )?;
        let out = Tensor::from_storage(s, self.shape(), self.device());
        let (idx, src_shape) = (index.clone(), src.shape().to_vec());
        Ok(record(out, "scatter_add", &[self, &src], &[], move |g| {
            let gs = g.gather(d as isize, &idx)?;
            let gs = if gs.shape() == src_shape.as_slice() {
                gs
            } else {
                // src larger than index: the rest of src received no gradient.
                let rel = crate::shape::Layout {
                    shape: idx.shape().to_vec(),
                    ..crate::shape::Layout::contiguous(&src_shape)
                };
                gs.strided_scatter(&src_shape, &rel)?
            };
            Ok(vec![Some(g.clone()), Some(gs)])
        }))
    }

    /// Rows (or slices) `index` of dimension `dim` (torch.index_select); `index` is 1-D.
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.check_index("index_select", index)?;
        let d = wrap_dim("index_select", dim, self.ndim())?;
        if index.ndim() > 1 {
            return Err(Error::shape(
                "index_select",
                format!(
                    "index_select(): Index is supposed to be a vector (got shape {:?})",
                    index.shape()
                ),
            ));
        }
        let index = index.reshape(&[-1])?;
        if self.ndim() == 0 {
            return self.reshape(&[1])?.index_select(0, &index)?.reshape(&[]);
        }
        let mut shape = self.shape().to_vec();
        shape[d] = index.numel();
        let mut ishape = vec![1isize; self.ndim()];
        ishape[d] = index.numel() as isize;
        let idx = index.reshape(&ishape)?.expand(&shape)?;
        self.gather(dim, &idx)
    }

    /// Look up rows of `weight` (torch.nn.functional.embedding): `self` holds indices.
    pub fn embedding(&self, weight: &Tensor) -> Result<Tensor> {
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
            .index_select(0, &self.reshape(&[-1])?)?
            .reshape(&shape)
    }

    /// One-hot encoding of integer labels, as I32 with a trailing dimension of `num_classes`.
    pub fn one_hot(&self, num_classes: usize) -> Result<Tensor> {
        if self.dtype() != DType::I32 {
            return Err(Error::DTypeMismatch {
                op: "one_hot",
                expected: DType::I32,
                found: self.dtype(),
            });
        }
        Tensor::check_bounds("one_hot", self, 0, num_classes)?;
        let classes =
            Tensor::arange_dtype(0.0, num_classes as f64, 1.0, DType::I32, &self.device())?;
        self.unsqueeze(-1)?.eq(&classes)?.to_dtype(DType::I32)
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
        let x = self.expand(&shape)?.reshape(&[-1])?;
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
