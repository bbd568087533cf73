//! Triangular parts of matrices: tril and triu, over any batch dims. Composites: a `where` with
//! a mask built from two index ranges, so both backends and the gradient (masked the same way)
//! come from `where`.

use crate::error::InOp;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// The lower triangle of the last two dims (elements with `col - row <= diagonal`), the rest
    /// zero (torch.tril). `diagonal` 0 is the main diagonal, positive above, negative below.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::ones([2, 2], &Device::Cpu)?;
    /// assert_eq!(x.tril(0)?.to_vec::<f32>()?, [1.0, 0.0, 1.0, 1.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", diagonal, true)
    }

    /// The upper triangle of the last two dims (elements with `col - row >= diagonal`), the rest
    /// zero (torch.triu).
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::ones([2, 2], &Device::Cpu)?;
    /// assert_eq!(x.triu(0)?.to_vec::<f32>()?, [1.0, 1.0, 0.0, 1.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", diagonal, false)
    }

    fn triangle(&self, op: &'static str, diagonal: i64, lower: bool) -> Result<Tensor> {
        let nd = self.ndim();
        if nd < 2 {
            return Err(Error::arg(
                op,
                "input tensor must have at least 2 dimensions",
            ));
        }
        let (r, c) = (self.shape()[nd - 2], self.shape()[nd - 1]);
        let dev = self.device();
        let mask = {
            let _g = crate::no_grad();
            let rows =
                Tensor::arange_dtype(0.0, r as f64, 1.0, DType::I32, &dev)?.reshape([-1, 1])?;
            let cols =
                Tensor::arange_dtype(0.0, c as f64, 1.0, DType::I32, &dev)?.reshape([1, -1])?;
            let offset = cols.sub(&rows)?;
            if lower {
                offset.lt_scalar(diagonal.saturating_add(1))?
            } else {
                offset.gt_scalar(diagonal.saturating_sub(1))?
            }
        };
        Tensor::where_cond(&mask, self, &self.scalar_like(0.0)?).in_op(op)
    }
}
