//! Sorting: sort, argsort and topk. One primitive (the stable row argsort: `cpu/sort.rs`, and a
//! bitonic network in `gpu/sort.rs`); the values are a `gather` of the input by the indices, so
//! their gradient scatters back to the indices through gather's backward rule.

use crate::error::InOp;
use crate::shape::wrap_dim;
use crate::{DType, Error, Result, Tensor};

/// The dtype of the index tensors sort, argsort and topk return (int64, as PyTorch's).
fn index_dtype() -> DType {
    DType::INDEX
}

/// Keyword arguments of [`Tensor::sort_with`] and [`Tensor::argsort_with`] (PyTorch's names and
/// defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortOptions {
    /// The dim to sort along (default -1, the last).
    pub dim: isize,
    /// Largest first (default false).
    pub descending: bool,
    /// Keep equal elements in their original order. The sort is always stable here (a stable
    /// order is one of the orders an unstable sort may return), so this only documents intent.
    pub stable: bool,
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            dim: -1,
            descending: false,
            stable: false,
        }
    }
}

/// Keyword arguments of [`Tensor::topk_with`] (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopkOptions {
    /// The dim to select along (default -1, the last).
    pub dim: isize,
    /// The k largest (default true), else the k smallest.
    pub largest: bool,
    /// Return them in sorted order (default true). They are always returned sorted here (an
    /// order PyTorch allows when `sorted` is false).
    pub sorted: bool,
}

impl Default for TopkOptions {
    fn default() -> Self {
        TopkOptions {
            dim: -1,
            largest: true,
            sorted: true,
        }
    }
}

impl Tensor {
    /// The indices that sort `self` along `dim` (stable; NaN above every number, as PyTorch
    /// orders it), not differentiable.
    fn argsort_raw(&self, op: &'static str, dim: isize, descending: bool) -> Result<Tensor> {
        let nd = self.ndim();
        let d = wrap_dim(op, dim, nd)?;
        let dev = self.device();
        if nd == 0 {
            return Tensor::full_dtype([], 0.0, index_dtype(), &dev);
        }
        let n = self.shape()[d];
        if i32::try_from(n).is_err() {
            return Err(Error::arg(
                op,
                format!("dim {d} has {n} elements, more than int32 indices can address"),
            ));
        }
        if n == 0 || self.numel() == 0 {
            return Tensor::full_dtype(self.shape(), 0.0, index_dtype(), &dev);
        }
        // Half types sort by their exact f32 values, bools as 0/1.
        let key = match self.dtype() {
            DType::F16 | DType::BF16 => DType::F32,
            DType::Bool => DType::I32,
            dt => dt,
        };
        let last = nd as isize - 1;
        let x = self
            .detach()
            .transpose(d as isize, last)?
            .to_dtype(key)?
            .dense()?;
        let rows = x.numel() / n;
        let s = x.storage().argsort_rows(rows, n, descending)?;
        Tensor::from_storage(s, x.shape(), dev)
            .transpose(d as isize, last)?
            .to_dtype(index_dtype())
    }

    /// Sort along the last dim, ascending: `(values, indices)` (torch.sort). NaN sorts above
    /// every number; equal elements keep their order. The values' gradient flows back to the
    /// positions the indices name.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0], [3], &Device::Cpu)?;
    /// let (v, i) = x.sort()?;
    /// assert_eq!(v.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 2, 0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn sort(&self) -> Result<(Tensor, Tensor)> {
        self.sort_with(SortOptions::default())
    }

    /// [`Tensor::sort`] with PyTorch's keyword arguments (dim, descending, stable).
    pub fn sort_with(&self, o: SortOptions) -> Result<(Tensor, Tensor)> {
        let idx = self.argsort_raw("sort", o.dim, o.descending)?;
        let values = self.gather_as("sort", o.dim, &idx)?;
        Ok((values, idx))
    }

    /// The indices that sort the last dim ascending (torch.argsort).
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0], [3], &Device::Cpu)?;
    /// assert_eq!(x.argsort()?.to_vec::<i64>()?, [1, 2, 0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn argsort(&self) -> Result<Tensor> {
        self.argsort_with(SortOptions::default())
    }

    /// [`Tensor::argsort`] with PyTorch's keyword arguments (dim, descending, stable).
    pub fn argsort_with(&self, o: SortOptions) -> Result<Tensor> {
        self.argsort_raw("argsort", o.dim, o.descending)
    }

    /// The `k` largest elements along the last dim, largest first: `(values, indices)`
    /// (torch.topk). NaN counts as the largest value. A composite: a sort, then the first `k`.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 4.0], [4], &Device::Cpu)?;
    /// let (v, i) = x.topk(2)?;
    /// assert_eq!(v.to_vec::<f32>()?, [5.0, 4.0]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 3]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn topk(&self, k: usize) -> Result<(Tensor, Tensor)> {
        self.topk_with(k, TopkOptions::default())
    }

    /// [`Tensor::topk`] with PyTorch's keyword arguments (dim, largest, sorted).
    pub fn topk_with(&self, k: usize, o: TopkOptions) -> Result<(Tensor, Tensor)> {
        let nd = self.ndim();
        let d = wrap_dim("topk", o.dim, nd)?;
        if nd == 0 {
            // One element along dim 0, as PyTorch treats a 0-d input; k = 0 and k = 1 both
            // return it, 0-d (PyTorch's result).
            if k > 1 {
                return Err(Error::arg("topk", "selected index k out of range"));
            }
            return self.sort_with(SortOptions {
                dim: o.dim,
                ..Default::default()
            });
        }
        if k > self.shape()[d] {
            return Err(Error::arg("topk", "selected index k out of range"));
        }
        let idx = self
            .argsort_raw("topk", o.dim, o.largest)?
            .narrow(d as isize, 0, k)
            .in_op("topk")?;
        let values = self.gather_as("topk", o.dim, &idx)?;
        Ok((values, idx))
    }
}
