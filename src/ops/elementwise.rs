//! Elementwise ops, each declared once: its name, its WGSL expression, its CPU scalar function and
//! its backward rule sit side by side in one `match` per aspect, so an op missing any of the four
//! does not compile.

use crate::autograd::Saved;
use crate::dtype::{Elem, Real};
use crate::{Result, Tensor};
use num_traits::{WrappingAdd, WrappingMul, WrappingSub};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

op_enum! {
    /// Unary elementwise ops on floating-point tensors. Scalar parameters travel with the
    /// variant, in f64 so that f64 tensors use them unrounded (GPU kernels, which compute in
    /// f32, round them).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum UnaryOp {
        /// `-x` (`torch.neg`).
        Neg => "neg",
        /// `|x|` (`torch.abs`).
        Abs => "abs",
        /// `eˣ` (`torch.exp`).
        Exp => "exp",
        /// Natural logarithm (`torch.log`).
        Log => "log",
        /// `√x` (`torch.sqrt`).
        Sqrt => "sqrt",
        /// `1/√x` (`torch.rsqrt`).
        Rsqrt => "rsqrt",
        /// `torch.sin`.
        Sin => "sin",
        /// `torch.cos`.
        Cos => "cos",
        /// `torch.tanh`.
        Tanh => "tanh",
        /// `1 / (1 + e⁻ˣ)` (`torch.sigmoid`).
        Sigmoid => "sigmoid",
        /// `max(x, 0)` (`torch.relu`).
        Relu => "relu",
        /// Exact GELU (`approximate='none'`).
        Gelu => "gelu",
        /// GELU with the tanh approximation.
        GeluTanh => "gelu_tanh",
        /// `x · sigmoid(x)` (`F.silu`).
        Silu => "silu",
        /// `x` for x > 0, else `alpha · (eˣ − 1)` (`F.elu`); carries `alpha`.
        Elu(f64 = 1.0) => "elu",
        /// `x` for x > 0, else `negative_slope · x` (`F.leaky_relu`); carries `negative_slope`.
        LeakyRelu(f64 = 0.1) => "leaky_relu",
        /// Softplus with `beta` and `threshold`.
        Softplus(f64 = 1.0, f64 = 20.0) => "softplus",
        /// `x²` (`torch.square`).
        Square => "square",
        /// `1/x` (`torch.reciprocal`).
        Reciprocal => "reciprocal",
        /// Clamp to `[min, max]` (infinite for a missing side).
        Clamp(f64 = 0.0, f64 = 1.0) => "clamp",
        /// The error function (`torch.erf`).
        Erf => "erf",
        /// `xᵉ` for a scalar exponent (`torch.pow(x, e)`).
        PowScalar(f64 = 2.0) => "pow_scalar",
        /// `x + c`.
        AddScalar(f64 = 1.0) => "add_scalar",
        /// `x · c`.
        MulScalar(f64 = 1.0) => "mul_scalar",
        /// `x / c` (true division, not a multiplication by `1 / c`).
        DivScalar(f64 = 1.0) => "div_scalar",
        /// 1 where x > 0, else 0 (relu's derivative).
        Step => "step",
        /// −1, 0 or 1 (`torch.sign`).
        Sign => "sign",
        /// The largest integer not above x (`torch.floor`).
        Floor => "floor",
        /// The smallest integer not below x (`torch.ceil`).
        Ceil => "ceil",
        /// The nearest integer, halves to even (`torch.round`).
        Round => "round",
        /// x rounded toward zero (`torch.trunc`).
        Trunc => "trunc",
    }
}

impl UnaryOp {
    /// The dtype it computes in under autocast.
    pub fn autocast(&self) -> AutocastPolicy {
        use UnaryOp::*;
        match self {
            Exp | Log => AutocastPolicy::F32,
            Neg | Abs | Sqrt | Rsqrt | Sin | Cos | Tanh | Sigmoid | Relu | Gelu | GeluTanh
            | Silu | Elu(_) | LeakyRelu(_) | Softplus(..) | Square | Reciprocal | Clamp(..)
            | Erf | PowScalar(_) | AddScalar(_) | MulScalar(_) | DivScalar(_) | Step | Sign
            | Floor | Ceil | Round | Trunc => AutocastPolicy::Same,
        }
    }

    /// What it does with an integer or bool tensor.
    pub fn on_integers(&self) -> OnIntegers {
        use UnaryOp::*;
        match self {
            Neg | Abs | Square | Sign => OnIntegers::Exact,
            Floor | Ceil | Round | Trunc => OnIntegers::Identity,
            Exp | Log | Sqrt | Rsqrt | Sin | Cos | Tanh | Sigmoid | Erf | Reciprocal
            | Clamp(..) | PowScalar(_) | AddScalar(_) | MulScalar(_) | DivScalar(_) => {
                OnIntegers::Float
            }
            Relu | Gelu | GeluTanh | Silu | Elu(_) | LeakyRelu(_) | Softplus(..) | Step => {
                OnIntegers::Unsupported
            }
        }
    }

    /// The two scalar parameters passed to the kernel (`p0`, `p1` in WGSL, f32).
    pub fn params(&self) -> [f32; 2] {
        use UnaryOp::*;
        let [a, b] = match *self {
            Elu(a) | LeakyRelu(a) | PowScalar(a) | AddScalar(a) | MulScalar(a) | DivScalar(a) => {
                [a, 0.0]
            }
            Softplus(b, t) => [b, t],
            Clamp(lo, hi) => [lo, hi],
            _ => [0.0, 0.0],
        };
        [a as f32, b as f32]
    }

    /// The WGSL expression computing the result from `x` (f32) and the parameters `p0`, `p1`.
    /// Helper functions (`erf_f`, `tanh_f`, `pow_f`) live in `shaders/prelude.wgsl`.
    pub fn wgsl(&self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "-x",
            Abs => "abs(x)",
            Exp => "exp(x)",
            Log => "log(x)",
            Sqrt => "sqrt(x)",
            Rsqrt => "inverseSqrt(x)",
            Sin => "sin(x)",
            Cos => "cos(x)",
            Tanh => "tanh_f(x)",
            Sigmoid => "1.0 / (1.0 + exp(-x))",
            Relu => "select(x, 0.0, x < 0.0)",
            Gelu => "0.5 * x * (1.0 + erf_f(x * 0.70710678118654752))",
            GeluTanh => {
                "0.5 * x * (1.0 + tanh_f(0.79788456080286536 * (x + 0.044715 * x * x * x)))"
            }
            Silu => "x / (1.0 + exp(-x))",
            Elu(_) => "select(p0 * (exp(x) - 1.0), x, x > 0.0)",
            LeakyRelu(_) => "select(p0 * x, x, x > 0.0)",
            Softplus(..) => "select(log(1.0 + exp(p0 * x)) / p0, x, x * p0 > p1)",
            Square => "x * x",
            Reciprocal => "1.0 / x",
            // NaN in the input or either bound propagates (WGSL's min/max need not).
            Clamp(..) => "min_nan(max_nan(x, p0), p1)",
            Erf => "erf_f(x)",
            PowScalar(_) => "pow_f(x, p0)",
            AddScalar(_) => "x + p0",
            MulScalar(_) => "x * p0",
            DivScalar(_) => "x / p0",
            Step => "select(0.0, 1.0, x > 0.0)",
            Sign => "sign(x)",
            Floor => "floor(x)",
            Ceil => "ceil(x)",
            // WGSL's round takes halves to even, as torch.round.
            Round => "round(x)",
            Trunc => "trunc(x)",
        }
    }

    /// The CPU scalar function, in the element type's compute type.
    #[inline(always)]
    pub fn cpu<R: Real>(&self, x: R) -> R {
        use UnaryOp::*;
        let zero = R::zero();
        let one = R::one();
        let half = R::of(0.5);
        match *self {
            Neg => -x,
            Abs => x.abs(),
            Exp => x.vexp(),
            Log => x.ln(),
            Sqrt => x.sqrt(),
            Rsqrt => one / x.sqrt(),
            Sin => x.sin(),
            Cos => x.cos(),
            Tanh => x.vtanh(),
            Sigmoid => x.vsigmoid(),
            Relu => {
                if x < zero {
                    zero
                } else {
                    x
                }
            }
            Gelu => x * x.norm_cdf(),
            GeluTanh => {
                half * x
                    * (one + (R::of(SQRT_2_OVER_PI) * (x + R::of(0.044715) * x * x * x)).vtanh())
            }
            Silu => x / (one + (-x).vexp()),
            Elu(a) => {
                if x > zero {
                    x
                } else {
                    R::of(a) * x.exp_m1()
                }
            }
            LeakyRelu(s) => {
                if x > zero {
                    x
                } else {
                    R::of(s) * x
                }
            }
            Softplus(b, t) => {
                let b = R::of(b);
                if x * b > R::of(t) {
                    x
                } else {
                    (x * b).exp().ln_1p() / b
                }
            }
            Square => x * x,
            Reciprocal => one / x,
            Clamp(lo, hi) => {
                let (lo, hi) = (R::of(lo), R::of(hi));
                // NaN in the input or either bound propagates (`max`/`min` would drop it).
                if x.is_nan() || lo.is_nan() || hi.is_nan() {
                    R::nan()
                } else {
                    x.max(lo).min(hi)
                }
            }
            Erf => x.erf(),
            PowScalar(e) => x.powf(R::of(e)),
            AddScalar(c) => x + R::of(c),
            MulScalar(c) => x * R::of(c),
            DivScalar(c) => x / R::of(c),
            Step => {
                if x > zero {
                    one
                } else {
                    zero
                }
            }
            Sign => {
                if x > zero {
                    one
                } else if x < zero {
                    -one
                } else {
                    zero
                }
            }
            Floor => x.floor(),
            Ceil => x.ceil(),
            Round => {
                // Halves to even (Rust's `round` takes them away from zero): 2.5 -> 2,
                // -3.5 -> -4.
                if (x - x.trunc()).abs() == half {
                    (x * half).round() * R::of(2.0)
                } else {
                    x.round()
                }
            }
            Trunc => x.trunc(),
        }
    }

    /// Gradient with respect to the input, given the saved input `x`, output `y` and upstream
    /// `g`; only what the rule reads is checked for in-place changes. Written with tensor ops, so
    /// it runs on the tensors' device and is itself differentiable.
    pub(crate) fn backward(&self, x: &Saved, y: &Saved, g: &Tensor) -> Result<Tensor> {
        use UnaryOp::*;
        let (x, y) = (|| x.get(), || y.get());
        match *self {
            Neg => g.neg(),
            Abs => g.mul(&x()?.sign()?),
            Exp => g.mul(&y()?),
            Log => g.div(&x()?),
            Sqrt => g.div(&y()?.mul_scalar(2.0)?),
            Rsqrt => g.mul(&y()?.pow_scalar(3.0)?.mul_scalar(-0.5)?),
            Sin => g.mul(&x()?.cos()?),
            Cos => g.mul(&x()?.sin()?.neg()?),
            Tanh => g.tanh_backward(&y()?),
            Sigmoid => g.sigmoid_backward(&y()?),
            Relu => g.threshold_backward(&x()?),
            Gelu => g.gelu_backward(&x()?),
            GeluTanh => {
                let x = x()?;
                let x2 = x.square()?;
                let inner = x
                    .mul(&x2.mul_scalar(0.044715)?.add_scalar(1.0)?)?
                    .mul_scalar(SQRT_2_OVER_PI)?;
                let t = inner.tanh()?;
                let dinner = x2
                    .mul_scalar(3.0 * 0.044715)?
                    .add_scalar(1.0)?
                    .mul_scalar(SQRT_2_OVER_PI)?;
                let left = t.add_scalar(1.0)?.mul_scalar(0.5)?;
                let right = x
                    .mul(&t.square()?.neg()?.add_scalar(1.0)?)?
                    .mul(&dinner)?
                    .mul_scalar(0.5)?;
                g.mul(&left.add(&right)?)
            }
            Silu => {
                let x = x()?;
                let s = x.sigmoid()?;
                let d = s.mul(&x.mul(&s.neg()?.add_scalar(1.0)?)?.add_scalar(1.0)?)?;
                g.mul(&d)
            }
            Elu(a) => {
                let x = x()?;
                let pos = x.gt(&x.zeros_like()?)?;
                Tensor::where_cond(&pos, g, &g.mul(&y()?.add_scalar(a)?)?)
            }
            LeakyRelu(s) => {
                let x = x()?;
                let pos = x.gt(&x.zeros_like()?)?;
                Tensor::where_cond(&pos, g, &g.mul_scalar(s)?)
            }
            Softplus(b, t) => {
                let bx = x()?.mul_scalar(b)?;
                let lin = bx.gt(&bx.full_like(t)?)?;
                Tensor::where_cond(&lin, g, &g.mul(&bx.sigmoid()?)?)
            }
            Square => g.mul(&x()?.mul_scalar(2.0)?),
            Reciprocal => g.mul(&y()?.square()?.neg()?),
            Clamp(lo, hi) => {
                let x = x()?;
                let inside = x
                    .ge(&x.full_like(lo)?)?
                    .logical_and(&x.le(&x.full_like(hi)?)?)?;
                Tensor::where_cond(&inside, g, &g.zeros_like()?)
            }
            Erf => g.mul(
                &x()?
                    .square()?
                    .neg()?
                    .exp()?
                    .mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)?,
            ),
            PowScalar(e) => {
                if e == 0.0 {
                    g.zeros_like()
                } else {
                    g.mul(&x()?.pow_scalar(e - 1.0)?.mul_scalar(e)?)
                }
            }
            AddScalar(_) => Ok(g.clone()),
            MulScalar(c) => g.mul_scalar(c),
            DivScalar(c) => g.div_scalar(c),
            Step | Sign | Floor | Ceil | Round | Trunc => g.zeros_like(),
        }
    }
}

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

/// Which dtype an op computes in under autocast ([`UnaryOp::autocast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutocastPolicy {
    /// In its input's dtype.
    Same,
    /// In float32 (PyTorch's autocast float32 list): half inputs are widened first.
    F32,
}

/// What a unary op does with an integer or bool tensor ([`UnaryOp::on_integers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnIntegers {
    /// Computed exactly in integer arithmetic (wrapping, as PyTorch's).
    Exact,
    /// A copy: integers are already integral (bool is refused).
    Identity,
    /// Promoted to float32 first (`torch.exp(int_tensor)` is float32).
    Float,
    /// Refused with an error naming the dtype.
    Unsupported,
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
        /// `a` where `b > 0`, else 0: relu's gradient `a` through input `b` in one pass
        /// (torch.ops.aten.threshold_backward with threshold 0).
        ThresholdBackward => "threshold_backward",
        /// `a * b * (1 - b)`: sigmoid's gradient `a` through its output `b`, in one pass.
        SigmoidBackward => "sigmoid_backward",
        /// `a * (1 - b²)`: tanh's gradient `a` through its output `b`, in one pass.
        TanhBackward => "tanh_backward",
        /// `a * (Φ(b) + b φ(b))`: exact GELU's gradient `a` through its input `b`, in one pass.
        GeluBackward => "gelu_backward",
    }
}

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
            ThresholdBackward => "select(0.0, a, b > 0.0)",
            SigmoidBackward => "a * b * (1.0 - b)",
            TanhBackward => "a * (1.0 - b * b)",
            GeluBackward => "a * gelu_grad_f(b)",
            Eq => "select(0u, 1u, a == b)",
            Ne => "select(0u, 1u, a != b)",
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
            ThresholdBackward => {
                if b > R::zero() {
                    a
                } else {
                    R::zero()
                }
            }
            SigmoidBackward => a * b * (R::one() - b),
            TanhBackward => a * (R::one() - b * b),
            GeluBackward => a * (b.norm_cdf() + b * b.norm_pdf()),
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
    /// Gradients for `a` and `b` before they are summed back to the inputs' shapes, given the
    /// saved operands and output (only what the rule reads is checked for in-place changes).
    pub(crate) fn backward(
        &self,
        a: &Saved,
        b: &Saved,
        y: &Saved,
        g: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        use BinaryOp::*;
        Ok(match self {
            Add => (g.clone(), g.clone()),
            Sub => (g.clone(), g.neg()?),
            Mul => (g.mul(&b.get()?)?, g.mul(&a.get()?)?),
            Div => {
                let b = b.get()?;
                (g.div(&b)?, g.mul(&y.get()?)?.div(&b)?.neg()?)
            }
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
