//! Binary elementwise ops, each declared once: its name, its WGSL expression, its CPU scalar
//! functions and its backward rule sit side by side in one `match` per aspect (the unary ops are
//! in `elementwise.rs`).

use super::elementwise::{Eager, Emit};
use crate::autograd::Saved;
use crate::dtype::{Elem, Real};
use crate::ops::UnaryOp;
use crate::{Result, Tensor};
use num_traits::{WrappingAdd, WrappingMul, WrappingSub};

/// C's `%` on integers (truncating, the dividend's sign), without `%`'s panics: 0 for a zero
/// divisor (refused before any kernel runs) and for `-1` (`i32::MIN % -1` overflows).
#[inline(always)]
fn int_fmod<I: num_traits::PrimInt + WrappingSub>(a: I, b: I) -> I {
    if b == I::zero() || b == I::zero().wrapping_sub(&I::one()) {
        I::zero()
    } else {
        a % b
    }
}

/// PyTorch's error for an integer `remainder` / `fmod` by zero (its message is the bare
/// exception name).
pub(crate) fn zero_division(op: &'static str) -> crate::Error {
    crate::Error::arg(op, "ZeroDivisionError")
}

/// The dtypes a binary op's kernels take ([`BinaryOp::operands`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Floating-point only: integer and bool inputs are promoted to float32 (`torch.div`).
    Float,
    /// Floats and integers; two bool inputs follow PyTorch's bool arithmetic (`+` is a logical
    /// or, `-` is refused).
    Number,
    /// Floats, integers and bool.
    Any,
    /// Bool only: inputs are converted to bool (`torch.logical_and`).
    Bool,
}

op_enum! {
    /// Binary elementwise ops with broadcasting.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum BinaryOp {
        /// `a + b` (`torch.add`).
        Add => "add",
        /// `a − b` (`torch.sub`).
        Sub => "sub",
        /// `a · b` (`torch.mul`).
        Mul => "mul",
        /// `a / b`, true division (`torch.div`).
        Div => "div",
        /// `aᵇ` (`torch.pow`).
        Pow => "pow",
        /// Elementwise maximum, NaN-propagating (`torch.maximum`).
        Maximum => "maximum",
        /// Elementwise minimum, NaN-propagating (`torch.minimum`).
        Minimum => "minimum",
        /// `a == b` (`torch.eq`), a bool tensor.
        Eq => "eq",
        /// `a != b` (`torch.ne`), a bool tensor.
        Ne => "ne",
        /// `a < b` (`torch.lt`), a bool tensor.
        Lt => "lt",
        /// `a <= b` (`torch.le`), a bool tensor.
        Le => "le",
        /// `a > b` (`torch.gt`), a bool tensor.
        Gt => "gt",
        /// `a >= b` (`torch.ge`), a bool tensor.
        Ge => "ge",
        /// `torch.logical_and`.
        LogicalAnd => "logical_and",
        /// `torch.logical_or`.
        LogicalOr => "logical_or",
        /// `a − floor(a / b) · b`, the sign of `b` (`torch.remainder`, Python's `%`); exact on
        /// integers, where a zero divisor is an error.
        Remainder => "remainder",
        /// `a − trunc(a / b) · b`, the sign of `a` (`torch.fmod`, C's `fmod`); exact on
        /// integers, where a zero divisor is an error.
        Fmod => "fmod",
        /// 0 where `b <= 0`, else `a` (NaN `b` included): relu's gradient `a` through input `b`
        /// in one pass (torch.ops.aten.threshold_backward with threshold 0).
        ThresholdBackward => "threshold_backward",
        /// `a * b * (1 - b)`: sigmoid's gradient `a` through its output `b`, in one pass.
        SigmoidBackward => "sigmoid_backward",
        /// `a * (1 - b²)`: tanh's gradient `a` through its output `b`, in one pass.
        TanhBackward => "tanh_backward",
        /// `a * (Φ(b) + b φ(b))`: exact GELU's gradient `a` through its input `b`, in one pass.
        GeluBackward => "gelu_backward",
    }
}

/// The gradients of a binary op's two operands, each where it was asked for.
pub(crate) type OperandGrads<V> = (Option<V>, Option<V>);

impl BinaryOp {
    /// True for ops whose result is bool.
    pub fn is_comparison(&self) -> bool {
        use BinaryOp::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr)
    }
    /// True for integer division ops, whose integer kernels refuse a zero divisor (PyTorch's
    /// `ZeroDivisionError`): checked on the host for CPU tensors, on the device for GPU ones.
    pub fn divides_integers(&self) -> bool {
        matches!(self, BinaryOp::Remainder | BinaryOp::Fmod)
    }
    /// The dtypes the op's kernels take; the op layer converts other inputs (see
    /// [`Operands`]).
    pub fn operands(&self) -> Operands {
        use BinaryOp::*;
        match self {
            // The fused gradient ops pass an upstream gradient through a saved input or output.
            Div | Pow | ThresholdBackward | SigmoidBackward | TanhBackward | GeluBackward => {
                Operands::Float
            }
            Add | Sub | Mul | Maximum | Minimum | Remainder | Fmod | Lt | Le | Gt | Ge => {
                Operands::Number
            }
            Eq | Ne => Operands::Any,
            LogicalAnd | LogicalOr => Operands::Bool,
        }
    }
    /// True for ops only defined on floating-point inputs (integer inputs are promoted).
    pub fn needs_float(&self) -> bool {
        self.operands() == Operands::Float
    }
    /// WGSL expression of `a` and `b` (both of the kernel's element type; the integer forms of
    /// `remainder` and `fmod`, which check their divisor, are built by the kernel).
    pub fn wgsl(&self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "a + b",
            Sub => "a - b",
            Mul => "a * b",
            Div => "a / b",
            Pow => "pow_f(a, b)",
            Maximum => "max(a, b)",
            Minimum => "min(a, b)",
            ThresholdBackward => "select(0.0, a, b > 0.0 || is_nan_f(b))",
            SigmoidBackward => "a * b * (1.0 - b)",
            TanhBackward => "a * (1.0 - b * b)",
            GeluBackward => "a * gelu_grad_f(b)",
            Eq => "select(0u, 1u, a == b)",
            // Not `a != b`: naga emits SPIR-V's ordered OpFOrdNotEqual, false for NaN (PyTorch:
            // true).
            Ne => "select(0u, 1u, !(a == b))",
            Lt => "select(0u, 1u, a < b)",
            Le => "select(0u, 1u, a <= b)",
            Gt => "select(0u, 1u, a > b)",
            Ge => "select(0u, 1u, a >= b)",
            LogicalAnd => "select(0u, 1u, a != 0u && b != 0u)",
            LogicalOr => "select(0u, 1u, a != 0u || b != 0u)",
            Remainder => "remainder_f(a, b)",
            Fmod => "fmod_f(a, b)",
        }
    }
    /// The WGSL expression for f32 operands: NaN handled on the bits, since WGSL lets compilers
    /// assume there is none — max and min propagate it, `ne` is true for it and the other
    /// comparisons false, as PyTorch's.
    pub fn wgsl_f32(&self) -> &'static str {
        use BinaryOp::*;
        match self {
            Maximum => "max_nan(a, b)",
            Minimum => "min_nan(a, b)",
            Ne => "select(0u, 1u, !(a == b) || is_nan_f(a) || is_nan_f(b))",
            Eq => "select(0u, 1u, a == b && !is_nan_f(a) && !is_nan_f(b))",
            Lt => "select(0u, 1u, a < b && !is_nan_f(a) && !is_nan_f(b))",
            Le => "select(0u, 1u, a <= b && !is_nan_f(a) && !is_nan_f(b))",
            Gt => "select(0u, 1u, a > b && !is_nan_f(a) && !is_nan_f(b))",
            Ge => "select(0u, 1u, a >= b && !is_nan_f(a) && !is_nan_f(b))",
            _ => self.wgsl(),
        }
    }
    /// CPU scalar function for arithmetic ops (compute type).
    #[inline(always)]
    pub fn cpu<R: Real>(&self, a: R, b: R) -> R {
        use BinaryOp::*;
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Pow => a.powf(b),
            Maximum => {
                if a.is_nan() || a > b {
                    a
                } else {
                    b
                }
            }
            Minimum => {
                if a.is_nan() || a < b {
                    a
                } else {
                    b
                }
            }
            // PyTorch's `b <= threshold ? 0 : a`: a NaN input passes the gradient.
            ThresholdBackward => {
                if b <= R::zero() {
                    R::zero()
                } else {
                    a
                }
            }
            SigmoidBackward => a * b * (R::one() - b),
            TanhBackward => a * (R::one() - b * b),
            GeluBackward => {
                let (cdf, pdf) = b.norm_cdf_pdf();
                a * (cdf + b * pdf)
            }
            // Rust's `%` on floats is C's fmod, exact.
            Fmod => a % b,
            Remainder => {
                // PyTorch's formula: fmod, moved to the divisor's sign.
                let m = a % b;
                if m != R::zero() && ((b < R::zero()) != (m < R::zero())) {
                    m + b
                } else {
                    m
                }
            }
            _ => R::of(self.cmp(a, b) as u8 as f64),
        }
    }
    /// CPU scalar function for arithmetic ops on int32 and int64: two's complement, wrapping on
    /// overflow as PyTorch's (and WGSL's) integer arithmetic does. Float-only ops are promoted
    /// before they reach a kernel; they fall back to the float function here. A zero divisor of
    /// `remainder` / `fmod` is refused before the kernel runs; here it gives 0 (never a panic).
    #[inline(always)]
    pub fn cpu_int<I>(&self, a: I, b: I) -> I
    where
        I: Elem + num_traits::PrimInt + WrappingAdd + WrappingSub + WrappingMul,
    {
        use BinaryOp::*;
        match self {
            Add => a.wrapping_add(&b),
            Sub => a.wrapping_sub(&b),
            Mul => a.wrapping_mul(&b),
            Maximum => a.max(b),
            Minimum => a.min(b),
            Fmod => int_fmod(a, b),
            Remainder => {
                let r = int_fmod(a, b);
                if r != I::zero() && ((r < I::zero()) != (b < I::zero())) {
                    r.wrapping_add(&b)
                } else {
                    r
                }
            }
            _ => <I as Elem>::from_f64(self.cpu(<I as Elem>::to_f64(a), <I as Elem>::to_f64(b))),
        }
    }
    /// CPU comparison of ordered integers, exactly (int64 past 2^53 included).
    #[inline(always)]
    pub fn cmp_ord<I: Ord + Elem>(&self, a: I, b: I) -> bool {
        use BinaryOp::*;
        match self {
            Eq => a == b,
            Ne => a != b,
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            Ge => a >= b,
            _ => self.cmp(a.to_f64(), b.to_f64()),
        }
    }
    /// CPU comparison (and logical ops on 0/1 values).
    #[inline(always)]
    pub fn cmp<R: Real>(&self, a: R, b: R) -> bool {
        use BinaryOp::*;
        match self {
            Eq => a == b,
            Ne => a != b,
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            Ge => a >= b,
            LogicalAnd => a != R::zero() && b != R::zero(),
            LogicalOr => a != R::zero() || b != R::zero(),
            _ => false,
        }
    }
    /// [`UnaryOp::grad_by`] for two operands: the gradients for `a` and `b` (before they are
    /// summed back to the operands' shapes) by elementwise arithmetic, for `+ - * /` and a
    /// power's base, each
    /// only where `want` asks for it (PyTorch's `needs_input_grad`: a constant operand's
    /// gradient is not computed); `None` for the other ops.
    pub(crate) fn grad_by<E: Emit>(
        &self,
        e: &mut E,
        want: [bool; 2],
        a: &dyn Fn() -> Result<E::V>,
        b: &dyn Fn() -> Result<E::V>,
        y: &dyn Fn() -> Result<E::V>,
        g: &E::V,
    ) -> Result<Option<OperandGrads<E::V>>> {
        use BinaryOp::*;
        let [wa, wb] = want;
        let (da, db) = match self {
            Add => (wa.then(|| g.clone()), wb.then(|| g.clone())),
            Sub => (
                wa.then(|| g.clone()),
                wb.then(|| e.un(UnaryOp::Neg, g)).transpose()?,
            ),
            Mul => (
                wa.then(|| e.bin(Mul, g, &b()?)).transpose()?,
                wb.then(|| e.bin(Mul, g, &a()?)).transpose()?,
            ),
            Div => {
                let b = b()?;
                let da = wa.then(|| e.bin(Div, g, &b)).transpose()?;
                let db = if wb {
                    let gy = e.bin(Mul, g, &y()?)?;
                    let gy = e.bin(Div, &gy, &b)?;
                    Some(e.un(UnaryOp::Neg, &gy)?)
                } else {
                    None
                };
                (da, db)
            }
            // The exponent's rule selects (0 where the base is 0); the base's is arithmetic.
            Pow if !wb => {
                let da = if wa {
                    let b = b()?;
                    let t = e.un(UnaryOp::AddScalar(-1.0), &b)?;
                    let t = e.bin(Pow, &a()?, &t)?;
                    let gb = e.bin(Mul, g, &b)?;
                    Some(e.bin(Mul, &gb, &t)?)
                } else {
                    None
                };
                (da, None)
            }
            _ => return Ok(None),
        };
        Ok(Some((da, db)))
    }

    /// Gradients for `a` and `b` where `want` asks for them, before they are summed back to
    /// the inputs' shapes, given the saved operands and output (only what the rule reads is
    /// checked for in-place changes).
    pub(crate) fn backward(
        &self,
        want: [bool; 2],
        a: &Saved,
        b: &Saved,
        y: &Saved,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (a_, b_, y_) = (|| a.get(), || b.get(), || y.get());
        if let Some(d) = self.grad_by(&mut Eager, want, &a_, &b_, &y_, g)? {
            return Ok(d);
        }
        let (ga, gb) = self.other_backward(a, b, y, g)?;
        Ok((want[0].then_some(ga), want[1].then_some(gb)))
    }

    /// [`backward`](Self::backward) for the ops without an arithmetic rule.
    fn other_backward(
        &self,
        a: &Saved,
        b: &Saved,
        y: &Saved,
        g: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        use BinaryOp::*;
        Ok(match self {
            Pow => {
                let (a, b, y) = (a.get()?, b.get()?, y.get()?);
                let ga = g.mul(&b)?.mul(&a.pow(&b.add_scalar(-1.0)?)?)?;
                let gb = g.mul(&y)?.mul(&a.log()?)?;
                let zero_base = a
                    .eq(&a.zeros_like()?)?
                    .logical_and(&b.ge(&b.zeros_like()?)?)?;
                let gb = Tensor::where_cond(&zero_base, &gb.zeros_like()?, &gb)?;
                (ga, gb)
            }
            // Linear in the gradient; zero almost everywhere in the input.
            ThresholdBackward => (g.threshold_backward(&b.get()?)?, g.zeros_like()?),
            SigmoidBackward => {
                let (a, b) = (a.get()?, b.get()?);
                let db = g.mul(&a)?.mul(&b.mul_scalar(-2.0)?.add_scalar(1.0)?)?;
                (g.sigmoid_backward(&b)?, db)
            }
            TanhBackward => {
                let (a, b) = (a.get()?, b.get()?);
                (g.tanh_backward(&b)?, g.mul(&a)?.mul(&b.mul_scalar(-2.0)?)?)
            }
            GeluBackward => {
                // d/dx (Φ(x) + x φ(x)) = φ(x) (2 - x²)
                let (a, b) = (a.get()?, b.get()?);
                let pdf = b
                    .square()?
                    .mul_scalar(-0.5)?
                    .exp()?
                    .mul_scalar(0.398_942_280_401_432_7)?;
                let d2 = pdf.mul(&b.square()?.neg()?.add_scalar(2.0)?)?;
                (g.gelu_backward(&b)?, g.mul(&a)?.mul(&d2)?)
            }
            // d/db = -div(a, b, rounding_mode=...), computed as PyTorch computes it; the
            // quotient is piecewise constant, so it carries no gradient of its own.
            Remainder => {
                let q = {
                    let _g = crate::no_grad();
                    let (a, b, y) = (a.get()?, b.get()?, y.get()?);
                    // PyTorch's div_floor: (a - fmod) / b, one less where remainder moved fmod
                    // to the divisor's sign, floored, plus one where the fraction left over
                    // (rounding error) passes .5; a / b where b is 0.
                    let m = a.fmod(&b)?;
                    let d = a.sub(&m)?.div(&b)?;
                    let d = Tensor::where_cond(&y.ne(&m)?, &d.sub_scalar(1.0)?, &d)?;
                    let f = d.floor()?;
                    let up = d.sub(&f)?.gt_scalar(0.5)?.to_dtype(d.dtype())?;
                    Tensor::where_cond(&b.eq_scalar(0.0)?, &a.div(&b)?, &f.add(&up)?)?
                };
                (g.clone(), g.mul(&q)?.neg()?)
            }
            Fmod => {
                let q = {
                    let _g = crate::no_grad();
                    a.get()?.div(&b.get()?)?.trunc()?
                };
                (g.clone(), g.mul(&q)?.neg()?)
            }
            Maximum | Minimum => {
                // PyTorch's rule: each side's gradient is masked where the other side wins and
                // halved on ties, so where either is NaN both receive the whole gradient.
                let (a, b) = (a.get()?, b.get()?);
                let (a_loses, b_loses) = if *self == Maximum {
                    (a.lt(&b)?, a.gt(&b)?)
                } else {
                    (a.gt(&b)?, a.lt(&b)?)
                };
                let dt = g.dtype();
                let tie = a.eq(&b)?.to_dtype(dt)?.mul_scalar(0.5)?;
                let share = |loses: Tensor| -> Result<Tensor> {
                    loses.to_dtype(dt)?.add(&tie)?.neg()?.add_scalar(1.0)
                };
                (g.mul(&share(a_loses)?)?, g.mul(&share(b_loses)?)?)
            }
            _ => (g.zeros_like()?, g.zeros_like()?),
        })
    }
}
