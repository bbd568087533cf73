//! Elementwise operators: arithmetic and comparisons with numpy broadcasting, activations,
//! casts, `Where`, `Clip`, `Identity`, `Dropout` (inference).

use super::{broadcast, float_input, need, same_dtype, Ctx, Info, OpDef};
use crate::onnx::tensor::dtype_of;
use crate::{DType, Device, Result, Tensor};

/// Same dtype and shape as input 0.
fn infer_same(ctx: &Ctx, xs: &[Option<&Info>]) -> Result<Vec<Info>> {
    let x = need(ctx, xs, 0)?;
    Ok(vec![Info::new(x.dtype, x.shape.clone())])
}

/// A float input, same dtype and shape.
fn infer_float(ctx: &Ctx, xs: &[Option<&Info>]) -> Result<Vec<Info>> {
    float_input(ctx, need(ctx, xs, 0)?)?;
    infer_same(ctx, xs)
}

/// Inputs of one dtype, broadcast; the result has `out` as dtype when given.
fn infer_broadcast(ctx: &Ctx, xs: &[Option<&Info>], out: Option<DType>) -> Result<Vec<Info>> {
    let dtype = same_dtype(ctx, xs)?;
    let shapes: Vec<_> = xs.iter().flatten().map(|x| &x.shape).collect();
    Ok(vec![Info::new(
        out.unwrap_or(dtype),
        broadcast(ctx, &shapes)?,
    )])
}

macro_rules! unary {
    ($(#[$doc:meta])* $konst:ident, $onnx:literal, $infer:ident, |$ctx:ident, $x:ident| $body:expr) => {
        $(#[$doc])*
        pub(super) const $konst: OpDef = OpDef {
            name: $onnx,
            host_inputs: &[],
            infer: $infer,
            run: |$ctx, xs| {
                let $x = need($ctx, xs, 0)?;
                Ok(vec![$body?])
            },
        };
    };
}

macro_rules! binary {
    ($konst:ident, $onnx:literal, $out:expr, |$a:ident, $b:ident| $body:expr) => {
        pub(super) const $konst: OpDef = OpDef {
            name: $onnx,
            host_inputs: &[],
            infer: |ctx, xs| infer_broadcast(ctx, &xs[..xs.len().min(2)], $out),
            run: |ctx, xs| {
                let ($a, $b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
                Ok(vec![$body?])
            },
        };
    };
}

binary!(ADD, "Add", None, |a, b| a.add(b));
binary!(SUB, "Sub", None, |a, b| a.sub(b));
binary!(MUL, "Mul", None, |a, b| a.mul(b));
binary!(EQUAL, "Equal", Some(DType::Bool), |a, b| a.eq(b));
binary!(LESS, "Less", Some(DType::Bool), |a, b| a.lt(b));
binary!(LESS_OR_EQUAL, "LessOrEqual", Some(DType::Bool), |a, b| a
    .le(b));
binary!(GREATER, "Greater", Some(DType::Bool), |a, b| a.gt(b));
binary!(
    GREATER_OR_EQUAL,
    "GreaterOrEqual",
    Some(DType::Bool),
    |a, b| a.ge(b)
);
binary!(AND, "And", Some(DType::Bool), |a, b| a.logical_and(b));
binary!(OR, "Or", Some(DType::Bool), |a, b| a.logical_or(b));

/// `Div`: true division for floats; for integers ONNX truncates toward zero, computed exactly.
pub(super) const DIV: OpDef = OpDef {
    name: "Div",
    host_inputs: &[],
    infer: |ctx, xs| infer_broadcast(ctx, xs, None),
    run: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        if a.dtype().is_float() {
            return Ok(vec![a.div(b)?]);
        }
        Ok(vec![int_binary(ctx, a, b, |x, y| x.checked_div(y))?])
    },
};

/// `Mod`: `fmod = 1` is C's fmod (the dividend's sign), `fmod = 0` the divisor's sign (integers
/// only, as the standard requires).
pub(super) const MOD: OpDef = OpDef {
    name: "Mod",
    host_inputs: &[],
    infer: |ctx, xs| {
        let fmod = ctx.i("fmod", 0)?;
        if fmod == 0 && xs.iter().flatten().any(|x| x.dtype.is_float()) {
            return Err(ctx.err("fmod = 0 is only defined for integers (use fmod = 1 for floats)"));
        }
        infer_broadcast(ctx, xs, None)
    },
    run: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        Ok(vec![if ctx.i("fmod", 0)? == 1 {
            a.fmod(b)?
        } else {
            a.remainder(b)?
        }])
    },
};

/// Integer arithmetic, exact, on the host (shape arithmetic is small and lives on the CPU; a
/// GPU operand is read back). Division by zero is an error, as in PyTorch.
fn int_binary(ctx: &Ctx, a: &Tensor, b: &Tensor, f: fn(i64, i64) -> Option<i64>) -> Result<Tensor> {
    let (dt, dev) = (a.dtype(), a.device());
    if b.dtype() != dt || dt == DType::Bool {
        return Err(ctx.err(format!(
            "expects two integer inputs of one type, got {dt} and {}",
            b.dtype()
        )));
    }
    let shape = crate::shape::broadcast_shapes(ctx.node.def.name, a.shape(), b.shape())?;
    let x = a.expand(&shape)?.to_dtype(DType::I64)?.to_vec::<i64>()?;
    let y = b.expand(&shape)?.to_dtype(DType::I64)?.to_vec::<i64>()?;
    let out = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| {
            f(x, y).ok_or_else(|| ctx.err(format!("integer division by zero ({x} by {y})")))
        })
        .collect::<Result<Vec<i64>>>()?;
    Tensor::from_vec(out, shape, &Device::Cpu)?
        .to_dtype(dt)?
        .to(&dev)
}

/// `Pow`: the exponent may have another type than the base; the result has the base's.
pub(super) const POW: OpDef = OpDef {
    name: "Pow",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        Ok(vec![Info::new(
            a.dtype,
            broadcast(ctx, &[&a.shape, &b.shape])?,
        )])
    },
    run: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let y = a.pow(&b.to_dtype(a.dtype())?)?;
        Ok(vec![if y.dtype() == a.dtype() {
            y
        } else {
            y.to_dtype(a.dtype())?
        }])
    },
};

/// `Max`/`Min`: variadic, broadcast.
fn fold_variadic(
    ctx: &Ctx,
    xs: &[Option<Tensor>],
    f: fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Vec<Tensor>> {
    let mut it = xs.iter().flatten();
    let mut acc = it
        .next()
        .ok_or_else(|| ctx.err("needs at least one input"))?
        .clone();
    for x in it {
        acc = f(&acc, x)?;
    }
    Ok(vec![acc])
}
pub(super) const MAX: OpDef = OpDef {
    name: "Max",
    host_inputs: &[],
    infer: |ctx, xs| infer_broadcast(ctx, xs, None),
    run: |ctx, xs| fold_variadic(ctx, xs, Tensor::maximum),
};
pub(super) const MIN: OpDef = OpDef {
    name: "Min",
    host_inputs: &[],
    infer: |ctx, xs| infer_broadcast(ctx, xs, None),
    run: |ctx, xs| fold_variadic(ctx, xs, Tensor::minimum),
};

/// `Where(condition, X, Y)`.
pub(super) const WHERE: OpDef = OpDef {
    name: "Where",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (c, a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?, need(ctx, xs, 2)?);
        if c.dtype != DType::Bool {
            return Err(ctx.err(format!("condition must be bool, got {}", c.dtype)));
        }
        let dtype = same_dtype(ctx, &[Some(a), Some(b)])?;
        Ok(vec![Info::new(
            dtype,
            broadcast(ctx, &[&c.shape, &a.shape, &b.shape])?,
        )])
    },
    run: |ctx, xs| {
        let (c, a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?, need(ctx, xs, 2)?);
        Ok(vec![Tensor::where_cond(c, a, b)?])
    },
};

unary!(NOT, "Not", infer_same, |ctx, x| {
    if x.dtype() != DType::Bool {
        return Err(ctx.err(format!("expects bool, got {}", x.dtype())));
    }
    x.to_dtype(DType::I32)?.eq_scalar(0)
});
unary!(SQRT, "Sqrt", infer_float, |_c, x| x.sqrt());
unary!(RECIPROCAL, "Reciprocal", infer_float, |_c, x| x
    .reciprocal());
unary!(NEG, "Neg", infer_same, |_c, x| x.neg());
unary!(EXP, "Exp", infer_float, |_c, x| x.exp());
unary!(LOG, "Log", infer_float, |_c, x| x.log());
unary!(ERF, "Erf", infer_float, |_c, x| x.erf());
unary!(ABS, "Abs", infer_same, |_c, x| x.abs());
unary!(SIN, "Sin", infer_float, |_c, x| x.sin());
unary!(COS, "Cos", infer_float, |_c, x| x.cos());
unary!(RELU, "Relu", infer_same, |_c, x| x.relu());
unary!(SIGMOID, "Sigmoid", infer_float, |_c, x| x.sigmoid());
unary!(TANH, "Tanh", infer_float, |_c, x| x.tanh());
unary!(SOFTPLUS, "Softplus", infer_float, |_c, x| x
    .softplus(1.0, 20.0));
unary!(ELU, "Elu", infer_float, |ctx, x| x
    .elu(ctx.f("alpha", 1.0)? as f64));
unary!(LEAKY_RELU, "LeakyRelu", infer_float, |ctx, x| x
    .leaky_relu(ctx.f("alpha", 0.01)? as f64));
unary!(
    /// `max(0, min(1, alpha x + beta))`.
    HARD_SIGMOID, "HardSigmoid", infer_float, |ctx, x| hard_sigmoid(x, ctx.f("alpha", 0.2)?, ctx.f("beta", 0.5)?)
);
unary!(
    /// `x · HardSigmoid(x)` with alpha 1/6, beta 1/2.
    HARD_SWISH, "HardSwish", infer_float, |_c, x| x.mul(&hard_sigmoid(x, 1.0 / 6.0, 0.5)?)
);
unary!(
    GELU,
    "Gelu",
    infer_float,
    |ctx, x| match ctx.s("approximate", "none")?.as_str() {
        "none" => x.gelu(),
        "tanh" => x.gelu_tanh(),
        other => Err(ctx.err(format!(
            "approximate must be 'none' or 'tanh', got '{other}'"
        ))),
    }
);
// A contiguous tensor: the recorder writes Identity for a `contiguous()` that copied, and the
// graph keeps that copy (three projections reading one transposed input would each copy it).
unary!(IDENTITY, "Identity", infer_same, |_c, x| x.contiguous());
unary!(SIGN, "Sign", infer_same, |_c, x| x.sign());
unary!(FLOOR, "Floor", infer_float, |_c, x| x.floor());
unary!(CEIL, "Ceil", infer_float, |_c, x| x.ceil());
unary!(ROUND, "Round", infer_float, |_c, x| x.round());

fn hard_sigmoid(x: &Tensor, alpha: f32, beta: f32) -> Result<Tensor> {
    x.mul_scalar(alpha as f64)?
        .add_scalar(beta as f64)?
        .clamp(Some(0.0), Some(1.0))
}

/// `Clip(input, min, max)`: the bounds are optional 0-d inputs (attributes before opset 11).
pub(super) const CLIP: OpDef = OpDef {
    name: "Clip",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        for b in xs[1..].iter().flatten() {
            if b.dtype != x.dtype
                || b.rank()
                    .is_some_and(|r| r != 0 && b.shape != Some(vec![Some(1)]))
            {
                return Err(ctx.err(format!(
                    "min and max must be scalars of the input's type {}, got {} {}",
                    x.dtype,
                    b.dtype,
                    super::show(&b.shape)
                )));
            }
        }
        infer_same(ctx, xs)
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let bound = |i: usize| {
            xs.get(i)
                .and_then(Option::as_ref)
                .map(|b| b.reshape([0usize; 0]))
                .transpose()
        };
        let (lo, hi) = (bound(1)?, bound(2)?);
        if lo.is_none() && hi.is_none() {
            return Ok(vec![x.clone()]);
        }
        let _ = ctx;
        Ok(vec![x.clamp_tensor(lo.as_ref(), hi.as_ref())?])
    },
};

/// The dtype `Cast`'s `to` names, refusing the types whose values wgtorch would hold widened
/// (a cast to uint8 wraps in ONNX; a widened int32 would not).
fn cast_target(ctx: &Ctx) -> Result<DType> {
    use crate::onnx::proto::tensor_proto::DataType as D;
    let to = ctx.i("to", 0)? as i32;
    let exact = matches!(
        D::try_from(to),
        Ok(D::Float | D::Double | D::Float16 | D::Bfloat16 | D::Int32 | D::Int64 | D::Bool)
    );
    if !exact {
        return Err(ctx.err(format!(
            "Cast to {} is not supported (wgtorch casts to float, double, float16, bfloat16, int32, int64 and bool)",
            D::try_from(to).map(|d| d.as_str_name()).unwrap_or("an unknown type")
        )));
    }
    dtype_of(to).map_err(|e| ctx.err(e))
}

/// `Cast(to)`.
pub(super) const CAST: OpDef = OpDef {
    name: "Cast",
    host_inputs: &[],
    infer: |ctx, xs| {
        Ok(vec![Info::new(
            cast_target(ctx)?,
            need(ctx, xs, 0)?.shape.clone(),
        )])
    },
    run: |ctx, xs| Ok(vec![need(ctx, xs, 0)?.to_dtype(cast_target(ctx)?)?]),
};

/// `CastLike(input, target_type)`.
pub(super) const CAST_LIKE: OpDef = OpDef {
    name: "CastLike",
    host_inputs: &[],
    infer: |ctx, xs| {
        Ok(vec![Info::new(
            need(ctx, xs, 1)?.dtype,
            need(ctx, xs, 0)?.shape.clone(),
        )])
    },
    run: |ctx, xs| Ok(vec![need(ctx, xs, 0)?.to_dtype(need(ctx, xs, 1)?.dtype())?]),
};

/// `Dropout` at inference: the identity (and an all-true mask). A graph that asks for training
/// mode is refused: an ONNX model here runs as inference; train with `Model::load_trainable`.
pub(super) const DROPOUT: OpDef = OpDef {
    name: "Dropout",
    host_inputs: &[2],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        if let super::Known::Value(v) = ctx.known(2) {
            if v.first().is_some_and(|&t| t != 0) {
                return Err(ctx.err("training_mode = true is not supported (inference only)"));
            }
        }
        Ok(vec![
            Info::new(x.dtype, x.shape.clone()),
            Info::new(DType::Bool, x.shape.clone()),
        ])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        if ctx
            .host(2)?
            .and_then(|v| v.first().copied())
            .is_some_and(|t| t != 0)
        {
            return Err(ctx.err("training_mode = true is not supported (inference only)"));
        }
        let mask = Tensor::full_dtype(x.shape(), 1.0, DType::Bool, &x.device())?;
        Ok(vec![x.clone(), mask])
    },
};
