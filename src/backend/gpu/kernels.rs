//! Every GPU kernel variant: its cache key and its WGSL, built from the templates in `shaders/`.
//! One template per kernel family; the element type is a template parameter, never a copy.

use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

const PRELUDE: &str = include_str!("../../../shaders/prelude.wgsl");
const UNARY: &str = include_str!("../../../shaders/unary.wgsl");
const BINARY: &str = include_str!("../../../shaders/binary.wgsl");
const WHERE: &str = include_str!("../../../shaders/where.wgsl");
const COPY: &str = include_str!("../../../shaders/copy.wgsl");
const FILL: &str = include_str!("../../../shaders/fill.wgsl");
const REDUCE: &str = include_str!("../../../shaders/reduce.wgsl");
const REDUCE_SMALL: &str = include_str!("../../../shaders/reduce_small.wgsl");
const CUMSUM: &str = include_str!("../../../shaders/cumsum.wgsl");
const MATMUL: &str = include_str!("../../../shaders/matmul.wgsl");
const MATMUL_DIRECT: &str = include_str!("../../../shaders/matmul_direct.wgsl");
const GATHER: &str = include_str!("../../../shaders/index.wgsl");
const SCATTER_ADD: &str = include_str!("../../../shaders/scatter_add.wgsl");
const IM2COL: &str = include_str!("../../../shaders/im2col.wgsl");
const COL2IM: &str = include_str!("../../../shaders/col2im.wgsl");

/// The WGSL element type a dtype is stored as on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuType {
    F32,
    I32,
    /// bool, one u32 per element.
    U32,
}

impl GpuType {
    /// The storage type of `dtype`, if the GPU holds it.
    pub fn of(dtype: DType) -> Option<GpuType> {
        match dtype {
            DType::F32 => Some(GpuType::F32),
            DType::I32 => Some(GpuType::I32),
            DType::Bool => Some(GpuType::U32),
            _ => None,
        }
    }
    /// WGSL spelling.
    pub fn wgsl(self) -> &'static str {
        match self {
            GpuType::F32 => "f32",
            GpuType::I32 => "i32",
            GpuType::U32 => "u32",
        }
    }
    const ALL: [GpuType; 3] = [GpuType::F32, GpuType::I32, GpuType::U32];
}

/// One compiled kernel variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    Unary(UnaryOp),
    Binary(BinaryOp, GpuType),
    Where(GpuType),
    Copy(GpuType, GpuType),
    Fill(GpuType),
    Reduce(ReduceOp, GpuType),
    /// One invocation per row, for short rows.
    ReduceSmall(ReduceOp, GpuType),
    Cumsum(GpuType),
    Matmul,
    /// Register-blocked matmul without workgroup memory (CPU adapters).
    MatmulDirect,
    Gather(GpuType),
    ScatterAdd(GpuType),
    Im2col(GpuType),
    Col2im(GpuType),
}

fn fill(template: &str, subs: &[(&str, &str)]) -> String {
    let mut s = String::with_capacity(PRELUDE.len() + template.len() + 64);
    s.push_str(PRELUDE);
    s.push('\n');
    let mut body = template.to_string();
    for (k, v) in subs {
        body = body.replace(&format!("{{{{{k}}}}}"), v);
    }
    s.push_str(&body);
    s
}

fn reduce_parts(
    op: ReduceOp,
    t: GpuType,
) -> (&'static str, &'static str, &'static str, &'static str) {
    // (INIT, MERGE, OUT type, STORE)
    let lowest = match t {
        GpuType::F32 => "bitcast<f32>(0xff800000u)",
        GpuType::I32 => "-2147483647 - 1",
        GpuType::U32 => "0u",
    };
    let highest = match t {
        GpuType::F32 => "bitcast<f32>(0x7f800000u)",
        GpuType::I32 => "2147483647",
        GpuType::U32 => "1u",
    };
    let out = match t {
        GpuType::F32 => "f32",
        GpuType::I32 => "i32",
        GpuType::U32 => "u32",
    };
    match op {
        ReduceOp::Sum => (zero(t), "return Pair(a + b, 0u);", out, "p.v"),
        ReduceOp::Prod => (one(t), "return Pair(a * b, 0u);", out, "p.v"),
        ReduceOp::Max => (lowest, "return Pair(max(a, b), 0u);", out, "p.v"),
        ReduceOp::Min => (highest, "return Pair(min(a, b), 0u);", out, "p.v"),
        ReduceOp::ArgMax => (
            lowest,
            "if (ib != NONE && (ia == NONE || b > a || (b == a && ib < ia))) { return Pair(b, ib); }\n    return Pair(a, ia);",
            "i32",
            "i32(p.i)",
        ),
        ReduceOp::ArgMin => (
            highest,
            "if (ib != NONE && (ia == NONE || b < a || (b == a && ib < ia))) { return Pair(b, ib); }\n    return Pair(a, ia);",
            "i32",
            "i32(p.i)",
        ),
    }
}

fn zero(t: GpuType) -> &'static str {
    match t {
        GpuType::F32 => "0.0",
        GpuType::I32 => "0i",
        GpuType::U32 => "0u",
    }
}
fn one(t: GpuType) -> &'static str {
    match t {
        GpuType::F32 => "1.0",
        GpuType::I32 => "1i",
        GpuType::U32 => "1u",
    }
}

fn convert(from: GpuType, to: GpuType) -> String {
    match (from, to) {
        (a, b) if a == b => "x".into(),
        (_, GpuType::U32) => format!("select(0u, 1u, x != {})", zero(from)),
        (GpuType::U32, t) => format!("select({}, {}, x != 0u)", zero(t), one(t)),
        (_, t) => format!("{}(x)", t.wgsl()),
    }
}

impl Kernel {
    /// Cache key and pipeline label, e.g. `unary_exp_f32`, `binary_add_i32`.
    pub fn key(&self) -> String {
        match self {
            Kernel::Unary(op) => format!("unary_{}_f32", op.name()),
            Kernel::Binary(op, t) => format!("binary_{}_{}", op.name(), t.wgsl()),
            Kernel::Where(t) => format!("where_{}", t.wgsl()),
            Kernel::Copy(a, b) => format!("copy_{}_{}", a.wgsl(), b.wgsl()),
            Kernel::Fill(t) => format!("fill_{}", t.wgsl()),
            Kernel::Reduce(op, t) => format!("reduce_{}_{}", op.name(), t.wgsl()),
            Kernel::ReduceSmall(op, t) => format!("reduce_small_{}_{}", op.name(), t.wgsl()),
            Kernel::Cumsum(t) => format!("cumsum_{}", t.wgsl()),
            Kernel::Matmul => "matmul_f32_tile64".into(),
            Kernel::MatmulDirect => "matmul_f32_direct4x4".into(),
            Kernel::Gather(t) => format!("gather_{}", t.wgsl()),
            Kernel::ScatterAdd(t) => format!("scatter_add_{}", t.wgsl()),
            Kernel::Im2col(t) => format!("im2col_{}", t.wgsl()),
            Kernel::Col2im(t) => format!("col2im_{}", t.wgsl()),
        }
    }

    /// The full WGSL source.
    pub fn source(&self) -> String {
        match *self {
            Kernel::Unary(op) => fill(UNARY, &[("EXPR", op.wgsl())]),
            Kernel::Binary(op, t) => {
                let out = if op.is_comparison() { "u32" } else { t.wgsl() };
                fill(
                    BINARY,
                    &[("T", t.wgsl()), ("OUT", out), ("EXPR", op.wgsl())],
                )
            }
            Kernel::Where(t) => fill(WHERE, &[("T", t.wgsl())]),
            Kernel::Copy(a, b) => fill(
                COPY,
                &[
                    ("T", a.wgsl()),
                    ("OUT", b.wgsl()),
                    ("CONVERT", &convert(a, b)),
                ],
            ),
            Kernel::Fill(t) => fill(FILL, &[("T", t.wgsl())]),
            Kernel::Reduce(op, t) | Kernel::ReduceSmall(op, t) => {
                let template = if matches!(self, Kernel::Reduce(..)) {
                    REDUCE
                } else {
                    REDUCE_SMALL
                };
                let (init, merge, out, store) = reduce_parts(op, t);
                fill(
                    template,
                    &[
                        ("T", t.wgsl()),
                        ("OUT", out),
                        ("INIT", init),
                        ("MERGE", merge),
                        ("STORE", store),
                    ],
                )
            }
            Kernel::Cumsum(t) => fill(CUMSUM, &[("T", t.wgsl())]),
            Kernel::Matmul => fill(MATMUL, &[("T", "f32")]),
            Kernel::MatmulDirect => fill(MATMUL_DIRECT, &[("T", "f32")]),
            Kernel::Gather(t) => fill(GATHER, &[("T", t.wgsl())]),
            Kernel::ScatterAdd(t) => fill(SCATTER_ADD, &[("T", t.wgsl())]),
            Kernel::Im2col(t) => fill(IM2COL, &[("T", t.wgsl())]),
            Kernel::Col2im(t) => fill(COL2IM, &[("T", t.wgsl())]),
        }
    }

    /// Every variant the engine can ask for (validated with naga in the tests).
    pub fn all() -> Vec<Kernel> {
        use UnaryOp::*;
        let mut v: Vec<Kernel> = [
            Neg,
            Abs,
            Exp,
            Log,
            Sqrt,
            Rsqrt,
            Sin,
            Cos,
            Tanh,
            Sigmoid,
            Relu,
            Gelu,
            GeluTanh,
            Silu,
            Elu(1.0),
            LeakyRelu(0.1),
            Softplus(1.0, 20.0),
            Square,
            Reciprocal,
            Clamp(0.0, 1.0),
            Erf,
            PowScalar(2.0),
            AddScalar(1.0),
            MulScalar(1.0),
            Step,
            Sign,
        ]
        .into_iter()
        .map(Kernel::Unary)
        .collect();
        use BinaryOp as B;
        for t in [GpuType::F32, GpuType::I32] {
            for op in [
                B::Add,
                B::Sub,
                B::Mul,
                B::Maximum,
                B::Minimum,
                B::Eq,
                B::Ne,
                B::Lt,
                B::Le,
                B::Gt,
                B::Ge,
            ] {
                v.push(Kernel::Binary(op, t));
            }
            v.push(Kernel::Cumsum(t));
        }
        v.push(Kernel::Binary(B::Div, GpuType::F32));
        v.push(Kernel::Binary(B::Pow, GpuType::F32));
        for op in [B::Eq, B::Ne, B::LogicalAnd, B::LogicalOr] {
            v.push(Kernel::Binary(op, GpuType::U32));
        }
        for t in GpuType::ALL {
            v.push(Kernel::Where(t));
            v.push(Kernel::Fill(t));
            v.push(Kernel::Gather(t));
            v.push(Kernel::Im2col(t));
            for u in GpuType::ALL {
                v.push(Kernel::Copy(t, u));
            }
        }
        for t in [GpuType::F32, GpuType::I32] {
            for op in [
                ReduceOp::Sum,
                ReduceOp::Prod,
                ReduceOp::Max,
                ReduceOp::Min,
                ReduceOp::ArgMax,
                ReduceOp::ArgMin,
            ] {
                v.push(Kernel::Reduce(op, t));
                v.push(Kernel::ReduceSmall(op, t));
            }
            v.push(Kernel::ScatterAdd(t));
            v.push(Kernel::Col2im(t));
        }
        v.push(Kernel::Matmul);
        v.push(Kernel::MatmulDirect);
        v
    }
}
