//! isnan, isinf, isfinite (bool results) and nan_to_num. Composites: NaN is found as "neither
//! finite nor infinite", with finite as `x - x == 0`, since GPU compilers may fold `x != x`.

use crate::error::InOp;
use crate::{DType, Result, Tensor};

/// Keyword arguments of [`Tensor::nan_to_num_with`] (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct NanToNumOptions {
    /// What NaN becomes (default 0).
    pub nan: f64,
    /// What +inf becomes (default: the dtype's largest finite value).
    pub posinf: Option<f64>,
    /// What -inf becomes (default: the dtype's lowest finite value).
    pub neginf: Option<f64>,
}

/// The largest finite value of a float dtype (torch.finfo(dtype).max).
fn finite_max(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.3895313892515355e38,
        DType::F64 => f64::MAX,
        _ => f32::MAX as f64,
    }
}

impl Tensor {
    /// Whether each element is finite (torch.isfinite); integers and bools always are.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, f32::NAN, f32::INFINITY], [3], &Device::Cpu)?;
    /// assert_eq!(x.isfinite()?.to_vec::<bool>()?, [true, false, false]);
    /// assert_eq!(x.isnan()?.to_vec::<bool>()?, [false, true, false]);
    /// assert_eq!(x.isinf()?.to_vec::<bool>()?, [false, false, true]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn isfinite(&self) -> Result<Tensor> {
        let _g = crate::no_grad();
        if !self.dtype().is_float() {
            return Tensor::full_dtype(self.shape(), 1.0, DType::Bool, &self.device());
        }
        // inf - inf and NaN - NaN are NaN, which equals nothing.
        self.sub(self)?.eq_scalar(0).in_op("isfinite")
    }
    /// Whether each element is +inf or -inf (torch.isinf).
    pub fn isinf(&self) -> Result<Tensor> {
        let _g = crate::no_grad();
        if !self.dtype().is_float() {
            return Tensor::full_dtype(self.shape(), 0.0, DType::Bool, &self.device());
        }
        self.abs()?.eq_scalar(f64::INFINITY).in_op("isinf")
    }
    /// Whether each element is NaN (torch.isnan).
    pub fn isnan(&self) -> Result<Tensor> {
        let _g = crate::no_grad();
        if !self.dtype().is_float() {
            return Tensor::full_dtype(self.shape(), 0.0, DType::Bool, &self.device());
        }
        let number = self.isfinite()?.logical_or(&self.isinf()?)?;
        number.eq_scalar(0).in_op("isnan")
    }

    /// NaN to 0, +inf to the dtype's largest finite value, -inf to its lowest
    /// (torch.nan_to_num). The gradient passes where the input is finite, zero elsewhere.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY], [3], &Device::Cpu)?;
    /// assert_eq!(x.nan_to_num()?.to_vec::<f32>()?, [0.0, 1.0, f32::MIN]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn nan_to_num(&self) -> Result<Tensor> {
        self.nan_to_num_with(NanToNumOptions::default())
    }

    /// [`Tensor::nan_to_num`] with PyTorch's keyword arguments (nan, posinf, neginf).
    pub fn nan_to_num_with(&self, o: NanToNumOptions) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.copy_as(self.dtype(), "nan_to_num");
        }
        let max = finite_max(self.dtype());
        let (nan, posinf, neginf) = {
            let _g = crate::no_grad();
            (
                self.isnan()?,
                self.eq_scalar(f64::INFINITY)?,
                self.eq_scalar(f64::NEG_INFINITY)?,
            )
        };
        let fill = |mask: &Tensor, v: f64, x: &Tensor| {
            Tensor::where_cond(mask, &self.scalar_like(v)?, x).in_op("nan_to_num")
        };
        let y = fill(&neginf, o.neginf.unwrap_or(-max), self)?;
        let y = fill(&posinf, o.posinf.unwrap_or(max), &y)?;
        fill(&nan, o.nan, &y)
    }
}
