//! The ONNX form of each wgtorch op that exports, called from the ops' trace hooks
//! (`trace::traced` in src/ops, and `RNNBase::direction`) while an export captures.

use super::proto;
use super::trace::{self, attr_f, attr_i, In, Tracer};
use crate::ops::{BinaryOp, UnaryOp};
use crate::{DType, Device, Error, Result, Tensor};

/// A unary op.
pub(crate) fn unary(r: &mut Tracer, op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
    if r.constants_only(&[x]) {
        return Ok(());
    }
    let simple = match op {
        UnaryOp::Neg => "Neg",
        UnaryOp::Abs => "Abs",
        UnaryOp::Exp => "Exp",
        UnaryOp::Log => "Log",
        UnaryOp::Sqrt => "Sqrt",
        UnaryOp::Sin => "Sin",
        UnaryOp::Cos => "Cos",
        UnaryOp::Tanh => "Tanh",
        UnaryOp::Sigmoid => "Sigmoid",
        UnaryOp::Relu => "Relu",
        UnaryOp::Reciprocal => "Reciprocal",
        UnaryOp::Erf => "Erf",
        UnaryOp::Sign => "Sign",
        UnaryOp::Floor => "Floor",
        UnaryOp::Ceil => "Ceil",
        UnaryOp::Round => "Round",
        UnaryOp::LeakyRelu(a) => {
            return r.node(
                "LeakyRelu",
                &[In::T(x)],
                &[out],
                vec![attr_f("alpha", a as f32)],
            )
        }
        // PyTorch's defaults, which ONNX's Softplus has (its threshold changes no f32 value).
        UnaryOp::Softplus(beta, threshold) if beta == 1.0 && threshold == 20.0 => "Softplus",
        UnaryOp::Elu(a) => {
            return r.node("Elu", &[In::T(x)], &[out], vec![attr_f("alpha", a as f32)])
        }
        UnaryOp::Gelu | UnaryOp::GeluTanh => {
            return gelu(r, matches!(op, UnaryOp::GeluTanh), x, out)
        }
        UnaryOp::Silu => {
            let xn = r.input(In::T(x))?;
            let s = r.value("sigmoid");
            r.raw("Sigmoid", vec![xn.clone()], vec![s.clone()], vec![]);
            let o = r.value("silu");
            r.raw("Mul", vec![xn, s], vec![o.clone()], vec![]);
            r.bind(out, o);
            return Ok(());
        }
        UnaryOp::Square => return r.node("Mul", &[In::T(x), In::T(x)], &[out], vec![]),
        UnaryOp::Rsqrt => {
            let xn = r.input(In::T(x))?;
            let s = r.value("sqrt");
            r.raw("Sqrt", vec![xn], vec![s.clone()], vec![]);
            let o = r.value("rsqrt");
            r.raw("Reciprocal", vec![s], vec![o.clone()], vec![]);
            r.bind(out, o);
            return Ok(());
        }
        other => {
            return Err(Error::msg(format!(
                "ONNX export: {} has no ONNX form here",
                other.name()
            )))
        }
    };
    r.node(simple, &[In::T(x)], &[out], vec![])
}

/// GELU: the `Gelu` op from opset 20, else PyTorch's exporter's decomposition.
fn gelu(r: &mut Tracer, tanh: bool, x: &Tensor, out: &Tensor) -> Result<()> {
    let opset = r.opset;
    if opset >= 20 {
        let a = trace::attr_s("approximate", if tanh { "tanh" } else { "none" });
        return r.node("Gelu", &[In::T(x)], &[out], vec![a]);
    }
    let c = |v: f32| Tensor::scalar(v, &Device::Cpu).and_then(|t| t.to_dtype(x.dtype()));
    let xn = r.input(In::T(x))?;
    let step = |r: &mut Tracer, op: &str, a: String, b: String| {
        let o = r.value("gelu");
        r.raw(op, vec![a, b], vec![o.clone()], vec![]);
        o
    };
    let inner = if tanh {
        // 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))
        let x3 = step(r, "Mul", xn.clone(), xn.clone());
        let x3 = step(r, "Mul", x3, xn.clone());
        let k = r.input(In::T(&c(0.044715)?))?;
        let t = step(r, "Mul", x3, k);
        let t = step(r, "Add", xn.clone(), t);
        let s = r.input(In::T(&c((2.0 / std::f32::consts::PI).sqrt())?))?;
        let t = step(r, "Mul", t, s);
        let th = r.value("gelu");
        r.raw("Tanh", vec![t], vec![th.clone()], vec![]);
        th
    } else {
        // 0.5 x (1 + erf(x / √2))
        let s = r.input(In::T(&c(std::f32::consts::SQRT_2)?))?;
        let d = step(r, "Div", xn.clone(), s);
        let e = r.value("gelu");
        r.raw("Erf", vec![d], vec![e.clone()], vec![]);
        e
    };
    let one = r.input(In::T(&c(1.0)?))?;
    let half = r.input(In::T(&c(0.5)?))?;
    let p = step(r, "Add", inner, one);
    let p = step(r, "Mul", xn, p);
    let o = step(r, "Mul", p, half);
    r.bind(out, o);
    Ok(())
}

/// A binary op between tensors.
pub(crate) fn binary(
    r: &mut Tracer,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
) -> Result<()> {
    let name = match op {
        BinaryOp::Add => "Add",
        BinaryOp::Sub => "Sub",
        BinaryOp::Mul => "Mul",
        BinaryOp::Div => "Div",
        BinaryOp::Pow => "Pow",
        BinaryOp::Maximum => "Max",
        BinaryOp::Minimum => "Min",
        BinaryOp::Eq | BinaryOp::Ne => "Equal",
        // ONNX's Mod with fmod = 0 (the divisor's sign) is for integers only.
        BinaryOp::Fmod => "Mod",
        BinaryOp::Remainder if !out.dtype().is_float() => "Mod",
        BinaryOp::Lt => "Less",
        BinaryOp::Le => "LessOrEqual",
        BinaryOp::Gt => "Greater",
        BinaryOp::Ge => "GreaterOrEqual",
        BinaryOp::LogicalAnd => "And",
        BinaryOp::LogicalOr => "Or",
        other => {
            return Err(Error::msg(format!(
                "ONNX export: {} has no ONNX form here",
                other.name()
            )))
        }
    };
    if r.constants_only(&[a, b]) {
        return Ok(());
    }
    // ONNX wants one element type; wgtorch promotes (int + float): cast to the result's type.
    let want = if op.is_comparison() {
        DType::promote(a.dtype(), b.dtype())
    } else {
        out.dtype()
    };
    let cast = |r: &mut Tracer, t: &Tensor| -> Result<String> {
        let n = r.input(In::T(t))?;
        if t.dtype() == want {
            return Ok(n);
        }
        let o = r.value("cast");
        r.raw(
            "Cast",
            vec![n],
            vec![o.clone()],
            vec![attr_i("to", super::tensor::code_of(want) as i64)],
        );
        Ok(o)
    };
    let (an, bn) = (cast(r, a)?, cast(r, b)?);
    let attrs = match op {
        BinaryOp::Fmod => vec![attr_i("fmod", 1)],
        BinaryOp::Remainder => vec![attr_i("fmod", 0)],
        _ => vec![],
    };
    let mut o = r.value(name);
    r.raw(name, vec![an, bn], vec![o.clone()], attrs);
    if op == BinaryOp::Ne {
        let ne = r.value("Not");
        r.raw("Not", vec![o], vec![ne.clone()], vec![]);
        o = ne;
    }
    r.bind(out, o);
    Ok(())
}

/// `x op c` for a scalar `c`, as a 0-d constant of the result's type. A compiled graph's `Pow`
/// is marked `wgtorch_pow_scalar` (read by the importer only): it is `pow_scalar`, with its
/// forms (`x * x * x` for 3, a square root for 0.5), where ONNX's `Pow` is C's `pow`.
pub(crate) fn scalar(r: &mut Tracer, op: BinaryOp, x: &Tensor, c: f64, out: &Tensor) -> Result<()> {
    let k = Tensor::full_dtype([0usize; 0], c, out.dtype(), &Device::Cpu)?;
    let before = r.nodes.len();
    binary(r, op, x, &k, out)?;
    if op == BinaryOp::Pow && r.live_params {
        if let Some(node) = r.nodes[before..].iter_mut().find(|n| n.op_type() == "Pow") {
            node.attribute.push(attr_i(POW_SCALAR, 1));
        }
    }
    Ok(())
}

/// The mark of a compiled graph's `Pow` node that eager ran as `pow_scalar` ([`scalar`]).
pub(crate) const POW_SCALAR: &str = "wgtorch_pow_scalar";

/// The mark of a compiled graph's `LSTM` node whose `W`, `R` and `B` keep the module's gate
/// order (i, f, g, o) instead of ONNX's (i, o, f, c) ([`rnn`]); read by the importer only.
pub(crate) const LSTM_GATES_IFGO: &str = "wgtorch_lstm_gates_ifgo";

/// `torch.where(cond, a, b)`.
pub(crate) fn where_cond(
    r: &mut Tracer,
    cond: &Tensor,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
) -> Result<()> {
    if a.dtype() != out.dtype() || b.dtype() != out.dtype() {
        return Err(Error::msg(
            "ONNX export: where with mixed element types has no ONNX form here",
        ));
    }
    r.node("Where", &[In::T(cond), In::T(a), In::T(b)], &[out], vec![])
}

/// `x.index_select(dim, index)` (and an embedding, dim 0) as a Gather. ONNX's Gather counts a
/// negative index from the end, where wgtorch's ops refuse it: a compiled graph's Gather is
/// marked to refuse it too (`wgtorch_strict`, read by the importer only; an exported file has
/// ONNX's meaning).
pub(crate) fn gather(
    r: &mut Tracer,
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    out: &Tensor,
) -> Result<()> {
    if x.ndim() == 0 || x.ndim() + index.ndim() != out.ndim() + 1 {
        return Err(Error::msg(
            "ONNX export: index_select of a 0-d tensor or with a 0-d index has no ONNX form here",
        ));
    }
    let mut attrs = vec![attr_i("axis", dim as i64)];
    if r.live_params {
        attrs.push(attr_i("wgtorch_strict", 1));
    }
    r.node("Gather", &[In::T(x), In::T(index)], &[out], attrs)
}

/// `sum`/`mean` over `axes` (all when empty): axes as an input (ReduceSum from opset 13, the
/// others from 18), an attribute before.
pub(crate) fn reduce(
    r: &mut Tracer,
    op: &str,
    x: &Tensor,
    axes: Option<&[isize]>,
    keep: bool,
    out: &Tensor,
) -> Result<()> {
    let axes = axes.ok_or_else(|| Error::msg("ONNX export: reduction axes"))?;
    let rank = x.ndim() as i64;
    let axes: Vec<i64> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        axes.iter().map(|&a| a as i64).collect()
    };
    let opset = r.opset;
    let keep = attr_i("keepdims", keep as i64);
    if op == "ReduceSum" || opset >= 18 {
        let xn = r.input(In::T(x))?;
        let a = r.input(In::Ints(axes))?;
        let o = r.value(op);
        r.raw(op, vec![xn, a], vec![o.clone()], vec![keep]);
        r.bind(out, o);
        Ok(())
    } else {
        r.node(
            op,
            &[In::T(x)],
            &[out],
            vec![keep, trace::attr_ints("axes", &axes)],
        )
    }
}

/// `x @ w.T + b`: one Gemm for 2-D inputs, MatMul with the transposed weight (and Add) else.
pub(crate) fn linear(
    r: &mut Tracer,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    if x.ndim() == 2 && b.is_none_or(|b| b.ndim() == 1) {
        let mut ins = vec![In::T(x), In::T(w)];
        if let Some(b) = b {
            ins.push(In::T(b));
        }
        return r.node("Gemm", &ins, &[out], vec![attr_i("transB", 1)]);
    }
    let (xn, wn) = (r.input(In::T(x))?, r.input(In::T(w))?);
    let wt = r.value("weight_t");
    r.raw(
        "Transpose",
        vec![wn],
        vec![wt.clone()],
        vec![trace::attr_ints("perm", &[1, 0])],
    );
    let mut o = r.value("matmul");
    r.raw("MatMul", vec![xn, wt], vec![o.clone()], vec![]);
    if let Some(b) = b {
        let bn = r.input(In::T(b))?;
        let sum = r.value("linear");
        r.raw("Add", vec![o, bn], vec![sum.clone()], vec![]);
        o = sum;
    }
    r.bind(out, o);
    Ok(())
}

/// `conv2d`.
pub(crate) fn conv2d(
    r: &mut Tracer,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    o: &crate::nn::functional::Conv2dFuncOptions,
    out: &Tensor,
) -> Result<()> {
    let [ph, pw] = o.padding.0;
    let attrs = vec![
        trace::attr_ints("kernel_shape", &[w.shape()[2] as i64, w.shape()[3] as i64]),
        trace::attr_ints("strides", &o.stride.0.map(|v| v as i64)),
        trace::attr_ints("dilations", &o.dilation.0.map(|v| v as i64)),
        trace::attr_ints("pads", &[ph as i64, pw as i64, ph as i64, pw as i64]),
        attr_i("group", o.groups as i64),
    ];
    let mut ins = vec![In::T(x), In::T(w)];
    if let Some(b) = b {
        ins.push(In::T(b));
    }
    r.node("Conv", &ins, &[out], attrs)
}

fn pool_attrs(
    kernel: crate::nn::functional::Size2,
    stride: Option<crate::nn::functional::Size2>,
    pad: [usize; 2],
) -> Vec<proto::AttributeProto> {
    let k = kernel.0.map(|v| v as i64);
    vec![
        trace::attr_ints("kernel_shape", &k),
        trace::attr_ints("strides", &stride.map_or(k, |s| s.0.map(|v| v as i64))),
        trace::attr_ints(
            "pads",
            &[pad[0] as i64, pad[1] as i64, pad[0] as i64, pad[1] as i64],
        ),
    ]
}

/// `max_pool2d`.
pub(crate) fn max_pool2d(
    r: &mut Tracer,
    x: &Tensor,
    kernel: crate::nn::functional::Size2,
    o: &crate::nn::functional::MaxPool2dOptions,
    out: &Tensor,
) -> Result<()> {
    let mut attrs = pool_attrs(kernel, o.stride, o.padding.0);
    attrs.push(trace::attr_ints(
        "dilations",
        &o.dilation.0.map(|v| v as i64),
    ));
    r.node("MaxPool", &[In::T(x)], &[out], attrs)
}

/// `avg_pool2d` (without `divisor_override`).
pub(crate) fn avg_pool2d(
    r: &mut Tracer,
    x: &Tensor,
    kernel: crate::nn::functional::Size2,
    o: &crate::nn::functional::AvgPool2dOptions,
    out: &Tensor,
) -> Result<()> {
    if o.divisor_override.is_some() {
        return Err(Error::msg(
            "ONNX export: avg_pool2d's divisor_override has no ONNX form",
        ));
    }
    let mut attrs = pool_attrs(kernel, o.stride, o.padding.0);
    attrs.push(attr_i("count_include_pad", o.count_include_pad as i64));
    r.node("AveragePool", &[In::T(x)], &[out], attrs)
}

/// `adaptive_avg_pool2d` to 1×1 (GlobalAveragePool), or to the input's own size (Identity).
pub(crate) fn adaptive_avg_pool2d(r: &mut Tracer, x: &Tensor, out: &Tensor) -> Result<()> {
    let n = out.ndim();
    if out.shape()[n - 2..] == [1, 1] {
        return r.node("GlobalAveragePool", &[In::T(x)], &[out], vec![]);
    }
    if out.shape() == x.shape() {
        return r.node("Identity", &[In::T(x)], &[out], vec![]);
    }
    Err(Error::msg(format!(
        "ONNX export: adaptive_avg_pool2d to {:?} has no ONNX form here (1x1 or the input's size only)",
        &out.shape()[n - 2..]
    )))
}

/// `batch_norm` in eval mode.
pub(crate) fn batch_norm(
    r: &mut Tracer,
    x: &Tensor,
    mean: Option<&Tensor>,
    var: Option<&Tensor>,
    o: &crate::nn::functional::BatchNormFuncOptions<'_>,
    out: &Tensor,
) -> Result<()> {
    let (Some(mean), Some(var), false) = (mean, var, o.training) else {
        let why = if o.training {
            "batch_norm in training mode (batch statistics; running statistics updated in place) is not captured"
        } else {
            "batch_norm without running statistics is not captured"
        };
        return Err(Error::msg(format!(
            "{}: {why}; a graph holds batch_norm in eval mode with running statistics (model.eval())",
            r.what
        )));
    };
    let c = x.shape()[1];
    let ones = Tensor::ones([c], &Device::Cpu)?.to_dtype(x.dtype())?;
    let zeros = Tensor::zeros([c], &Device::Cpu)?.to_dtype(x.dtype())?;
    let (w, b) = (o.weight.unwrap_or(&ones), o.bias.unwrap_or(&zeros));
    r.node(
        "BatchNormalization",
        &[In::T(x), In::T(w), In::T(b), In::T(mean), In::T(var)],
        &[out],
        vec![attr_f("epsilon", o.eps as f32)],
    )
}

/// `layer_norm` over the trailing `normalized` dims.
pub(crate) fn layer_norm(
    r: &mut Tracer,
    x: &Tensor,
    normalized: &[usize],
    o: &crate::nn::functional::LayerNormFuncOptions<'_>,
    out: &Tensor,
) -> Result<()> {
    let ones = Tensor::ones(normalized, &Device::Cpu)?.to_dtype(x.dtype())?;
    let mut ins = vec![In::T(x), In::T(o.weight.unwrap_or(&ones))];
    if let Some(b) = o.bias {
        ins.push(In::T(b));
    }
    let attrs = vec![
        attr_i("axis", -(normalized.len() as i64)),
        attr_f("epsilon", o.eps as f32),
    ];
    r.node("LayerNormalization", &ins, &[out], attrs)
}

/// A view or reshape: Reshape to the output's shape.
pub(crate) fn reshape(r: &mut Tracer, x: &Tensor, out: &Tensor) -> Result<()> {
    let shape = out.shape().iter().map(|&d| d as i64).collect();
    r.node("Reshape", &[In::T(x), In::Ints(shape)], &[out], vec![])
}

/// `permute` / `transpose` / `t`.
pub(crate) fn permute(
    r: &mut Tracer,
    x: &Tensor,
    dims: Option<&[isize]>,
    out: &Tensor,
) -> Result<()> {
    let n = x.ndim() as isize;
    let perm: Vec<i64> = dims
        .ok_or_else(|| Error::msg("ONNX export: permute dims"))?
        .iter()
        .map(|&d| (if d < 0 { d + n } else { d }) as i64)
        .collect();
    r.node(
        "Transpose",
        &[In::T(x)],
        &[out],
        vec![trace::attr_ints("perm", &perm)],
    )
}

/// `expand`: Expand to the output's shape (nothing when it returned the input).
pub(crate) fn expand(r: &mut Tracer, x: &Tensor, out: &Tensor) -> Result<()> {
    if out.id() == x.id() {
        return Ok(());
    }
    let shape = out.shape().iter().map(|&d| d as i64).collect();
    r.node("Expand", &[In::T(x), In::Ints(shape)], &[out], vec![])
}

/// `slice` (and `narrow`, `select`, `chunk`, `split`, which slice).
#[allow(clippy::too_many_arguments)]
pub(crate) fn slice(
    r: &mut Tracer,
    x: &Tensor,
    dim: isize,
    start: usize,
    end: usize,
    step: usize,
    out: &Tensor,
) -> Result<()> {
    let n = x.ndim() as isize;
    let d = if dim < 0 { dim + n } else { dim } as usize;
    let end = end.min(x.shape()[d]);
    let start = start.min(end);
    // A slice to the end stays one at any size (a dynamic batch included): INT64_MAX, clamped.
    let end_value = if end == x.shape()[d] {
        i64::MAX
    } else {
        end as i64
    };
    r.node(
        "Slice",
        &[
            In::T(x),
            In::Ints(vec![start as i64]),
            In::Ints(vec![end_value]),
            In::Ints(vec![d as i64]),
            In::Ints(vec![step as i64]),
        ],
        &[out],
        vec![],
    )
}

/// `cat`.
pub(crate) fn cat(r: &mut Tracer, xs: &[Tensor], dim: isize, out: &Tensor) -> Result<()> {
    let n = out.ndim() as isize;
    let axis = if dim < 0 { dim + n } else { dim };
    let ins: Vec<In> = xs.iter().map(In::T).collect();
    r.node("Concat", &ins, &[out], vec![attr_i("axis", axis as i64)])
}

/// A copy (`contiguous`): Identity (nothing when it returned the input).
pub(crate) fn identity(r: &mut Tracer, x: &Tensor, out: &Tensor) -> Result<()> {
    if out.id() == x.id() {
        return Ok(());
    }
    r.node("Identity", &[In::T(x)], &[out], vec![])
}

/// `to_dtype`: Cast (nothing when it returned the input).
pub(crate) fn cast(r: &mut Tracer, x: &Tensor, out: &Tensor) -> Result<()> {
    if out.id() == x.id() {
        return Ok(());
    }
    r.node(
        "Cast",
        &[In::T(x)],
        &[out],
        vec![attr_i("to", super::tensor::code_of(out.dtype()) as i64)],
    )
}

/// One layer and direction of an `nn.LSTM`/`nn.GRU`, as the module holds it.
pub(crate) struct Rnn<'a> {
    pub kind: &'static str,
    /// PyTorch's gate blocks in ONNX's order (LSTM i,f,g,o → i,o,f,c; GRU r,z,n → z,r,h).
    pub gate_order: &'static [usize],
    pub hidden: usize,
    pub reverse: bool,
    pub w_ih: &'a Tensor,
    pub w_hh: &'a Tensor,
    pub b_ih: Option<&'a Tensor>,
    pub b_hh: Option<&'a Tensor>,
}

/// An `LSTM`/`GRU` node for one layer and direction. The weights stay initializers under their
/// state_dict names; the gate reordering is Split/Concat in the graph (folded at load).
pub(crate) fn rnn(
    r: &mut Tracer,
    m: &Rnn,
    seq: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
    out: &(Tensor, Tensor, Option<Tensor>),
) -> Result<()> {
    let gates = m.gate_order.len();
    let h = m.hidden as i64;
    // A compiled graph's LSTM reads the live weights in the module's gate order, marked for the
    // importer ([`LSTM_GATES_IFGO`]): no reordering of every weight, and of its gradient, at
    // every call.
    let keep_order = r.live_params && m.kind == "LSTM";
    // [gates·H, ...] in ONNX's gate order (or kept), with a leading direction dim of 1.
    let reorder = |r: &mut Tracer, t: &Tensor| -> Result<String> {
        let tn = r.input(In::T(t))?;
        if keep_order {
            let zero = r.input(In::Ints(vec![0]))?;
            let u = r.value("weights");
            r.raw("Unsqueeze", vec![tn, zero], vec![u.clone()], vec![]);
            return Ok(u);
        }
        let split = r.input(In::Ints(vec![h; gates]))?;
        let parts: Vec<String> = (0..gates).map(|_| r.value("gate")).collect();
        r.raw(
            "Split",
            vec![tn, split],
            parts.clone(),
            vec![attr_i("axis", 0)],
        );
        let cat = r.value("gates");
        r.raw(
            "Concat",
            m.gate_order.iter().map(|&k| parts[k].clone()).collect(),
            vec![cat.clone()],
            vec![attr_i("axis", 0)],
        );
        let zero = r.input(In::Ints(vec![0]))?;
        let u = r.value("weights");
        r.raw("Unsqueeze", vec![cat, zero], vec![u.clone()], vec![]);
        Ok(u)
    };
    let x = r.input(In::T(seq))?;
    let (w, rr) = (reorder(r, m.w_ih)?, reorder(r, m.w_hh)?);
    let b = match (m.b_ih, m.b_hh) {
        (Some(bi), Some(bh)) => {
            let (bi, bh) = (reorder(r, bi)?, reorder(r, bh)?);
            let cat = r.value("bias");
            r.raw(
                "Concat",
                vec![bi, bh],
                vec![cat.clone()],
                vec![attr_i("axis", 1)],
            );
            cat
        }
        (None, None) => String::new(),
        _ => {
            return Err(Error::msg(
                "ONNX export: an RNN with only one of its two biases",
            ))
        }
    };
    // Initial states: omitted when they are the zeros the module made itself (a compiled
    // graph reads a state from outside the pass, or one that needs a gradient, as it is).
    let state = |r: &mut Tracer, s: &Tensor| -> Result<String> {
        let own = !r.live_params || (r.made_inside(s) && !s.requires_grad());
        if own
            && r.traced(s).is_none()
            && s.grad_fn().is_none()
            && s.to_f64_vec()?.iter().all(|&v| v == 0.0)
        {
            return Ok(String::new());
        }
        let sn = r.input(In::T(s))?;
        let zero = r.input(In::Ints(vec![0]))?;
        let u = r.value("state");
        r.raw("Unsqueeze", vec![sn, zero], vec![u.clone()], vec![]);
        Ok(u)
    };
    let ih = state(r, h0)?;
    let ic = match c0 {
        Some(c) => state(r, c)?,
        None => String::new(),
    };
    let mut ins = vec![x, w, rr, b, String::new(), ih];
    if m.kind == "LSTM" {
        ins.push(ic);
    }
    while ins.last().is_some_and(String::is_empty) {
        ins.pop();
    }
    let outs: Vec<String> = (0..if m.kind == "LSTM" { 3 } else { 2 })
        .map(|_| r.value(m.kind))
        .collect();
    let mut attrs = vec![
        attr_i("hidden_size", h),
        trace::attr_s("direction", if m.reverse { "reverse" } else { "forward" }),
    ];
    if m.kind == "GRU" {
        attrs.push(attr_i("linear_before_reset", 1));
    }
    if keep_order {
        attrs.push(attr_i(LSTM_GATES_IFGO, 1));
    }
    r.raw(m.kind, ins, outs.clone(), attrs);
    // Y [T, 1, B, H] → [T, B, H]; Y_h, Y_c [1, B, H] → [B, H].
    let squeeze = |r: &mut Tracer, v: &str, axis: i64, t: &Tensor| -> Result<()> {
        let a = r.input(In::Ints(vec![axis]))?;
        let o = r.value("squeeze");
        r.raw("Squeeze", vec![v.to_string(), a], vec![o.clone()], vec![]);
        r.bind(t, o);
        Ok(())
    };
    squeeze(r, &outs[0], 1, &out.0)?;
    squeeze(r, &outs[1], 0, &out.1)?;
    if let Some(c) = &out.2 {
        squeeze(r, &outs[2], 0, c)?;
    }
    Ok(())
}
