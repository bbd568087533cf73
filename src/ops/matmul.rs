//! Matrix products: matmul (with batch broadcasting and the 1-D cases), bmm, linear.

use crate::autograd::{record, Saved};
use crate::error::InOp;
use crate::shape::{broadcast_shapes, checked_numel};
use crate::{Error, Result, Tensor};

/// A `[B, R, C]` view stored column-major in its last two dims (a transposed matrix).
fn col_major(t: &Tensor) -> bool {
    let (sh, st) = (t.shape(), t.stride());
    sh[1] > 1 && sh[2] > 1 && st[1] == 1 && st[2] == sh[1]
}

impl Tensor {
    /// `[B, M, K] @ [B, K, N]` on the backend, with autograd (operands may be strided).
    fn bmm_raw(&self, other: &Tensor) -> Result<Tensor> {
        let (al, bl) = (self.layout(), other.layout());
        let s = self.storage().matmul(al, &other.storage(), bl)?;
        let out = Tensor::from_storage(s, &[al.shape[0], al.shape[1], bl.shape[2]], self.device());
        // Each operand is read only for the other's gradient (as PyTorch saves them).
        let saved = (
            Saved::new(self),
            Saved::new(other),
            [self.requires_grad(), other.requires_grad()],
            [col_major(self), col_major(other)],
        );
        Ok(record(
            out,
            "bmm",
            &[self, other],
            saved,
            |(a, b, need, col_major), g| {
                // Each gradient is computed in its operand's layout: for a transposed operand
                // (a Linear weight's `w.t()`) the product is formed transposed, so the weight's
                // own gradient comes out contiguous (no copy before the optimizer reads it).
                let ga = if need[0] {
                    let b = b.get()?;
                    Some(if col_major[0] {
                        b.bmm_raw(&g.transpose(1, 2)?)?.transpose(1, 2)?
                    } else {
                        g.bmm_raw(&b.transpose(1, 2)?)?
                    })
                } else {
                    None
                };
                let gb = if need[1] {
                    let a = a.get()?;
                    Some(if col_major[1] {
                        g.transpose(1, 2)?.bmm_raw(&a)?.transpose(1, 2)?
                    } else {
                        a.transpose(1, 2)?.bmm_raw(g)?
                    })
                } else {
                    None
                };
                Ok(vec![ga, gb])
            },
        ))
    }

    fn check_matmul(&self, op: &'static str, other: &Tensor) -> Result<()> {
        self.same_device(op, other)?;
        if self.dtype() != other.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                expected: self.dtype(),
                found: other.dtype(),
            });
        }
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op,
                dtype: self.dtype(),
                hint: "; matmul needs floating-point operands",
            });
        }
        Ok(())
    }

    /// Batched matrix multiply of two 3-D tensors.
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        let (a, b) = (crate::amp::lower(self)?, crate::amp::lower(other)?);
        a.bmm_checked(&b)
    }

    fn bmm_checked(&self, other: &Tensor) -> Result<Tensor> {
        self.check_matmul("bmm", other)?;
        if self.ndim() != 3 || other.ndim() != 3 {
            return Err(Error::shape(
                "bmm",
                format!(
                    "batch1 must be a 3D tensor and batch2 must be a 3D tensor (got {:?} and {:?})",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        if self.shape()[0] != other.shape()[0] || self.shape()[2] != other.shape()[1] {
            return Err(Error::shape("bmm", format!("Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].", self.shape()[0], self.shape()[2], other.shape()[0], other.shape()[1])));
        }
        let (a, b) = (self.shape(), other.shape());
        checked_numel("bmm", &[a[0], a[1], b[2]])?;
        self.bmm_raw(other)
    }

    /// Matrix product with PyTorch's rules: 1-D operands are promoted and the added dimension
    /// removed; batch dimensions broadcast.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (a, b) = (crate::amp::lower(self)?, crate::amp::lower(other)?);
        a.matmul_impl(&b)
    }

    fn matmul_impl(&self, other: &Tensor) -> Result<Tensor> {
        self.check_matmul("matmul", other)?;
        let (da, db) = (self.ndim(), other.ndim());
        if da == 0 || db == 0 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "both arguments to matmul need to be at least 1D, but they are {da}D and {db}D"
                ),
            ));
        }
        let a = if da == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if db == 1 {
            other.unsqueeze(1)?
        } else {
            other.clone()
        };
        let (m, k) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
        let (k2, n) = (b.shape()[b.ndim() - 2], b.shape()[b.ndim() - 1]);
        if k != k2 {
            return Err(Error::shape("matmul", format!("mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{}) (input shapes {:?} and {:?})", m, k, k2, n, self.shape(), other.shape())));
        }
        let batch = broadcast_shapes(
            "matmul",
            &a.shape()[..a.ndim() - 2],
            &b.shape()[..b.ndim() - 2],
        )?;
        let mut out_full = batch.clone();
        out_full.extend([m, n]);
        checked_numel("matmul", &out_full)?;
        let bsz: usize = batch.iter().product();
        let to3 = |t: &Tensor, r: usize, c: usize| -> Result<Tensor> {
            let mut full = batch.clone();
            full.extend([r, c]);
            let e = t.expand(&full)?;
            let shape3 = [bsz, r, c];
            match e.layout().view_strides(&shape3) {
                Some(_) => e.reshape_to(&shape3),
                None => e.contiguous()?.reshape_to(&shape3),
            }
        };
        let a3 = to3(&a, m, k)?;
        let b3 = to3(&b, k, n)?;
        let c = a3.bmm_raw(&b3)?;
        let mut out: Vec<usize> = batch.clone();
        if da > 1 {
            out.push(m);
        }
        if db > 1 {
            out.push(n);
        }
        c.reshape_to(&out)
    }

    /// `x @ weight^T + bias` (torch.nn.functional.linear).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let y = self.matmul(&weight.t()?).in_op("linear")?;
        match bias {
            Some(b) => y.add(&crate::amp::lower(b)?).in_op("linear"),
            None => Ok(y),
        }
    }
}
