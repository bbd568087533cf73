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

/// PyTorch's fold (`should_fold`): when one operand (after 1-D promotion) is a matrix and the
/// other has batch dims, fold the batch into the other's rows and multiply once, returning
/// `out_full` (`[batch.., m, n]`). A matrix on the left is handled transposed
/// (`(Bᵀ Aᵀ)ᵀ`). The batched operand folds as a view when its layout allows; a copy is made only
/// when the matrix needs a gradient (the copy is the batched operand's size, the broadcast
/// gradient it avoids is `batch` matrices); otherwise `None`, and the caller runs a batched product.
fn fold(a: &Tensor, b: &Tensor, out_full: &[usize]) -> Result<Option<Tensor>> {
    let (big, mat, transpose) = match (a.ndim(), b.ndim()) {
        (3.., 2) => (a.clone(), b.clone(), false),
        (2, 3..) => (b.transpose(-1, -2)?, a.t()?, true),
        _ => return Ok(None),
    };
    let (k, n) = (mat.shape()[0], mat.shape()[1]);
    // A sub-product of an existing tensor's sizes: no overflow.
    let rows: usize = big.shape()[..big.ndim() - 1].iter().product();
    let needs_grad = mat.requires_grad() && crate::autograd::is_grad_enabled();
    if !needs_grad && big.layout().view_strides(&[rows, k]).is_none() {
        return Ok(None);
    }
    let c = big
        .reshape([1, rows, k])?
        .bmm_raw(&mat.reshape([1, k, n])?)?;
    Ok(Some(if transpose {
        let mut shape = big.shape().to_vec();
        shape.pop();
        shape.push(n);
        c.reshape(&shape)?.transpose(-1, -2)?.contiguous()?
    } else {
        c.reshape(out_full)?
    }))
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
        crate::onnx::trace::traced(
            || {
                let (a, b) = (crate::amp::lower(self)?, crate::amp::lower(other)?);
                a.bmm_checked(&b)
            },
            |r, out| {
                use crate::onnx::trace::In;
                r.node("MatMul", &[In::T(self), In::T(other)], &[out], vec![])
            },
        )
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
    /// removed; batch dimensions broadcast. A batched operand times a matrix is computed as one
    /// matrix product with the batch folded into rows (`[B, T, K] @ [K, N]` as
    /// `[B*T, K] @ [K, N]`), so the matrix's gradient is one product too, never a
    /// `[B, K, N]` broadcast summed afterwards.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.matmul_untraced(other),
            |r, out| {
                r.node(
                    "MatMul",
                    &[
                        crate::onnx::trace::In::T(self),
                        crate::onnx::trace::In::T(other),
                    ],
                    &[out],
                    vec![],
                )
            },
        )
    }

    /// [`matmul`](Self::matmul) itself; the public function records it for ONNX export.
    fn matmul_untraced(&self, other: &Tensor) -> Result<Tensor> {
        let _p = crate::profiler::op("matmul", &[self, other]);
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
        let c = match fold(&a, &b, &out_full)? {
            Some(c) => c,
            None => {
                let bsz: usize = batch.iter().product();
                let to3 = |t: &Tensor, r: usize, c: usize| -> Result<Tensor> {
                    let mut full = batch.clone();
                    full.extend([r, c]);
                    t.expand(&full)?.reshape([bsz, r, c])
                };
                to3(&a, m, k)?.bmm_raw(&to3(&b, k, n)?)?
            }
        };
        let mut out: Vec<usize> = batch.clone();
        if da > 1 {
            out.push(m);
        }
        if db > 1 {
            out.push(n);
        }
        c.reshape(&out)
    }

    /// `x @ weight^T + bias` (torch.nn.functional.linear). Leading dims of `x` fold into rows
    /// (one GEMM each way, see [`Tensor::matmul`]).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.linear_untraced(weight, bias),
            |r, out| crate::onnx::forms::linear(r, self, weight, bias, out),
        )
    }

    /// [`linear`](Self::linear) itself; the public function records it for ONNX export.
    fn linear_untraced(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let _p = crate::profiler::op("linear", &[self, weight]);
        // Under autocast the weight is cast before it is transposed: a contiguous cast
        // converts in place, a transposed one gathers first.
        let weight = crate::amp::lower(weight)?;
        let y = self.matmul(&weight.t()?).in_op("linear")?;
        match bias {
            Some(b) => y.add(&crate::amp::lower(b)?).in_op("linear"),
            None => Ok(y),
        }
    }
}
