//! In-place ops. Each computes out of place, then writes into the tensor's own storage and bumps
//! its version counter, so autograd can detect a saved tensor that changed.

use crate::error::InOp;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    fn check_inplace(&self, op: &'static str) -> Result<()> {
        crate::onnx::trace::before_write(self, op)?;
        if crate::is_grad_enabled() && self.requires_grad() {
            if self.is_leaf() {
                return Err(Error::Autograd(format!(
                    "a leaf Variable that requires grad is being used in an in-place operation ({op}). Wrap the update in wgtorch::no_grad() or use the out-of-place op."
                )));
            }
            return Err(Error::Autograd(format!(
                "{op}: in-place operations on tensors that are part of the autograd graph are not supported; use the out-of-place op."
            )));
        }
        Ok(())
    }

    /// Write `value`'s elements (broadcast, converted to this dtype) into `self`.
    ///
    /// `value` may overlap `self` (the tensor itself, a transposed view of it, a module's own
    /// state_dict): the copy then reads through a temporary, so every element gets the value the
    /// source had before the copy.
    pub fn copy_(&self, value: &Tensor) -> Result<&Tensor> {
        self.check_inplace("copy_")?;
        let src = value
            .to(&self.device())?
            .to_dtype(self.dtype())?
            .expand(self.shape())
            .in_op("copy_")?;
        let src = if src.shares_storage_with(self) {
            if src.layout() == self.layout() {
                // The same elements: nothing moves (PyTorch's early exit).
                self.0.storage.bump();
                return Ok(self);
            }
            // Read the overlapping source out first: the storage is locked once, for writing.
            src.copy_as(src.dtype(), "copy_")?
        } else {
            src
        };
        {
            let mut dst = self.0.storage.data.write();
            let s = src.storage();
            dst.copy_into(self.layout(), &s, src.layout())?;
        }
        self.0.storage.bump();
        Ok(self)
    }
    pub(crate) fn assign(
        &self,
        op: &'static str,
        f: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<&Tensor> {
        self.check_inplace(op)?;
        let v = {
            let _g = crate::no_grad();
            f(&self.detach())?
        };
        if !DType::can_cast(v.dtype(), self.dtype()) {
            return Err(Error::arg(
                op,
                format!(
                    "result type {} can't be cast to the desired output type {}",
                    v.dtype(),
                    self.dtype()
                ),
            ));
        }
        if v.shape() != self.shape() {
            return Err(Error::shape(
                op,
                format!(
                    "output with shape {:?} doesn't match the broadcast shape {:?}",
                    self.shape(),
                    v.shape()
                ),
            ));
        }
        self.copy_(&v)
    }
    /// `self += other`
    pub fn add_(&self, other: &Tensor) -> Result<&Tensor> {
        self.assign("add_", |x| x.add(other))
    }
    /// `self -= other`
    pub fn sub_(&self, other: &Tensor) -> Result<&Tensor> {
        self.assign("sub_", |x| x.sub(other))
    }
    /// `self *= other`
    pub fn mul_(&self, other: &Tensor) -> Result<&Tensor> {
        self.assign("mul_", |x| x.mul(other))
    }
    /// `self /= other`
    pub fn div_(&self, other: &Tensor) -> Result<&Tensor> {
        self.assign("div_", |x| x.div(other))
    }
    /// `relu` in place.
    pub fn relu_(&self) -> Result<&Tensor> {
        self.assign("relu_", |x| x.relu())
    }
    /// `clamp` in place.
    pub fn clamp_<S: Into<crate::Scalar>>(
        &self,
        min: Option<S>,
        max: Option<S>,
    ) -> Result<&Tensor> {
        self.assign("clamp_", |x| x.clamp(min, max))
    }
    /// `masked_fill` in place.
    pub fn masked_fill_(&self, mask: &Tensor, value: f64) -> Result<&Tensor> {
        self.assign("masked_fill_", |x| x.masked_fill(mask, value))
    }
    /// Fill with `value`.
    pub fn fill_(&self, value: f64) -> Result<&Tensor> {
        self.assign("fill_", |x| x.full_like(value))
    }
    /// Fill with zeros.
    pub fn zero_(&self) -> Result<&Tensor> {
        self.fill_(0.0)
    }
}
