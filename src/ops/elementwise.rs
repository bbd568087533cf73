//! Elementwise ops, each declared once: its name, its WGSL expression, its CPU scalar function and
//! its backward rule sit side by side in one `match` per aspect, so an op missing any of the four
//! does not compile.

use crate::autograd::Saved;
use crate::dtype::Real;
use crate::ops::BinaryOp;
use crate::{Result, Tensor};

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
        /// 1 where x > 0, else 0 (NaN too).
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
            Exp => "exp_f(x)",
            Log => "log_f(x)",
            Sqrt => "sqrt(x)",
            Rsqrt => "inverseSqrt(x)",
            Sin => "sin_f(x)",
            Cos => "cos_f(x)",
            Tanh => "tanh_f(x)",
            Sigmoid => "sigmoid_f(x)",
            // NaN tested on the bits: compilers that assume no NaN turn `x < 0 ? 0 : x` into
            // max(x, 0), which gives 0 for NaN (llvmpipe through GL did).
            Relu => "select(x, 0.0, x < 0.0 && !is_nan_f(x))",
            Gelu => "x * norm_cdf_f(x)",
            GeluTanh => {
                "0.5 * x * (1.0 + tanh_f(0.79788456080286536 * (x + 0.044715 * x * x * x)))"
            }
            Silu => "x * sigmoid_f(x)",
            Elu(_) => "select(p0 * expm1_f(x), x, x > 0.0)",
            LeakyRelu(_) => "select(p0 * x, x, x > 0.0)",
            Softplus(..) => "select(log1p_f(exp_f(p0 * x)) / p0, x, x * p0 > p1)",
            Square => "x * x",
            Reciprocal => "1.0 / x",
            // NaN in the input or either bound propagates (WGSL's min/max need not).
            Clamp(..) => "min_nan(max_nan(x, p0), p1)",
            Erf => "erf_f(x)",
            PowScalar(_) => "pow_scalar_f(x, p0)",
            AddScalar(_) => "x + p0",
            MulScalar(_) => "x * p0",
            DivScalar(_) => "x / p0",
            Step => "select(0.0, 1.0, x > 0.0)",
            // PyTorch's `(0 < x) - (x < 0)`: 0 for NaN (tested on the bits) and +0 for -0, which
            // WGSL's sign leaves to the driver.
            Sign => "select(select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0), 0.0, is_nan_f(x))",
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
            // PyTorch's forms for these exponents (its CPU kernel's `x * x * x`, `1 / sqrt(x)`,
            // ...): its values, and no `powf` where a product gives them.
            PowScalar(2.0) => x * x,
            PowScalar(3.0) => x * x * x,
            PowScalar(-2.0) => one / (x * x),
            PowScalar(0.5) => x.sqrt(),
            PowScalar(-0.5) => one / x.sqrt(),
            PowScalar(-1.0) => one / x,
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

    /// The gradient with respect to the input from the input `x`, the output `y` and the
    /// upstream gradient `g`, for the ops whose rule is a chain of elementwise arithmetic (no
    /// comparison or select): written once against [`Emit`], so that eager autograd (tensors)
    /// and a fused program's generated gradient (registers) compute it with the same ops in the
    /// same order. `None` for the other ops (their rules are in [`UnaryOp::backward`]); `x` and
    /// `y` are fetched only if the rule reads them.
    pub(crate) fn grad_by<E: Emit>(
        &self,
        e: &mut E,
        x: &dyn Fn() -> Result<E::V>,
        y: &dyn Fn() -> Result<E::V>,
        g: &E::V,
    ) -> Result<Option<E::V>> {
        use BinaryOp::{
            Add, Div, GeluBackward, Mul, SigmoidBackward, TanhBackward, ThresholdBackward,
        };
        use UnaryOp::*;
        // `g * f`, the usual last step.
        let times = |e: &mut E, f: E::V| e.bin(Mul, g, &f);
        let d = match *self {
            Neg => e.un(Neg, g)?,
            Abs => {
                let s = e.un(Sign, &x()?)?;
                times(e, s)?
            }
            Exp => times(e, y()?)?,
            Log => e.bin(Div, g, &x()?)?,
            Sqrt => {
                let t = e.un(MulScalar(2.0), &y()?)?;
                e.bin(Div, g, &t)?
            }
            Rsqrt => {
                let t = e.un(PowScalar(3.0), &y()?)?;
                let t = e.un(MulScalar(-0.5), &t)?;
                times(e, t)?
            }
            Sin => {
                let c = e.un(Cos, &x()?)?;
                times(e, c)?
            }
            Cos => {
                let s = e.un(Sin, &x()?)?;
                let s = e.un(Neg, &s)?;
                times(e, s)?
            }
            Tanh => e.bin(TanhBackward, g, &y()?)?,
            Sigmoid => e.bin(SigmoidBackward, g, &y()?)?,
            Relu => e.bin(ThresholdBackward, g, &x()?)?,
            Gelu => e.bin(GeluBackward, g, &x()?)?,
            GeluTanh => {
                let x = x()?;
                let x2 = e.un(Square, &x)?;
                let a = e.un(MulScalar(0.044715), &x2)?;
                let a = e.un(AddScalar(1.0), &a)?;
                let inner = e.bin(Mul, &x, &a)?;
                let inner = e.un(MulScalar(SQRT_2_OVER_PI), &inner)?;
                let t = e.un(Tanh, &inner)?;
                let dinner = e.un(MulScalar(3.0 * 0.044715), &x2)?;
                let dinner = e.un(AddScalar(1.0), &dinner)?;
                let dinner = e.un(MulScalar(SQRT_2_OVER_PI), &dinner)?;
                let left = e.un(AddScalar(1.0), &t)?;
                let left = e.un(MulScalar(0.5), &left)?;
                let t2 = e.un(Square, &t)?;
                let t2 = e.un(Neg, &t2)?;
                let t2 = e.un(AddScalar(1.0), &t2)?;
                let right = e.bin(Mul, &x, &t2)?;
                let right = e.bin(Mul, &right, &dinner)?;
                let right = e.un(MulScalar(0.5), &right)?;
                let sum = e.bin(Add, &left, &right)?;
                times(e, sum)?
            }
            Silu => {
                let x = x()?;
                let s = e.un(Sigmoid, &x)?;
                let t = e.un(Neg, &s)?;
                let t = e.un(AddScalar(1.0), &t)?;
                let t = e.bin(Mul, &x, &t)?;
                let t = e.un(AddScalar(1.0), &t)?;
                let d = e.bin(Mul, &s, &t)?;
                times(e, d)?
            }
            Square => {
                let t = e.un(MulScalar(2.0), &x()?)?;
                times(e, t)?
            }
            Reciprocal => {
                let t = e.un(Square, &y()?)?;
                let t = e.un(Neg, &t)?;
                times(e, t)?
            }
            Erf => {
                let t = e.un(Square, &x()?)?;
                let t = e.un(Neg, &t)?;
                let t = e.un(Exp, &t)?;
                let t = e.un(MulScalar(std::f64::consts::FRAC_2_SQRT_PI), &t)?;
                times(e, t)?
            }
            PowScalar(p) if p != 0.0 => {
                let t = e.un(PowScalar(p - 1.0), &x()?)?;
                let t = e.un(MulScalar(p), &t)?;
                times(e, t)?
            }
            AddScalar(_) => g.clone(),
            MulScalar(c) => e.un(MulScalar(c), g)?,
            DivScalar(c) => e.un(DivScalar(c), g)?,
            PowScalar(_) | Elu(_) | LeakyRelu(_) | Softplus(..) | Clamp(..) | Step | Sign
            | Floor | Ceil | Round | Trunc => return Ok(None),
        };
        Ok(Some(d))
    }

    /// Gradient with respect to the input, given the saved input `x`, output `y` and upstream
    /// `g`; only what the rule reads is checked for in-place changes. Written with tensor ops, so
    /// it runs on the tensors' device and is itself differentiable.
    pub(crate) fn backward(&self, x: &Saved, y: &Saved, g: &Tensor) -> Result<Tensor> {
        if let Some(d) = self.grad_by(&mut Eager, &|| x.get(), &|| y.get(), g)? {
            return Ok(d);
        }
        use UnaryOp::*;
        let x = || x.get();
        match *self {
            // PyTorch's elu_backward from the input: `alpha·eˣ` for x <= 0 (from the output,
            // `y + alpha` would cancel to 0 in the tail), the gradient itself elsewhere (NaN too).
            // The exponential reads x only where x <= 0 (0 elsewhere): an e^x that overflowed in
            // the branch not taken would make a double backward 0 · inf = NaN.
            Elu(a) => {
                let x = x()?;
                let zero = x.zeros_like()?;
                let neg = x.le(&zero)?;
                let xn = Tensor::where_cond(&neg, &x, &zero)?;
                Tensor::where_cond(&neg, &g.mul(&xn.exp()?.mul_scalar(a)?)?, g)
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
            Clamp(lo, hi) => {
                let x = x()?;
                let inside = x
                    .ge(&x.full_like(lo)?)?
                    .logical_and(&x.le(&x.full_like(hi)?)?)?;
                Tensor::where_cond(&inside, g, &g.zeros_like()?)
            }
            PowScalar(_) | Step | Sign | Floor | Ceil | Round | Trunc => g.zeros_like(),
            Neg | Abs | Exp | Log | Sqrt | Rsqrt | Sin | Cos | Tanh | Sigmoid | Relu | Gelu
            | GeluTanh | Silu | Square | Reciprocal | Erf | AddScalar(_) | MulScalar(_)
            | DivScalar(_) => Err(crate::Error::msg(format!(
                "internal: {} has an elementwise gradient rule (grad_by)",
                self.name()
            ))),
        }
    }
}

/// What an elementwise gradient rule ([`UnaryOp::grad_by`], [`BinaryOp::grad_by`]) is written
/// against: [`Eager`] tensor ops, or the registers of a fused program being differentiated.
pub(crate) trait Emit {
    /// A value: a tensor, or a register.
    type V: Clone;
    /// `op(x)`.
    fn un(&mut self, op: UnaryOp, x: &Self::V) -> Result<Self::V>;
    /// `op(a, b)`, broadcasting.
    fn bin(&mut self, op: BinaryOp, a: &Self::V, b: &Self::V) -> Result<Self::V>;
}

/// Gradient rules run as tensor ops (eager autograd).
pub(crate) struct Eager;

impl Emit for Eager {
    type V = Tensor;
    fn un(&mut self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        x.unary(op)
    }
    fn bin(&mut self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        a.binary(op, b)
    }
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
