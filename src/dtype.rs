//! Element types: [`DType`], type promotion as PyTorch's `torch.result_type` does it, and
//! [`Scalar`], a Python number (int, float or bool) given to an op.
//!
//! ```
//! use wgtorch::{DType, Device, Tensor};
//! assert_eq!(DType::promote(DType::I64, DType::F16), DType::F16); // int op float -> the float
//! assert_eq!(DType::promote(DType::F16, DType::BF16), DType::F32);
//! let i = Tensor::from_vec(vec![1i64, 2], [2], &Device::Cpu)?;
//! assert_eq!((&i * 2.5).dtype(), DType::F32); // a float scalar lifts ints to the default float
//! assert_eq!((&i * 2).dtype(), DType::I64);
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::backend::cpu::vmath;
use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use wgtorch::DType;
/// assert_eq!(DType::F32.size_in_bytes(), 4);
/// assert!(DType::BF16.is_float());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean (masks, comparison results).
    Bool,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer: PyTorch's index dtype ([`DType::INDEX`]) and its default for
    /// class labels. On the CPU a real `i64` vector with wrapping (two's complement) arithmetic.
    /// On a GPU (WGSL has no 64-bit integers) it is stored as int32: values outside the int32
    /// range are refused with an error (at upload, at a cast, and for ops whose result leaves
    /// the range: those run in i64 on the host and upload the checked result), never wrapped.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// Single precision (the default).
    F32,
    /// Double precision (CPU only).
    F64,
}

impl DType {
    /// The dtype of indices the crate produces (argmax, max_dim's indices, sort, topk, ...) and
    /// the default of integer results PyTorch types as `torch.long` (integer sums, one_hot):
    /// int64, as PyTorch's. New index-producing ops use this constant.
    ///
    /// ```
    /// use wgtorch::{DType, Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0], [3], &Device::Cpu)?;
    /// assert_eq!(x.argmax(Some(0), false)?.dtype(), DType::INDEX);
    /// assert_eq!(DType::INDEX, DType::I64);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub const INDEX: DType = DType::I64;

    /// Bytes per element on the CPU.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }
    /// Floating-point types.
    pub fn is_float(self) -> bool {
        match self {
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => true,
            DType::Bool | DType::I32 | DType::I64 => false,
        }
    }
    /// Integer types (bool excluded).
    pub fn is_int(self) -> bool {
        match self {
            DType::I32 | DType::I64 => true,
            DType::Bool | DType::F16 | DType::BF16 | DType::F32 | DType::F64 => false,
        }
    }
    /// PyTorch's short name (`float32`, `int32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
    /// The type both operands are promoted to in a binary op (PyTorch's `result_type` for
    /// tensors of the same category order bool < int < float): int32 with int64 is int64, an
    /// integer with a float is the float, f16 with bf16 is f32.
    ///
    /// ```
    /// use wgtorch::DType;
    /// assert_eq!(DType::promote(DType::I32, DType::I64), DType::I64);
    /// assert_eq!(DType::promote(DType::I64, DType::F16), DType::F16);
    /// assert_eq!(DType::promote(DType::Bool, DType::I32), DType::I32);
    /// ```
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        match (a.is_float(), b.is_float()) {
            (true, false) => a,
            (false, true) => b,
            (false, false) => a.max(b),
            (true, true) => match (a, b) {
                (DType::F16, DType::BF16) | (DType::BF16, DType::F16) => DType::F32,
                _ => a.max(b),
            },
        }
    }
    /// Whether an op's result of type `from` may be written into a tensor of type `to` in place
    /// (PyTorch's `can_cast`): never to a lower category (float -> int, int -> bool).
    pub fn can_cast(from: DType, to: DType) -> bool {
        let category = |d: DType| match d {
            DType::Bool => 0,
            DType::I32 | DType::I64 => 1,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => 2,
        };
        category(from) <= category(to)
    }
    /// The type of `tensor op scalar` for a tensor of this dtype (PyTorch's `result_type` with a
    /// Python number): a scalar of a higher category (bool < int < float) gives that category's
    /// default type (int64, float32), otherwise the tensor's dtype wins, so `f16 * 2.0` stays
    /// f16 and `int32 * 2` stays int32, but `int32 * 1.0` is f32 and `bool + 1` is int64.
    pub fn promote_scalar(self, s: Scalar) -> DType {
        match s {
            Scalar::Float(_) if !self.is_float() => DType::F32,
            Scalar::Int(_) if self == DType::Bool => DType::I64,
            _ => self,
        }
    }
}

/// A scalar operand (`x * 2`, `x.clamp(0, 1)`), integral or floating like a Python number:
/// PyTorch types `int32_tensor * 2` as int32 but `int32_tensor * 2.0` as float32, so the kind
/// of the literal matters, not only its value. Rust's literals give the kind: `x.mul_scalar(2)`
/// is [`Scalar::Int`], `x.mul_scalar(2.0)` is [`Scalar::Float`].
///
/// ```
/// use wgtorch::{DType, Device, Tensor};
/// let x = Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu)?;
/// assert_eq!(x.mul_scalar(2)?.dtype(), DType::I32);
/// assert_eq!(x.mul_scalar(2.0)?.dtype(), DType::F32);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// An integer (Python `int`).
    Int(i64),
    /// A floating-point number (Python `float`).
    Float(f64),
}

impl Scalar {
    /// The value as f64 (integers past 2^53 round).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::Float(v) => v,
        }
    }
    /// The value as an int32 element, or PyTorch's overflow error naming `op`.
    pub(crate) fn to_i32(self, op: &'static str) -> crate::Result<i32> {
        match self {
            Scalar::Int(v) => i32::try_from(v).map_err(|_| {
                crate::Error::arg(
                    op,
                    format!("value cannot be converted to type int32 without overflow: {v}"),
                )
            }),
            Scalar::Float(v) => Ok(i32::from_f64(v)),
        }
    }
    /// The value as an int64 element (a float truncates toward zero).
    pub(crate) fn to_i64(self) -> i64 {
        match self {
            Scalar::Int(v) => v,
            Scalar::Float(v) => i64::from_f64(v),
        }
    }
    /// The value as an element of the integer dtype `dt` (int32's overflow error named `op`).
    pub(crate) fn to_int(self, op: &'static str, dt: DType) -> crate::Result<i64> {
        match dt {
            DType::I64 => Ok(self.to_i64()),
            DType::I32 => self.to_i32(op).map(i64::from),
            // Callers pass integer dtypes; the narrowest check for any other.
            DType::Bool | DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                self.to_i32(op).map(i64::from)
            }
        }
    }
}

macro_rules! scalar_from {
    ($variant:ident, $as:ty: $($t:ty),*) => {
        $(impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar {
                Scalar::$variant(v as $as)
            }
        })*
    };
}
scalar_from!(Int, i64: i32, i64, u32);
scalar_from!(Float, f64: f32, f64);

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())
    }
}

/// Scalar math used by the CPU kernels: implemented by the two compute types, `f32` and `f64`.
pub trait Real: num_traits::Float + Send + Sync + 'static + std::iter::Sum {
    /// The error function.
    fn erf(self) -> Self;
    /// Convert from f64.
    fn of(v: f64) -> Self;
    /// `e^x` as the CPU kernels compute it: vectorisable for f32
    /// ([`vmath`], within 1 ulp), the platform's for f64.
    fn vexp(self) -> Self {
        self.exp()
    }
    /// `tanh(x)` as the CPU kernels compute it (vectorisable for f32).
    fn vtanh(self) -> Self {
        self.tanh()
    }
    /// `1 / (1 + e^{-x})` as the CPU kernels compute it (vectorisable for f32).
    fn vsigmoid(self) -> Self {
        Self::one() / (Self::one() + (-self).exp())
    }
    /// The standard normal CDF `(1 + erf(x / √2)) / 2` (vectorisable for f32, and without the
    /// cancellation of `1 + erf` in the left tail).
    fn norm_cdf(self) -> Self {
        let h = Self::of(0.5);
        h * (Self::one() + (self * Self::of(std::f64::consts::FRAC_1_SQRT_2)).erf())
    }
    /// The standard normal density `e^{-x²/2} / √(2π)` (vectorisable for f32).
    fn norm_pdf(self) -> Self {
        (Self::of(-0.5) * self * self).exp() * Self::of(0.398_942_280_401_432_7)
    }
    /// `(norm_cdf(x), norm_pdf(x))`, sharing the exponential for f32.
    fn norm_cdf_pdf(self) -> (Self, Self) {
        (self.norm_cdf(), self.norm_pdf())
    }
}
impl Real for f32 {
    #[inline(always)]
    fn erf(self) -> Self {
        vmath::erf(self)
    }
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn vexp(self) -> Self {
        vmath::exp(self)
    }
    #[inline(always)]
    fn vtanh(self) -> Self {
        vmath::tanh(self)
    }
    #[inline(always)]
    fn vsigmoid(self) -> Self {
        vmath::sigmoid(self)
    }
    #[inline(always)]
    fn norm_cdf(self) -> Self {
        vmath::norm_cdf(self)
    }
    #[inline(always)]
    fn norm_pdf(self) -> Self {
        vmath::norm_pdf(self)
    }
    #[inline(always)]
    fn norm_cdf_pdf(self) -> (Self, Self) {
        vmath::norm_cdf_pdf(self)
    }
}
impl Real for f64 {
    fn erf(self) -> Self {
        libm::erf(self)
    }
    fn of(v: f64) -> Self {
        v
    }
}

/// A Rust type that can be a tensor element. Each has a compute type ([`Real`]) that CPU kernels
/// compute in: half types compute in f32 and round once per op, as PyTorch's CPU kernels do.
pub trait Elem: Copy + Send + Sync + 'static + fmt::Debug + PartialOrd + Default {
    /// The dtype tag.
    const DTYPE: DType;
    /// The compute type.
    type Acc: Real;
    /// Widen to the compute type.
    fn to_acc(self) -> Self::Acc;
    /// Narrow from the compute type: floats round to nearest; integers wrap (two's complement,
    /// as integer arithmetic does on every device), so an exact sum past `i32::MAX` wraps.
    fn from_acc(v: Self::Acc) -> Self;
    /// Widen to f64 (exact for every element type).
    fn to_f64(self) -> f64;
    /// Narrow from f64.
    fn from_f64(v: f64) -> Self;
    /// Whether this is an integer type (bool included): conversions from it go through
    /// [`Elem::to_i64`], exact where f64 is not (int64 past 2^53).
    const INT: bool;
    /// As int64 (integers exactly; floats truncate toward zero, saturating; NaN is 0).
    fn to_i64(self) -> i64;
    /// From int64: integers narrow with wrapping (PyTorch's int64 -> int32), floats round once
    /// to nearest, bool is `v != 0`.
    fn from_i64(v: i64) -> Self;
}

macro_rules! float_elem {
    ($t:ty, $dt:expr, $acc:ty, $to:expr, $from:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $dt;
            type Acc = $acc;
            #[inline(always)]
            fn to_acc(self) -> $acc {
                ($to)(self)
            }
            #[inline(always)]
            fn from_acc(v: $acc) -> Self {
                ($from)(v)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                ($to)(self) as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                ($from)(v as $acc)
            }
            const INT: bool = false;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                ($to)(self) as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                ($from)(v as $acc)
            }
        }
    };
}
float_elem!(f32, DType::F32, f32, |x| x, |x| x);
float_elem!(f64, DType::F64, f64, |x| x, |x| x);
float_elem!(f16, DType::F16, f32, f16::to_f32, f16::from_f32);
float_elem!(bf16, DType::BF16, f32, bf16::to_f32, bf16::from_f32);

impl Elem for i32 {
    const DTYPE: DType = DType::I32;
    type Acc = f64;
    #[inline(always)]
    fn to_acc(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_acc(v: f64) -> Self {
        // f64 -> i64 is exact for every sum or difference of two i32s; the narrowing wraps.
        v as i64 as i32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i32
    }
    const INT: bool = true;
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as i32
    }
}
impl Elem for i64 {
    const DTYPE: DType = DType::I64;
    type Acc = f64;
    #[inline(always)]
    fn to_acc(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_acc(v: f64) -> Self {
        // Integer arithmetic on int64 never goes through the compute type (the kernels have
        // i64 paths); this serves the generic fallbacks, exact below 2^53.
        v as i64
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    const INT: bool = true;
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v
    }
}
impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    type Acc = f32;
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self as u8 as f32
    }
    #[inline(always)]
    fn from_acc(v: f32) -> Self {
        v != 0.0
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    const INT: bool = true;
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}
