//! all and any, whole-tensor and along a dim: composites of an int32 amax/amin of "is zero"
//! (comparing with zero rather than testing `!= 0`, so NaN counts as true on every device).

use crate::shape::wrap_dim;
use crate::{DType, Result, Tensor};

impl Tensor {
    /// Whether every element is non-zero (torch.all); true for an empty tensor. Bool result.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0], [2], &Device::Cpu)?;
    /// assert_eq!(x.all()?.to_vec::<bool>()?, [false]);
    /// assert_eq!(x.any()?.to_vec::<bool>()?, [true]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn all(&self) -> Result<Tensor> {
        self.truth_reduce(None, false, true)
    }
    /// Whether any element is non-zero (torch.any); false for an empty tensor. Bool result.
    pub fn any(&self) -> Result<Tensor> {
        self.truth_reduce(None, false, false)
    }
    /// [`Tensor::all`] along `dim`, keeping it as size 1 if `keepdim`.
    pub fn all_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.truth_reduce(Some(dim), keepdim, true)
    }
    /// [`Tensor::any`] along `dim`, keeping it as size 1 if `keepdim`.
    pub fn any_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.truth_reduce(Some(dim), keepdim, false)
    }

    fn truth_reduce(&self, dim: Option<isize>, keepdim: bool, all: bool) -> Result<Tensor> {
        let op = if all { "all" } else { "any" };
        let _g = crate::no_grad();
        let (dims, out_shape): (Vec<isize>, Vec<usize>) = match dim {
            None => (vec![], vec![]),
            Some(d) => {
                let d = wrap_dim(op, d, self.ndim())?;
                let mut shape = self.shape().to_vec();
                if !shape.is_empty() {
                    if keepdim {
                        shape[d] = 1;
                    } else {
                        shape.remove(d);
                    }
                }
                (vec![d as isize], shape)
            }
        };
        let reduced_empty = match dim {
            None => self.numel() == 0,
            Some(_) => self.ndim() > 0 && self.shape()[dims[0] as usize] == 0,
        };
        if reduced_empty {
            let v = if all { 1.0 } else { 0.0 };
            return Tensor::full_dtype(&out_shape, v, DType::Bool, &self.device());
        }
        let zero = self.eq_scalar(0)?.to_dtype(DType::I32)?;
        // all: no element is zero (max of "is zero" is 0); any: some element is not (min is 0).
        let r = if all {
            zero.amax(&dims, keepdim)?
        } else {
            zero.amin(&dims, keepdim)?
        };
        r.eq_scalar(0)?.reshape(&out_shape)
    }
}
