//! Tensor methods for elementwise ops, where, masked_fill and dtype promotion.

use super::{AutocastPolicy, BinaryOp, OnIntegers, Operands, UnaryOp};
use crate::autograd::{is_grad_enabled, record, Saved};
use crate::error::InOp;
use crate::shape::broadcast_shapes;
use crate::{DType, Device, Error, Result, Scalar, Tensor};

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(&self) -> Result<Tensor> { self.unary($op) })*
        }
    };
}

unary_methods! {
    /// `-x`
    neg => UnaryOp::Neg;
    /// `|x|`
    abs => UnaryOp::Abs;
    /// `e^x`
    exp => UnaryOp::Exp;
    /// Natural logarithm.
    log => UnaryOp::Log;
    /// Square root.
    sqrt => UnaryOp::Sqrt;
    /// `1/sqrt(x)`
    rsqrt => UnaryOp::Rsqrt;
    /// Sine.
    sin => UnaryOp::Sin;
    /// Cosine.
    cos => UnaryOp::Cos;
    /// Hyperbolic tangent.
    tanh => UnaryOp::Tanh;
    /// Logistic sigmoid.
    sigmoid => UnaryOp::Sigmoid;
    /// `max(x, 0)`
    relu => UnaryOp::Relu;
    /// Exact GELU.
    gelu => UnaryOp::Gelu;
    /// GELU, tanh approximation (`approximate='tanh'`).
    gelu_tanh => UnaryOp::GeluTanh;
    /// `x * sigmoid(x)`
    silu => UnaryOp::Silu;
    /// `x * x`
    square => UnaryOp::Square;
    /// `1 / x`
    reciprocal => UnaryOp::Reciprocal;
    /// The error function.
    erf => UnaryOp::Erf;
    /// -1, 0 or 1.
    sign => UnaryOp::Sign;
    /// 1 where x > 0, else 0 (NaN too).
    step => UnaryOp::Step;
}

impl Tensor {
    /// ELU with `alpha`.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Elu(alpha))
    }
    /// Leaky ReLU with `negative_slope`.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope))
    }
    /// Softplus, `log(1 + exp(beta x)) / beta`, linear above `threshold` (PyTorch defaults 1, 20).
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Softplus(beta, threshold))
    }
    /// Clamp to `[min, max]` (`min(max(x, min), max)`, so `max` wins when `min > max`); either
    /// side may be absent. NaN in the input or a bound gives NaN. The result type follows
    /// [`DType::promote_scalar`]: an int32 tensor clamped with integer bounds stays int32, with
    /// float bounds it becomes f32.
    pub fn clamp<S: Into<Scalar>>(&self, min: Option<S>, max: Option<S>) -> Result<Tensor> {
        let (min, max) = (min.map(Into::into), max.map(Into::into));
        let dt = [min, max]
            .iter()
            .flatten()
            .fold(self.dtype(), |dt, &s| dt.promote_scalar(s));
        if min.is_none() && max.is_none() {
            return Err(Error::arg(
                "clamp",
                "At least one of 'min' or 'max' must not be None",
            ));
        }
        let x = self.to_dtype(dt)?;
        if !dt.is_float() {
            let dev = x.device();
            let bound = |s: Scalar| Tensor::scalar_int(s.to_int("clamp", dt)?, dt, &dev);
            let x = match min {
                Some(lo) => x.maximum(&bound(lo)?)?,
                None => x,
            };
            return match max {
                Some(hi) => x.minimum(&bound(hi)?),
                None => Ok(x),
            };
        }
        let lo = min.map_or(f64::NEG_INFINITY, Scalar::to_f64);
        let hi = max.map_or(f64::INFINITY, Scalar::to_f64);
        x.unary(UnaryOp::Clamp(lo, hi))
    }
    /// `x ** exponent`. An integer tensor with an integer exponent stays integer (exact,
    /// wrapping on overflow; a negative exponent is an error, as in PyTorch); otherwise the
    /// result is floating point.
    pub fn pow_scalar(&self, exponent: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Pow, exponent.into())
    }
    /// `x + c`; `c`'s kind sets the result type ([`DType::promote_scalar`]): `int32 + 1` is
    /// int32, `int32 + 1.0` is f32, integer results wrap on overflow.
    pub fn add_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Add, c.into())
    }
    /// `x * c` (result type as [`Tensor::add_scalar`]).
    pub fn mul_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Mul, c.into())
    }
    /// `x - c` (result type as [`Tensor::add_scalar`]).
    pub fn sub_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Sub, c.into())
    }
    /// `x / c`, true division: integer tensors give f32 (`x / 0` is inf or NaN).
    pub fn div_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Div, c.into())
    }

    /// `self op c` with PyTorch's tensor-scalar type promotion. Floating results take the
    /// fused scalar kernels (computed in f32, differentiable); integer results are computed in
    /// int32 against a 0-d tensor, so they are exact and wrap like any integer op.
    fn scalar_op(&self, op: BinaryOp, c: Scalar) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.scalar_op_untraced(op, c),
            |r, out| crate::onnx::forms::scalar(r, op, self, c.to_f64(), out),
        )
    }

    /// [`scalar_op`](Self::scalar_op) itself; the public function records it for ONNX export.
    fn scalar_op_untraced(&self, op: BinaryOp, c: Scalar) -> Result<Tensor> {
        if op == BinaryOp::Sub && self.dtype() == DType::Bool {
            return Err(bool_sub_error());
        }
        let mut dt = self.dtype().promote_scalar(c);
        if op == BinaryOp::Div && !dt.is_float() {
            dt = DType::F32;
        }
        if op == BinaryOp::Pow && !dt.is_float() {
            return self.to_dtype(dt)?.pow_int(c);
        }
        let x = self.to_dtype(dt)?;
        if !dt.is_float() {
            let c = Tensor::scalar_int(c.to_int(op.name(), dt)?, dt, &x.device())?;
            return x.binary(op, &c);
        }
        let v = c.to_f64();
        x.unary(match op {
            BinaryOp::Add => UnaryOp::AddScalar(v),
            BinaryOp::Sub => UnaryOp::AddScalar(-v),
            BinaryOp::Mul => UnaryOp::MulScalar(v),
            BinaryOp::Div => UnaryOp::DivScalar(v),
            _ => UnaryOp::PowScalar(v),
        })
    }

    /// Integer `x ** e` by repeated squaring with wrapping multiplications.
    fn pow_int(&self, e: Scalar) -> Result<Tensor> {
        let e = i64::from(e.to_i32("pow")?);
        if e < 0 {
            return Err(Error::arg(
                "pow",
                format!(
                    "Integers to negative integer powers are not allowed (exponent {e}, dtype {})",
                    self.dtype()
                ),
            ));
        }
        let (mut acc, mut base, mut e) = (self.ones_like()?, self.clone(), e);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.mul(&base)?;
            }
            e >>= 1;
            if e > 0 {
                base = base.mul(&base)?;
            }
        }
        Ok(acc)
    }

    /// An integer-typed unary op (`neg`, `abs`, `square`, `sign`) in integer arithmetic, as
    /// PyTorch computes them: exact past 2^24 and wrapping (`-i32::MIN == i32::MIN`). Bool
    /// `abs` and `sign` are the identity, `square` counts as int32 and negation is refused.
    fn unary_int(&self, op: UnaryOp) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return match op {
                UnaryOp::Neg => Err(Error::arg(
                    "neg",
                    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
                )),
                UnaryOp::Square => self.to_dtype(DType::I64),
                _ => Ok(self.clone()),
            };
        }
        let zero = self.scalar_like(0.0)?;
        match op {
            UnaryOp::Neg => zero.sub(self),
            UnaryOp::Abs => self.maximum(&zero.sub(self)?),
            UnaryOp::Square => self.mul(self),
            _ => self
                .gt(&zero)?
                .to_dtype(DType::I32)?
                .sub(&self.lt(&zero)?.to_dtype(DType::I32)?)?
                .to_dtype(self.dtype()),
        }
    }

    /// Apply a unary op, recording its backward rule.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.unary_untraced(op),
            |r, out| crate::onnx::forms::unary(r, op, self, out),
        )
    }

    /// [`unary`](Self::unary) itself; the public function records it for ONNX export.
    fn unary_untraced(&self, op: UnaryOp) -> Result<Tensor> {
        let _p = crate::profiler::op(op.name(), &[self]);
        if op.autocast() == AutocastPolicy::F32
            && crate::amp::autocast_dtype(&self.device()).is_some()
        {
            let x = crate::amp::upper(self)?;
            if x.dtype() != self.dtype() {
                return x.unary(op);
            }
        }
        if !self.dtype().is_float() {
            match op.on_integers() {
                OnIntegers::Exact => return self.unary_int(op),
                // Integers are already integral: PyTorch returns a copy.
                OnIntegers::Identity if self.dtype() != DType::Bool => return self.copy(),
                OnIntegers::Float => return self.to_dtype(DType::F32)?.unary(op),
                OnIntegers::Identity | OnIntegers::Unsupported => {}
            }
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: self.dtype(),
                hint: "; convert with .to_dtype(DType::F32)",
            });
        }
        let s = self.storage().unary(op, self.layout())?;
        let out = Tensor::from_storage(s, self.shape(), self.device());
        let saved = (op, Saved::new(self), Saved::output(&out, op.name()));
        Ok(record(out, op.name(), &[self], saved, |(op, x, y), g| {
            // Under create_graph the output is recomputed from x so that it stays differentiable.
            let recomputed;
            let y = if is_grad_enabled() {
                y.get()?;
                recomputed = Saved::new(&x.get()?.unary(*op)?);
                &recomputed
            } else {
                y
            };
            Ok(vec![Some(op.backward(x, y, g)?)])
        }))
    }

    /// Apply a binary op with broadcasting and type promotion.
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || self.binary_untraced(op, other),
            |r, out| crate::onnx::forms::binary(r, op, self, other, out),
        )
    }

    /// [`binary`](Self::binary) itself; the public function records it for ONNX export.
    fn binary_untraced(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        let _p = crate::profiler::op(op.name(), &[self, other]);
        self.same_device(op.name(), other)?;
        let mut dt = DType::promote(self.dtype(), other.dtype());
        match op.operands() {
            Operands::Bool => dt = DType::Bool,
            Operands::Float if !dt.is_float() => dt = DType::F32,
            _ if dt == DType::Bool => return self.bool_binary(op, other),
            Operands::Float | Operands::Number | Operands::Any => {}
        }
        let shape = broadcast_shapes(op.name(), self.shape(), other.shape())?;
        let (a, b) = if op.is_comparison() {
            let _g = crate::no_grad();
            (self.to_dtype(dt)?, other.to_dtype(dt)?)
        } else {
            (self.to_dtype(dt)?, other.to_dtype(dt)?)
        };
        let al = a.layout().broadcast_to(op.name(), &shape)?;
        let bl = b.layout().broadcast_to(op.name(), &shape)?;
        let s = a.storage().binary(op, &al, &b.storage(), &bl)?;
        let out = Tensor::from_storage(s, &shape, self.device());
        if op.is_comparison() {
            return Ok(out);
        }
        let y = Saved::output(&out, op.name());
        let want = [a.requires_grad(), b.requires_grad()];
        let saved = (op, Saved::new(&a), Saved::new(&b), y, want);
        Ok(record(out, op.name(), &[&a, &b], saved, |s, g| {
            let (op, a, b, y, want) = s;
            let recomputed;
            let y = if is_grad_enabled() && *op == BinaryOp::Div && want[1] {
                y.get()?;
                recomputed = Saved::new(&a.get()?.div(&b.get()?)?);
                &recomputed
            } else {
                y
            };
            let (ga, gb) = op.backward(*want, a, b, y, g)?;
            Ok(vec![
                ga.map(|d| d.sum_to(a.shape())).transpose()?,
                gb.map(|d| d.sum_to(b.shape())).transpose()?,
            ])
        }))
    }

    /// Arithmetic on two bool tensors, as PyTorch defines it: `+` and `maximum` are a logical
    /// or, `*` and `minimum` a logical and (bool results); `-`, `remainder` and `fmod` are
    /// refused.
    fn bool_binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        match op {
            BinaryOp::Add | BinaryOp::Maximum => self.logical_or(other),
            BinaryOp::Mul | BinaryOp::Minimum => self.logical_and(other),
            BinaryOp::Sub => Err(Error::arg(
                "sub",
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.",
            )),
            BinaryOp::Remainder | BinaryOp::Fmod => Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: DType::Bool,
                hint: "; convert with .to_dtype(DType::I64)",
            }),
            _ => self.to_dtype(DType::I32)?.binary(op, other),
        }
    }

    /// `self + other`
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Add, other)
    }
    /// `self + alpha * other` (torch.add with alpha; an integer `alpha` keeps integer tensors
    /// integer).
    pub fn add_alpha(&self, other: &Tensor, alpha: impl Into<Scalar>) -> Result<Tensor> {
        self.add(&other.mul_scalar(alpha)?)
    }
    /// `self - other`
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Sub, other)
    }
    /// `self * other`
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, other)
    }
    /// `self / other` (true division: integers give f32).
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Div, other)
    }
    /// `self ** other`
    pub fn pow(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Pow, other)
    }
    /// Elementwise maximum (gradient split evenly on ties, as PyTorch).
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Maximum, other)
    }
    /// relu's gradient: 0 where `input <= 0`, else `self` (the output gradient; a NaN input
    /// passes it, as PyTorch's `threshold_backward`), in one pass.
    pub fn threshold_backward(&self, input: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::ThresholdBackward, input)
    }
    /// sigmoid's gradient from its output `y = sigmoid(x)`: `self * y * (1 - y)` in one pass
    /// (PyTorch's `sigmoid_backward`).
    pub fn sigmoid_backward(&self, output: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::SigmoidBackward, output)
    }
    /// tanh's gradient from its output `y = tanh(x)`: `self * (1 - y²)` in one pass (PyTorch's
    /// `tanh_backward`).
    pub fn tanh_backward(&self, output: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::TanhBackward, output)
    }
    /// Exact GELU's gradient from its input: `self * (Φ(x) + x φ(x))` in one pass (PyTorch's
    /// `gelu_backward` with `approximate='none'`).
    pub fn gelu_backward(&self, input: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::GeluBackward, input)
    }
    /// Elementwise minimum.
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Minimum, other)
    }
    /// `self == other` (bool).
    pub fn eq(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Eq, other)
    }
    /// `self != other`
    pub fn ne(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Ne, other)
    }
    /// `self < other`
    pub fn lt(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Lt, other)
    }
    /// `self <= other`
    pub fn le(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Le, other)
    }
    /// `self > other`
    pub fn gt(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Gt, other)
    }
    /// `self >= other`
    pub fn ge(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Ge, other)
    }
    /// Logical and of truth values.
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::LogicalAnd, other)
    }
    /// Logical or of truth values.
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::LogicalOr, other)
    }
    /// Compare with a scalar, in the promoted type (`int_tensor > 1.5` compares in f32).
    pub fn gt_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Gt, v.into())
    }
    /// Compare with a scalar.
    pub fn lt_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Lt, v.into())
    }
    /// Compare with a scalar (`torch.tensor([1]) == 1.5` is false).
    pub fn eq_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Eq, v.into())
    }
    /// Compare with a scalar (`x != v`).
    pub fn ne_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Ne, v.into())
    }
    /// Compare with a scalar (`x <= v`).
    pub fn le_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Le, v.into())
    }
    /// Compare with a scalar (`x >= v`).
    pub fn ge_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.cmp_scalar(BinaryOp::Ge, v.into())
    }
    fn cmp_scalar(&self, op: BinaryOp, v: Scalar) -> Result<Tensor> {
        let x = self.to_dtype(self.dtype().promote_scalar(v))?;
        let c = match v {
            // An integer tensor against an integer out of int32's range: exactly, in int64 on
            // the CPU; on a GPU every integer lies in int32's range (int64 is held as int32),
            // so the answer is the same for every element.
            Scalar::Int(i) if !x.dtype().is_float() && i32::try_from(i).is_err() => {
                if !x.device().is_gpu() {
                    let x = x.to_dtype(DType::I64)?;
                    return x.binary(op, &Tensor::scalar(i, &x.device())?);
                }
                let all = match op {
                    BinaryOp::Eq => false,
                    BinaryOp::Ne => true,
                    BinaryOp::Lt | BinaryOp::Le => i > 0,
                    BinaryOp::Gt | BinaryOp::Ge => i < 0,
                    _ => return x.binary(op, &Tensor::scalar(i, &Device::Cpu)?.to(&x.device())?),
                };
                return Tensor::full_dtype(x.shape(), all as u8 as f64, DType::Bool, &x.device());
            }
            // A float tensor against a large integer compares in f32.
            Scalar::Int(i) if i32::try_from(i).is_err() => {
                return self
                    .to_dtype(DType::F32)?
                    .cmp_scalar(op, Scalar::Float(i as f64))
            }
            _ => x.scalar_like(v.to_f64())?,
        };
        x.binary(op, &c)
    }

    /// `cond ? a : b` with broadcasting (torch.where).
    pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        crate::onnx::trace::traced(
            || Tensor::where_cond_untraced(cond, a, b),
            |r, out| crate::onnx::forms::where_cond(r, cond, a, b, out),
        )
    }

    /// [`where_cond`](Self::where_cond) itself; the public function records it for ONNX export.
    fn where_cond_untraced(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let _p = crate::profiler::op("where", &[cond, a, b]);
        a.same_device("where", b)?;
        cond.same_device("where", a)?;
        if cond.dtype() != DType::Bool {
            return Err(Error::DTypeMismatch {
                op: "where (condition)",
                expected: DType::Bool,
                found: cond.dtype(),
            });
        }
        let dt = DType::promote(a.dtype(), b.dtype());
        let (a, b) = (a.to_dtype(dt)?, b.to_dtype(dt)?);
        let shape = broadcast_shapes(
            "where",
            &broadcast_shapes("where", cond.shape(), a.shape())?,
            b.shape(),
        )?;
        let cl = cond.layout().broadcast_to("where", &shape)?;
        let al = a.layout().broadcast_to("where", &shape)?;
        let bl = b.layout().broadcast_to("where", &shape)?;
        let s = cond
            .storage()
            .where_cond(&cl, &a.storage(), &al, &b.storage(), &bl)?;
        let out = Tensor::from_storage(s, &shape, a.device());
        let saved = (Saved::new(cond), a.shape().to_vec(), b.shape().to_vec());
        Ok(record(out, "where", &[&a, &b], saved, |s, g| {
            let (c, ash, bsh) = s;
            let (c, z) = (c.get()?, g.zeros_like()?);
            let ga = Tensor::where_cond(&c, g, &z)?.sum_to(ash)?;
            let gb = Tensor::where_cond(&c, &z, g)?.sum_to(bsh)?;
            Ok(vec![Some(ga), Some(gb)])
        }))
    }

    /// `value` where `mask` is true, else self.
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        Tensor::where_cond(mask, &self.scalar_like(value)?, self).in_op("masked_fill")
    }
}

impl Tensor {
    /// `c - x` (torch.rsub; the `c - &x` operator). The result type is `x op c`'s
    /// ([`DType::promote_scalar`]); a bool tensor is refused, as in PyTorch.
    pub fn rsub_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let c = c.into();
        if self.dtype() == DType::Bool {
            return Err(bool_sub_error());
        }
        // `-x + c` is `c - x` exactly (IEEE subtraction adds the negation; integers wrap alike),
        // once `x` has the result type.
        self.to_dtype(self.dtype().promote_scalar(c))?
            .neg()?
            .add_scalar(c)
            .in_op("rsub")
    }
    /// `c / x`, true division (the `c / &x` operator). The result type is `x / c`'s (integer
    /// tensors give f32, `f16` stays `f16`); it is computed in at least f32, dividing a 0-d
    /// tensor holding `c` by `x`.
    pub fn rdiv_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let c = c.into();
        let mut dt = self.dtype().promote_scalar(c);
        if !dt.is_float() {
            dt = DType::F32;
        }
        let compute = DType::promote(dt, DType::F32);
        Tensor::full_dtype([], c.to_f64(), compute, &self.device())?
            .div(&self.to_dtype(compute)?)?
            .to_dtype(dt)
            .in_op("div")
    }
}

/// PyTorch's refusal of `-` with a bool tensor.
fn bool_sub_error() -> Error {
    Error::arg(
        "sub",
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
    )
}

// The arithmetic operators, PyTorch-shaped: `&a + &b`, `a * 0.5`, `2 * &x`, `1.0 - x`, on owned
// tensors or references. Each is its method (`add`/`sub`/`mul`/`div`, `add_scalar`/...,
// `rsub_scalar`, `rdiv_scalar`) with the same result, and panics with that method's error
// message where the method returns `Err` (mismatched shapes, devices, dtypes; a bool tensor
// with `-`). Use the method for a `Result`. A scalar's kind sets the result type as in PyTorch:
// `int_tensor * 2` stays integer, `int_tensor * 2.0` is f32 ([`DType::promote_scalar`]).
//
// The scalar operators take `f64` and `i32` only: with one float and one integer type a bare
// literal picks its impl at once, so `(&x * 2.0).sum_all()` and `(0.5 * &x + 1).exp()` compile.
// A second float or integer type (f32, i64) would leave `&x * 2.0`'s type unknown until
// inference falls back, and a method called on it would not compile. Other scalar types go
// through the methods (`x.mul_scalar(v_f32)`, `x.add_scalar(n_i64)`) or a cast.
//
// No compound assignment (`x += y`): wgtorch's in-place ops refuse tensors in the autograd
// graph, so `x += y` in a forward pass would compile and then panic where PyTorch records it;
// write `x = &x + &y` (or call `add_` explicitly).

/// The tensor-tensor operator forms for one op: `&a op &b`, `&a op b`, `a op &b`, `a op b`.
macro_rules! tensor_ops {
    ($tr:ident, $m:ident, $f:ident) => {
        /// Operator form of the method of the same name; panics with its error message on bad
        /// input (use the method for a `Result`).
        impl std::ops::$tr<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: &Tensor) -> Tensor {
                self.$f(rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        /// Operator form; panics with the method's error message on bad input.
        impl std::ops::$tr<Tensor> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: Tensor) -> Tensor {
                std::ops::$tr::$m(self, &rhs)
            }
        }
        /// Operator form; panics with the method's error message on bad input.
        impl std::ops::$tr<&Tensor> for Tensor {
            type Output = Tensor;
            fn $m(self, rhs: &Tensor) -> Tensor {
                std::ops::$tr::$m(&self, rhs)
            }
        }
        /// Operator form; panics with the method's error message on bad input.
        impl std::ops::$tr<Tensor> for Tensor {
            type Output = Tensor;
            fn $m(self, rhs: Tensor) -> Tensor {
                std::ops::$tr::$m(&self, &rhs)
            }
        }
    };
}
tensor_ops!(Add, add, add);
tensor_ops!(Sub, sub, sub);
tensor_ops!(Mul, mul, mul);
tensor_ops!(Div, div, div);

/// The tensor-scalar operator forms for one op and the scalar types: `&x op c`, `x op c` call
/// `$f(c)`; `c op &x`, `c op x` call `$r(c)` on the tensor.
macro_rules! scalar_ops {
    ($tr:ident, $m:ident, $f:ident, $r:ident; $($s:ty),*) => {$(
        /// Operator form of the `*_scalar` method; panics with its error message on bad input.
        impl std::ops::$tr<$s> for &Tensor {
            type Output = Tensor;
            fn $m(self, c: $s) -> Tensor {
                self.$f(c).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        /// Operator form of the `*_scalar` method; panics with its error message on bad input.
        impl std::ops::$tr<$s> for Tensor {
            type Output = Tensor;
            fn $m(self, c: $s) -> Tensor {
                std::ops::$tr::$m(&self, c)
            }
        }
        /// Scalar on the left (PyTorch's reflected operator); panics with the method's error
        /// message on bad input.
        impl std::ops::$tr<&Tensor> for $s {
            type Output = Tensor;
            fn $m(self, x: &Tensor) -> Tensor {
                x.$r(self).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        /// Scalar on the left (PyTorch's reflected operator); panics with the method's error
        /// message on bad input.
        impl std::ops::$tr<Tensor> for $s {
            type Output = Tensor;
            fn $m(self, x: Tensor) -> Tensor {
                std::ops::$tr::$m(self, &x)
            }
        }
    )*};
}
scalar_ops!(Add, add, add_scalar, add_scalar; f64, i32);
scalar_ops!(Sub, sub, sub_scalar, rsub_scalar; f64, i32);
scalar_ops!(Mul, mul, mul_scalar, mul_scalar; f64, i32);
scalar_ops!(Div, div, div_scalar, rdiv_scalar; f64, i32);

/// `-&x`; panics with [`Tensor::neg`]'s error message on bad input (a bool tensor).
impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// `-x`; panics with [`Tensor::neg`]'s error message on bad input (a bool tensor).
impl std::ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        -&self
    }
}
