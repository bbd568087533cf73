//! The ONNX operators wgtorch runs, each declared once in [`OPS`]: its name, the inputs it
//! reads on the host (shapes, axes, sizes), its static shape inference and its execution with
//! wgtorch ops (so that every operator runs on the CPU and every GPU adapter, and is
//! differentiable for fine-tuning). The families live in `math.rs` (elementwise), `nn.rs`
//! (convolution, pooling, normalization, matmul), `shape.rs` (movement and shape ops),
//! `index.rs` (Slice, Gather, GatherND),
//! `reduce.rs` and `rnn.rs` (LSTM, GRU).

mod index;
mod math;
pub(crate) mod nn;
mod reduce;
mod rnn;
mod shape;

use super::graph::Node;
use super::proto::{attribute_proto::AttributeType, AttributeProto};
use crate::{DType, Error, Result, Tensor};

/// A dimension known at load (`Some`) or only at run time (`None`: a dynamic batch, or a size
/// computed from one).
pub(crate) type Dim = Option<usize>;

/// What load-time inference knows of a value: its dtype, its shape (`None` when even the rank
/// is unknown), and its contents when they are known at load (constants and what follows from
/// them and from static shapes), as a CPU tensor.
#[derive(Clone, Debug)]
pub(crate) struct Info {
    pub dtype: DType,
    pub shape: Option<Vec<Dim>>,
    pub value: Option<Tensor>,
}

impl Info {
    pub fn new(dtype: DType, shape: Option<Vec<Dim>>) -> Info {
        Info {
            dtype,
            shape,
            value: None,
        }
    }
    pub fn known(dtype: DType, shape: &[usize]) -> Info {
        Info::new(dtype, Some(shape.iter().map(|&d| Some(d)).collect()))
    }
    pub fn of_tensor(t: &Tensor) -> Info {
        Info {
            value: Some(t.clone()),
            ..Info::known(t.dtype(), t.shape())
        }
    }
    pub fn rank(&self) -> Option<usize> {
        self.shape.as_ref().map(Vec::len)
    }
}

/// Formats a shape with unknown dims as `?`.
pub(crate) fn show(shape: &Option<Vec<Dim>>) -> String {
    match shape {
        None => "[?...]".into(),
        Some(s) => format!(
            "[{}]",
            s.iter()
                .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Load-time inference: output types from the inputs' (`None`: an omitted optional input).
pub(crate) type InferFn = fn(&Ctx, &[Option<&Info>]) -> Result<Vec<Info>>;
/// Execution: the outputs from the inputs (`None`: an omitted optional input).
pub(crate) type RunFn = fn(&Ctx, &[Option<Tensor>]) -> Result<Vec<Tensor>>;

/// One operator: what the graph checker and the executor need.
pub(crate) struct OpDef {
    /// The ONNX op type.
    pub name: &'static str,
    /// Inputs read on the host as integers (a Reshape's shape, a Slice's starts, ...): they are
    /// computed on the CPU when they depend on shapes, and read back when they are not.
    pub host_inputs: &'static [usize],
    /// Output dtypes and shapes from the inputs' (and the host inputs' values where known).
    pub infer: InferFn,
    /// The outputs, from the inputs (`None` for an omitted optional input).
    pub run: RunFn,
}

/// Every supported operator (default domain, opsets 13 to 21).
pub(crate) static OPS: &[OpDef] = &[
    // elementwise (math.rs)
    math::ADD,
    math::SUB,
    math::MUL,
    math::DIV,
    math::POW,
    math::MOD,
    math::MAX,
    math::MIN,
    math::EQUAL,
    math::LESS,
    math::LESS_OR_EQUAL,
    math::GREATER,
    math::GREATER_OR_EQUAL,
    math::AND,
    math::OR,
    math::NOT,
    math::WHERE,
    math::SQRT,
    math::RECIPROCAL,
    math::NEG,
    math::EXP,
    math::LOG,
    math::ERF,
    math::ABS,
    math::SIN,
    math::COS,
    math::RELU,
    math::SIGMOID,
    math::TANH,
    math::SOFTPLUS,
    math::ELU,
    math::HARD_SIGMOID,
    math::HARD_SWISH,
    math::LEAKY_RELU,
    math::GELU,
    math::CLIP,
    math::CAST,
    math::CAST_LIKE,
    math::IDENTITY,
    math::DROPOUT,
    math::FLOOR,
    math::CEIL,
    math::ROUND,
    math::SIGN,
    // nn (nn.rs)
    nn::MATMUL,
    nn::GEMM,
    nn::CONV,
    nn::MAX_POOL,
    nn::AVERAGE_POOL,
    nn::GLOBAL_AVERAGE_POOL,
    nn::GLOBAL_MAX_POOL,
    nn::BATCH_NORMALIZATION,
    nn::LAYER_NORMALIZATION,
    nn::SOFTMAX,
    nn::LOG_SOFTMAX,
    // reductions (reduce.rs)
    reduce::REDUCE_MEAN,
    reduce::REDUCE_SUM,
    reduce::REDUCE_MAX,
    reduce::REDUCE_MIN,
    reduce::ARG_MAX,
    // shapes and movement (shape.rs)
    shape::CONSTANT,
    shape::SHAPE,
    shape::CONSTANT_OF_SHAPE,
    shape::RESHAPE,
    shape::FLATTEN,
    shape::TRANSPOSE,
    shape::SQUEEZE,
    shape::UNSQUEEZE,
    shape::CONCAT,
    shape::SPLIT,
    index::SLICE,
    index::GATHER,
    index::GATHER_ND,
    shape::EXPAND,
    shape::TILE,
    shape::RANGE,
    // recurrent (rnn.rs)
    rnn::LSTM,
    rnn::GRU,
];

/// The operator named `op_type`, if wgtorch runs it.
pub(crate) fn find(op_type: &str) -> Option<&'static OpDef> {
    OPS.iter().find(|d| d.name == op_type)
}

/// A node as an operator sees it: attributes, the model's opset, and the integer values of its
/// host inputs where they are known.
pub(crate) struct Ctx<'a> {
    pub node: &'a Node,
    pub host: Vec<Option<Vec<i64>>>,
}

impl Ctx<'_> {
    /// An error naming this node.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::msg(format!(
            "ONNX {} node '{}': {msg}",
            self.node.op_type, self.node.name
        ))
    }
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attrs.iter().find(|a| a.name() == name)
    }
    fn typed(&self, name: &str, want: AttributeType) -> Result<Option<&AttributeProto>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type() == want => Ok(Some(a)),
            Some(a) => Err(self.err(format!(
                "attribute '{name}' is {}, expected {}",
                a.r#type().as_str_name(),
                want.as_str_name()
            ))),
        }
    }
    /// An INT attribute, or `default`.
    pub fn i(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self
            .typed(name, AttributeType::Int)?
            .map_or(default, |a| a.i()))
    }
    /// A FLOAT attribute, or `default`.
    pub fn f(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self
            .typed(name, AttributeType::Float)?
            .map_or(default, |a| a.f()))
    }
    /// A STRING attribute, or `default`.
    pub fn s(&self, name: &str, default: &str) -> Result<String> {
        Ok(self
            .typed(name, AttributeType::String)?
            .map_or(default.to_string(), |a| {
                String::from_utf8_lossy(a.s()).into_owned()
            }))
    }
    /// An INTS attribute, if present.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self
            .typed(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }
    /// A FLOATS attribute, if present.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self
            .typed(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }
    /// A STRINGS attribute, if present.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>> {
        Ok(self.typed(name, AttributeType::Strings)?.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }))
    }
    /// A TENSOR attribute, if present.
    pub fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        self.typed(name, AttributeType::Tensor)?
            .map(|a| {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| self.err(format!("attribute '{name}' has no tensor")))?;
                super::tensor::from_proto(t, super::tensor::ExternalData::Refused)
                    .map_err(|e| self.err(e))
            })
            .transpose()
    }
    /// Host input `i` as integers at run time (`None` when the input is omitted).
    pub fn host(&self, i: usize) -> Result<Option<&[i64]>> {
        match self.known(i) {
            Known::Absent => Ok(None),
            Known::Value(v) => Ok(Some(v)),
            Known::Unknown => Err(self.err(format!("input {i} must be known on the host"))),
        }
    }
    /// Host input `i` as load-time inference sees it.
    pub fn known(&self, i: usize) -> Known<'_> {
        if !self.has_input(i) {
            return Known::Absent;
        }
        match self.host.get(i).and_then(Option::as_deref) {
            Some(v) => Known::Value(v),
            None => Known::Unknown,
        }
    }
    /// True when input `i` is given (not omitted with an empty name).
    pub fn has_input(&self, i: usize) -> bool {
        self.node.inputs.get(i).is_some_and(Option::is_some)
    }
    /// An axis attribute or value in `[-rank, rank)`, normalised.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        if axis < -r || axis >= r {
            return Err(self.err(format!("axis {axis} is out of range for rank {rank}")));
        }
        Ok((if axis < 0 { axis + r } else { axis }) as usize)
    }
}

/// A host input at load: omitted, known only at run time, or known.
pub(crate) enum Known<'a> {
    Absent,
    Unknown,
    Value(&'a [i64]),
}

/// The one input an op needs at `i`, or an error naming it.
pub(crate) fn need<'t, T>(ctx: &Ctx, xs: &'t [Option<T>], i: usize) -> Result<&'t T> {
    xs.get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| ctx.err(format!("input {i} is required")))
}

/// Shapes broadcast as numpy's, with unknown dims.
pub(crate) fn broadcast(ctx: &Ctx, shapes: &[&Option<Vec<Dim>>]) -> Result<Option<Vec<Dim>>> {
    let mut out: Vec<Dim> = Vec::new();
    for s in shapes {
        let Some(s) = s else { return Ok(None) };
        if s.len() > out.len() {
            let mut grown = vec![Some(1); s.len() - out.len()];
            grown.extend(out);
            out = grown;
        }
        let off = out.len() - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            *o = match (*o, d) {
                (Some(a), Some(b)) if a == b || b == 1 => Some(a),
                (Some(1), b) => b,
                (Some(a), Some(b)) => {
                    return Err(ctx.err(format!(
                        "shapes {} cannot be broadcast together (dimension {a} vs {b})",
                        shapes
                            .iter()
                            .map(|s| show(s))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    )))
                }
                (None, Some(b)) if b != 1 => Some(b),
                (a, _) => a,
            };
        }
    }
    Ok(Some(out))
}

/// The dtype every input must share (ONNX's type constraint `T` for most ops).
pub(crate) fn same_dtype(ctx: &Ctx, xs: &[Option<&Info>]) -> Result<DType> {
    let mut it = xs.iter().flatten();
    let first = it.next().ok_or_else(|| ctx.err("no inputs"))?.dtype;
    for x in it {
        if x.dtype != first {
            return Err(ctx.err(format!(
                "inputs must have one element type, got {first} and {}",
                x.dtype
            )));
        }
    }
    Ok(first)
}

/// Requires a floating-point input.
pub(crate) fn float_input(ctx: &Ctx, x: &Info) -> Result<()> {
    if x.dtype.is_float() {
        Ok(())
    } else {
        Err(ctx.err(format!("expects a floating-point input, got {}", x.dtype)))
    }
}

/// Requires a known rank in `ranks`.
pub(crate) fn rank_in(ctx: &Ctx, x: &Info, what: &str, ranks: &[usize]) -> Result<Option<usize>> {
    match x.rank() {
        Some(r) if !ranks.contains(&r) => Err(ctx.err(format!(
            "{what} must have rank {}, got shape {}",
            ranks
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
            show(&x.shape)
        ))),
        r => Ok(r),
    }
}
