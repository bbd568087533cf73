//! Rounding (`floor`, `ceil`, `round`, `trunc`) and the remainders of a division (`remainder`,
//! `fmod`), with PyTorch's integer semantics: rounding an integer tensor copies it, and integer
//! remainders are exact, a zero divisor an error.

use super::binary_op::zero_division;
use super::{BinaryOp, UnaryOp};
use crate::{Result, Scalar, Tensor};

impl Tensor {
    /// The largest integer not above each element (`torch.floor`). Integer tensors are returned
    /// as a copy (they are integral already), bool tensors refused; the gradient is zero.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-1.5f32, -0.5, 0.5, 2.0], [4], &Device::Cpu)?;
    /// assert_eq!(x.floor()?.to_vec::<f32>()?, vec![-2.0, -1.0, 0.0, 2.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn floor(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Floor)
    }

    /// The smallest integer not below each element (`torch.ceil`); integers as
    /// [`Tensor::floor`].
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-1.5f32, -0.5, 0.5, 2.0], [4], &Device::Cpu)?;
    /// assert_eq!(x.ceil()?.to_vec::<f32>()?, vec![-1.0, -0.0, 1.0, 2.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn ceil(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Ceil)
    }

    /// The nearest integer to each element, halves to even (`torch.round`: 0.5 -> 0,
    /// 1.5 -> 2, 2.5 -> 2); integers as [`Tensor::floor`]. No `decimals` argument.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -2.5, 2.6], [5], &Device::Cpu)?;
    /// assert_eq!(x.round()?.to_vec::<f32>()?, vec![0.0, 2.0, 2.0, -2.0, 3.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn round(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Round)
    }

    /// Each element rounded toward zero (`torch.trunc`); integers as [`Tensor::floor`].
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-1.7f32, 1.7, 3.0], [3], &Device::Cpu)?;
    /// assert_eq!(x.trunc()?.to_vec::<f32>()?, vec![-1.0, 1.0, 3.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn trunc(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Trunc)
    }

    /// `self - floor(self / other) * other` with the sign of `other` (`torch.remainder`,
    /// Python's `%`), broadcasting and promoting types as [`Tensor::add`]. Floats follow
    /// PyTorch's formula (`fmod`, plus `other` where the signs differ; a zero divisor gives
    /// NaN). Integers are exact, and a zero divisor is PyTorch's `ZeroDivisionError`: at once on
    /// the CPU; on a GPU it is checked on the device and reported by the thread's next read back
    /// (`to_vec`, `item`, `synchronize`), as an out-of-range index is. Bool tensors are refused.
    /// Gradients: `1` for `self`, `-floor(self / other)` for `other`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let a = Tensor::from_vec(vec![-7i64, 7, -7, 7], [4], &dev)?;
    /// let b = Tensor::from_vec(vec![3i64, 3, -3, -3], [4], &dev)?;
    /// assert_eq!(a.remainder(&b)?.to_vec::<i64>()?, vec![2, 1, -1, -2]);
    /// let x = Tensor::from_vec(vec![-7.5f32, 7.5], [2], &dev)?;
    /// assert_eq!(x.remainder(&Tensor::scalar(2.0f32, &dev)?)?.to_vec::<f32>()?, vec![0.5, 1.5]);
    /// assert!(a.remainder(&a.zeros_like()?).is_err()); // ZeroDivisionError
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Remainder, other)
    }

    /// `self - trunc(self / other) * other` with the sign of `self` (`torch.fmod`, C's `fmod`),
    /// exact for floats and integers; broadcasting, types and a zero divisor as
    /// [`Tensor::remainder`]. Gradients: `1` for `self`, `-trunc(self / other)` for `other`.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let a = Tensor::from_vec(vec![-7i32, 7, -7, 7], [4], &dev)?;
    /// let b = Tensor::from_vec(vec![3i32, 3, -3, -3], [4], &dev)?;
    /// assert_eq!(a.fmod(&b)?.to_vec::<i32>()?, vec![-1, 1, -1, 1]);
    /// let x = Tensor::from_vec(vec![-7.5f32, 7.5], [2], &dev)?;
    /// assert_eq!(x.fmod(&Tensor::scalar(2.0f32, &dev)?)?.to_vec::<f32>()?, vec![-1.5, 1.5]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn fmod(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Fmod, other)
    }

    /// `self % c` as [`Tensor::remainder`], the result type as [`Tensor::add_scalar`]'s
    /// (`int % 2` stays integer, `int % 2.5` is f32). An integer zero divisor is refused at once.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-3i64, 4], [2], &Device::Cpu)?;
    /// assert_eq!(x.remainder_scalar(3)?.to_vec::<i64>()?, vec![0, 1]);
    /// assert_eq!(x.remainder_scalar(-2.5)?.to_vec::<f32>()?, vec![-0.5, -1.0]);
    /// assert!(x.remainder_scalar(0).is_err()); // ZeroDivisionError
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn remainder_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.divide_scalar(BinaryOp::Remainder, c.into())
    }

    /// `fmod(self, c)` as [`Tensor::fmod`], the result type as [`Tensor::remainder_scalar`]'s.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-3i64, 4], [2], &Device::Cpu)?;
    /// assert_eq!(x.fmod_scalar(-2)?.to_vec::<i64>()?, vec![-1, 0]);
    /// assert_eq!(x.fmod_scalar(2.5)?.to_vec::<f32>()?, vec![-0.5, 1.5]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn fmod_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.divide_scalar(BinaryOp::Fmod, c.into())
    }

    /// `self op c` for the division remainders, against a 0-d tensor of the promoted type
    /// (PyTorch casts a wrapped scalar to the common dtype for these ops too). A bool tensor
    /// with an integer scalar is int64, as PyTorch's.
    fn divide_scalar(&self, op: BinaryOp, c: Scalar) -> Result<Tensor> {
        let dt = self.dtype().promote_scalar(c);
        let x = self.to_dtype(dt)?;
        if dt.is_float() {
            return x.binary(op, &x.scalar_like(c.to_f64())?);
        }
        let c = c.to_int(op.name(), dt)?;
        if c == 0 {
            return Err(zero_division(op.name()));
        }
        x.binary(op, &Tensor::scalar_int(c, dt, &x.device())?)
    }
}
