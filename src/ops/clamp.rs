//! clamp with tensor bounds (clamp_min, clamp_max, clamp_tensor): broadcasting, NaN in the input
//! or a bound propagating, with PyTorch's gradient rules for the input and both bounds.

use crate::autograd::{record, Saved};
use crate::error::InOp;
use crate::shape::broadcast_shapes;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// `max(self, min)` elementwise with broadcasting (torch.clamp_min with a tensor): NaN
    /// propagates, and the gradient is [`Tensor::maximum`]'s, as PyTorch's is.
    pub fn clamp_min(&self, min: &Tensor) -> Result<Tensor> {
        self.clamp_tensor(Some(min), None)
    }
    /// `min(self, max)` elementwise with broadcasting (torch.clamp_max with a tensor), with
    /// [`Tensor::minimum`]'s gradient.
    pub fn clamp_max(&self, max: &Tensor) -> Result<Tensor> {
        self.clamp_tensor(None, Some(max))
    }

    /// Clamp to tensor bounds, `min(max(self, min), max)` with broadcasting (torch.clamp with
    /// tensor `min`/`max`); `max` wins where `min > max`, NaN anywhere gives NaN. The result
    /// type promotes the three dtypes. Gradients as PyTorch's: the input's passes where it is
    /// not outside the bounds, a bound's where it took effect, ties split evenly.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0], [3], &dev)?;
    /// let lo = Tensor::from_vec(vec![-1.0f32, 0.0, 0.0], [3], &dev)?;
    /// let hi = Tensor::from_vec(vec![1.0f32], [1], &dev)?;
    /// assert_eq!(x.clamp_tensor(Some(&lo), Some(&hi))?.to_vec::<f32>()?, [-1.0, 0.5, 1.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        const OP: &str = "clamp";
        let mut dt = self.dtype();
        let mut shape = self.shape().to_vec();
        for b in [min, max].into_iter().flatten() {
            self.same_device(OP, b)?;
            dt = DType::promote(dt, b.dtype());
            shape = broadcast_shapes(OP, &shape, b.shape())?;
        }
        if dt == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: OP,
                dtype: dt,
                hint: "",
            });
        }
        let x = self.to_dtype(dt)?;
        let lo = min.map(|t| t.to_dtype(dt)).transpose()?;
        let hi = max.map(|t| t.to_dtype(dt)).transpose()?;
        let (lo, hi) = match (lo, hi) {
            // One bound: PyTorch differentiates clamp_min / clamp_max as maximum / minimum.
            (Some(lo), None) => return x.maximum(&lo).in_op(OP),
            (None, Some(hi)) => return x.minimum(&hi).in_op(OP),
            (Some(lo), Some(hi)) => (lo, hi),
            (None, None) => {
                return Err(Error::arg(
                    OP,
                    "At least one of 'min' or 'max' must not be None",
                ))
            }
        };
        let out = {
            let _g = crate::no_grad();
            x.maximum(&lo)?.minimum(&hi).in_op(OP)?
        };
        let saved = (Saved::new(&x), Saved::new(&lo), Saved::new(&hi));
        Ok(record(out, OP, &[&x, &lo, &hi], saved, |s, g| {
            let (x, lo, hi) = (s.0.get()?, s.1.get()?, s.2.get()?);
            // PyTorch's rule (comparisons with NaN are false): the input's gradient passes where
            // it is not outside the bounds, a bound's where it took effect (max wins where
            // min > max), and a tie between the input and a bound (min < max) is split evenly.
            let f = |m: Tensor| m.to_dtype(g.dtype());
            let (x_lt_lo, x_gt_hi) = (f(x.lt(&lo)?)?, f(x.gt(&hi)?)?);
            let (x_eq_lo, x_eq_hi) = (f(x.eq(&lo)?)?, f(x.eq(&hi)?)?);
            let (lo_lt_hi, lo_le_hi, lo_gt_hi) =
                (f(lo.lt(&hi)?)?, f(lo.le(&hi)?)?, f(lo.gt(&hi)?)?);
            let not = |m: &Tensor| m.neg()?.add_scalar(1.0);
            let gx = not(&x_lt_lo)?.mul(&not(&x_gt_hi)?)?.mul(&not(&lo_lt_hi
                .mul(&x_eq_lo.add(&x_eq_hi)?)?
                .mul_scalar(0.5)?)?)?;
            let half = |eq: &Tensor| eq.mul(&lo_lt_hi)?.mul_scalar(0.5);
            let glo = x_lt_lo.mul(&lo_le_hi)?.add(&half(&x_eq_lo)?)?;
            let ghi = x_gt_hi
                .mul(&lo_le_hi)?
                .add(&lo_gt_hi)?
                .add(&half(&x_eq_hi)?)?;
            Ok(vec![
                Some(g.mul(&gx)?.sum_to(x.shape())?),
                Some(g.mul(&glo)?.sum_to(lo.shape())?),
                Some(g.mul(&ghi)?.sum_to(hi.shape())?),
            ])
        }))
    }
}
