//! Tensor methods for elementwise ops, where, masked_fill and dtype promotion.

use super::{BinaryOp, UnaryOp};
use crate::autograd::{is_grad_enabled, record, Saved};
use crate::shape::broadcast_shapes;
use crate::{DType, Error, Result, Tensor};

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
    /// 1 where x > 0 else 0 (relu's derivative).
    step => UnaryOp::Step;
}

impl Tensor {
    /// ELU with `alpha`.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Elu(alpha as f32))
    }
    /// Leaky ReLU with `negative_slope`.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope as f32))
    }
    /// Softplus, `log(1 + exp(beta x)) / beta`, linear above `threshold` (PyTorch defaults 1, 20).
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Softplus(beta as f32, threshold as f32))
    }
    /// Clamp to `[min, max]`; either side may be absent.
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        if min.is_none() && max.is_none() {
            return Err(Error::arg(
                "clamp",
                "At least one of 'min' or 'max' must not be None",
            ));
        }
        let lo = min.map(|v| v as f32).unwrap_or(f32::NEG_INFINITY);
        let hi = max.map(|v| v as f32).unwrap_or(f32::INFINITY);
        self.unary(UnaryOp::Clamp(lo, hi))
    }
    /// `x ** exponent` for a scalar exponent.
    pub fn pow_scalar(&self, exponent: f64) -> Result<Tensor> {
        self.unary(UnaryOp::PowScalar(exponent as f32))
    }
    /// `x + c`
    pub fn add_scalar(&self, c: f64) -> Result<Tensor> {
        self.unary(UnaryOp::AddScalar(c as f32))
    }
    /// `x * c`
    pub fn mul_scalar(&self, c: f64) -> Result<Tensor> {
        self.unary(UnaryOp::MulScalar(c as f32))
    }
    /// `x - c`
    pub fn sub_scalar(&self, c: f64) -> Result<Tensor> {
        self.add_scalar(-c)
    }
    /// `x / c`
    pub fn div_scalar(&self, c: f64) -> Result<Tensor> {
        self.mul_scalar(1.0 / c)
    }

    /// Apply a unary op, recording its backward rule.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        if matches!(op, UnaryOp::Exp | UnaryOp::Log)
            && crate::amp::autocast_dtype(&self.device()).is_some()
        {
            let x = crate::amp::upper(self)?;
            if x.dtype() != self.dtype() {
                return x.unary(op);
            }
        }
        if !self.dtype().is_float() {
            if matches!(
                op,
                UnaryOp::Neg
                    | UnaryOp::Abs
                    | UnaryOp::Square
                    | UnaryOp::Sign
                    | UnaryOp::AddScalar(_)
                    | UnaryOp::MulScalar(_)
            ) {
                let _g = crate::no_grad();
                return self.to_dtype(DType::F32)?.unary(op)?.to_dtype(self.dtype());
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
        self.same_device(op.name(), other)?;
        let mut dt = DType::promote(self.dtype(), other.dtype());
        match op {
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => dt = DType::Bool,
            _ if op.needs_float() && !dt.is_float() => dt = DType::F32,
            _ if !op.is_comparison() && dt == DType::Bool => dt = DType::I32,
            _ => {}
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
        let saved = (op, Saved::new(&a), Saved::new(&b), y);
        Ok(record(out, op.name(), &[&a, &b], saved, |s, g| {
            let (op, a, b, y) = s;
            let recomputed;
            let y = if is_grad_enabled() && *op == BinaryOp::Div {
                y.get()?;
                recomputed = Saved::new(&a.get()?.div(&b.get()?)?);
                &recomputed
            } else {
                y
            };
            let (ga, gb) = op.backward(a, b, y, g)?;
            Ok(vec![
                Some(ga.sum_to(a.shape())?),
                Some(gb.sum_to(b.shape())?),
            ])
        }))
    }

    /// `self + other`
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Add, other)
    }
    /// `self + alpha * other` (torch.add with alpha).
    pub fn add_alpha(&self, other: &Tensor, alpha: f64) -> Result<Tensor> {
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
    /// relu's gradient: `self` (the output gradient) where `input > 0`, else 0, in one pass.
    pub fn threshold_backward(&self, input: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::ThresholdBackward, input)
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
    /// Compare with a scalar.
    pub fn gt_scalar(&self, v: f64) -> Result<Tensor> {
        self.gt(&self.scalar_like(v)?)
    }
    /// Compare with a scalar.
    pub fn lt_scalar(&self, v: f64) -> Result<Tensor> {
        self.lt(&self.scalar_like(v)?)
    }
    /// Compare with a scalar.
    pub fn eq_scalar(&self, v: f64) -> Result<Tensor> {
        self.eq(&self.scalar_like(v)?)
    }

    /// `cond ? a : b` with broadcasting (torch.where).
    pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
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
        Tensor::where_cond(mask, &self.scalar_like(value)?, self)
    }
}

macro_rules! op_trait {
    ($tr:ident, $m:ident, $f:ident) => {
        /// Operator form; panics with the op's error message on bad input (use the method for a
        /// `Result`).
        impl std::ops::$tr<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: &Tensor) -> Tensor {
                self.$f(rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    };
}
op_trait!(Add, add, add);
op_trait!(Sub, sub, sub);
op_trait!(Mul, mul, mul);
op_trait!(Div, div, div);

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self).unwrap_or_else(|e| panic!("{e}"))
    }
}
