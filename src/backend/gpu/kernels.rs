//! Every GPU kernel variant: its cache key and its WGSL, built from the templates in `shaders/`.
//! One template per kernel family; the element type is a template parameter, never a copy.
//!
//! Useful for reading what runs on the device, or for validating shaders offline (the tests
//! parse every variant of [`Kernel::all`] with naga).
//!
//! ```
//! use wgtorch::backend::gpu::kernels::{GpuType, Kernel};
//! use wgtorch::ops::UnaryOp;
//! let k = Kernel::Unary(UnaryOp::Exp, GpuType::F32);
//! assert!(k.key().contains("exp"));
//! assert!(k.source().contains("@compute"));
//! assert!(Kernel::all().len() > 100);
//! ```

mod fused_source;
mod gemm;
mod gpu_type;
mod shared_tile;
mod tile;

pub use fused_source::fused_source;
pub use gemm::Gemm;
pub use gpu_type::GpuType;
use shared_tile::TileFill;
pub use tile::Tile;

use super::params::ParamsDecl;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};

const PRELUDE: &str = include_str!("../../../shaders/prelude.wgsl");
const UNARY: &str = include_str!("../../../shaders/unary.wgsl");
const BINARY: &str = include_str!("../../../shaders/binary.wgsl");
const UNARY_VEC4: &str = include_str!("../../../shaders/unary_vec4.wgsl");
const BINARY_VEC4: &str = include_str!("../../../shaders/binary_vec4.wgsl");
const WHERE: &str = include_str!("../../../shaders/where.wgsl");
const FUSED: &str = include_str!("../../../shaders/fused.wgsl");
const COPY: &str = include_str!("../../../shaders/copy.wgsl");
const FILL: &str = include_str!("../../../shaders/fill.wgsl");
const REDUCE: &str = include_str!("../../../shaders/reduce.wgsl");
const REDUCE_SMALL: &str = include_str!("../../../shaders/reduce_small.wgsl");
const REDUCE_SUBGROUP: &str = include_str!("../../../shaders/reduce_subgroup.wgsl");
const REDUCE_PAIR: &str = include_str!("../../../shaders/reduce_pair.wgsl");
const REDUCE_CHUNK: &str = include_str!("../../../shaders/reduce_chunk.wgsl");
const CUMSUM: &str = include_str!("../../../shaders/cumsum.wgsl");
const SOFTMAX_ROWS: &str = include_str!("../../../shaders/softmax_rows.wgsl");
const SOFTMAX_BACKWARD_ROWS: &str = include_str!("../../../shaders/softmax_backward_rows.wgsl");
const NLL_ROWS: &str = include_str!("../../../shaders/nll_rows.wgsl");
const NLL_ROWS_BACKWARD: &str = include_str!("../../../shaders/nll_rows_backward.wgsl");
const MATMUL: &str = include_str!("../../../shaders/matmul.wgsl");
const MATMUL_DIRECT: &str = include_str!("../../../shaders/matmul_direct.wgsl");
const MATMUL_VEC4: &str = include_str!("../../../shaders/matmul_vec4.wgsl");
/// Operands of the shared-memory GEMM body for aligned f32 layouts read as vec4 (`MatmulVec4`
/// in a shared tile).
const VEC4_OPERANDS: &str = "@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
fn ld_c(i: u32) -> f32 {
    return c[i];
}
fn st_c(i: u32, v: f32) {
    c[i] = v;
}
fn c_index(bi: u32, r: u32, col: u32) -> u32 {
    return (bi * params.m + r) * params.n + col;
}
fn epilogue(r: u32, col: u32, v: f32) -> f32 {
    return v;
}
fn finish(i: u32, v: f32) -> f32 {
    return v;
}
";
const GATHER: &str = include_str!("../../../shaders/index.wgsl");
const SCATTER_ADD: &str = include_str!("../../../shaders/scatter_add.wgsl");
const SCATTER_ADD_SORTED: &str = include_str!("../../../shaders/scatter_add_sorted.wgsl");
const INDEX_CHECK: &str = include_str!("../../../shaders/index_check.wgsl");
const IM2COL: &str = include_str!("../../../shaders/im2col.wgsl");
const COL2IM: &str = include_str!("../../../shaders/col2im.wgsl");
const ADAM: &str = include_str!("../../../shaders/adam.wgsl");
const SGD: &str = include_str!("../../../shaders/sgd.wgsl");
/// `sgd.wgsl`'s momentum step, on the buffer `buf`.
const SGD_MOMENTUM: &str = "    var b = d;
    if (params.first == 0u) {
        b = buf[i] * params.momentum + d * params.undamped;
    }
    buf[i] = b;
    if (params.nesterov != 0u) {
        d = d + b * params.momentum;
    } else {
        d = b;
    }";
const MAXPOOL: &str = include_str!("../../../shaders/maxpool.wgsl");
const MAXPOOL_BACKWARD: &str = include_str!("../../../shaders/maxpool_backward.wgsl");
const MAXPOOL_BACKWARD_TILES: &str = include_str!("../../../shaders/maxpool_backward_tiles.wgsl");
const SORT_KEYS: &str = include_str!("../../../shaders/sort_keys.wgsl");
const SORT_STEP: &str = include_str!("../../../shaders/sort_step.wgsl");
const SORT_LOCAL: &str = include_str!("../../../shaders/sort_local.wgsl");
const SORT_INDICES: &str = include_str!("../../../shaders/sort_indices.wgsl");

/// One compiled kernel variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    /// A unary elementwise op over strided input.
    Unary(UnaryOp, GpuType),
    /// A binary elementwise op over broadcast, strided inputs.
    Binary(BinaryOp, GpuType),
    /// Contiguous f32 unary op, four elements per invocation.
    UnaryVec4(UnaryOp),
    /// Contiguous f32 binary op, four elements per invocation.
    BinaryVec4(BinaryOp),
    /// `torch.where(cond, a, b)`.
    Where(GpuType),
    /// Strided copy with a dtype conversion (source type, destination type).
    Copy(GpuType, GpuType),
    /// Fill with one value.
    Fill(GpuType),
    /// A reduction over the last axis, one workgroup per row.
    Reduce(ReduceOp, GpuType),
    /// One invocation per row, for short rows.
    ReduceSmall(ReduceOp, GpuType),
    /// [`Kernel::Reduce`] with subgroup operations (adapters with `SUBGROUP`).
    ReduceSubgroup(ReduceOp, GpuType),
    /// Inclusive prefix sum over the last axis.
    Cumsum(GpuType),
    /// f32 softmax (log-softmax when `log`) over the last axis, one invocation per row.
    SoftmaxRows {
        /// Log-softmax.
        log: bool,
    },
    /// The input gradient of [`Kernel::SoftmaxRows`] from its output and the output gradient.
    SoftmaxBackwardRows {
        /// Of log-softmax.
        log: bool,
    },
    /// nll_loss's term and weight of each row of f32 log-probabilities, targets checked.
    NllRows,
    /// The gradient of [`Kernel::NllRows`]'s loss with respect to the log-probabilities.
    NllRowsBackward,
    /// A GEMM over the given operands in the given tile: register-blocked without workgroup
    /// memory (a register tile, CPU adapters) or through workgroup memory (a shared tile, real
    /// GPUs).
    Matmul(GpuType, Gemm, Tile),
    /// f32 matmul reading both operands as aligned `vec4`; the flags say A / B are stored
    /// transposed (column-major). In a register tile, 4x4 blocks multiplied as `mat4x4`; in a
    /// shared tile, the shared-memory GEMM with its tiles filled by vec4 loads.
    MatmulVec4 {
        /// A is stored transposed.
        a_t: bool,
        /// B is stored transposed.
        b_t: bool,
        /// The register block and workgroup.
        tile: Tile,
    },
    /// Gather along a dim with bounds-checked indices.
    Gather(GpuType),
    /// Scatter-add along a dim with bounds-checked indices.
    ScatterAdd(GpuType),
    /// Scatter-add of an index broadcast off its dim, through the index's stable sort.
    ScatterAddSorted(GpuType),
    /// Unfold `[N, C, H, W]` into convolution columns.
    Im2col(GpuType),
    /// Fold columns back, summing overlaps (im2col's adjoint).
    Col2im(GpuType),
    /// Fused Adam/AdamW update, in place (f32).
    AdamF32,
    /// Fused SGD update, in place (f32), with or without a momentum buffer.
    SgdF32 {
        /// Whether the kernel reads and writes a momentum buffer.
        momentum: bool,
    },
    /// Max pooling: values and argmax indices.
    MaxPool(GpuType),
    /// Max pooling's gradient from the argmax indices.
    MaxPoolBackward(GpuType),
    /// Max pooling's gradient when the windows tile the planes: one invocation per window.
    MaxPoolBackwardTiles(GpuType),
    /// Row sort (bitonic, `sort.rs`): (key, index) pairs of the padded rows.
    SortKeys,
    /// Row sort: one compare-exchange step.
    SortStep,
    /// Row sort: the steps within 512-entry blocks, in workgroup memory.
    SortLocal,
    /// Row sort: the sorted indices, as int32.
    SortIndices,
}

fn fill(template: &str, bindings: &[(&str, GpuType, bool)], subs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    if bindings.iter().any(|b| b.1.native_f16()) {
        s.push_str("enable f16;\n");
    }
    s.push_str(PRELUDE);
    s.push('\n');
    let decls: String = bindings
        .iter()
        .enumerate()
        .map(|(i, (n, t, w))| t.decl(i as u32 + 1, n, *w))
        .collect();
    let mut body = template.replace("{{DECLS}}", &decls);
    for (k, v) in subs {
        body = body.replace(&format!("{{{{{k}}}}}"), v);
    }
    s.push_str(&body);
    s
}

/// The index-check flag and `index_ok` (`shaders/index_check.wgsl`), bound after `bindings`
/// tensor bindings (`checks.rs`).
fn index_check(bindings: u32) -> String {
    INDEX_CHECK.replace("{{BINDING}}", &(bindings + 1).to_string())
}

/// (INIT, MERGE, STORE) of a reduction; the output type follows from the op (i32 for arg ops).
fn reduce_parts(op: ReduceOp, t: GpuType) -> (&'static str, &'static str, &'static str) {
    let (lowest, highest) = match t.compute() {
        "i32" => ("-2147483647 - 1", "2147483647"),
        "u32" => ("0u", "1u"),
        _ => ("-inf_f32()", "inf_f32()"),
    };
    let float = t.compute() == "f32";
    const ARG_MAX: &str = "if (ib != NONE && (ia == NONE || b > a || (b == a && ib < ia))) { return Pair(b, ib); }\n    return Pair(a, ia);";
    const ARG_MIN: &str = "if (ib != NONE && (ia == NONE || b < a || (b == a && ib < ia))) { return Pair(b, ib); }\n    return Pair(a, ia);";
    // Floats: NaN beats every number and the first NaN wins, as in PyTorch (tested on the bits,
    // as compilers may fold `x != x`).
    const ARG_MAX_F: &str = "let na = is_nan_f(a);\n    let nb = is_nan_f(b);\n    if (ib != NONE && (ia == NONE || (nb && (!na || ib < ia)) || (!na && !nb && (b > a || (b == a && ib < ia))))) { return Pair(b, ib); }\n    return Pair(a, ia);";
    const ARG_MIN_F: &str = "let na = is_nan_f(a);\n    let nb = is_nan_f(b);\n    if (ib != NONE && (ia == NONE || (nb && (!na || ib < ia)) || (!na && !nb && (b < a || (b == a && ib < ia))))) { return Pair(b, ib); }\n    return Pair(a, ia);";
    match op {
        ReduceOp::Sum => (zero(t), "return Pair(a + b, 0u);", "p.v"),
        ReduceOp::Prod => (one(t), "return Pair(a * b, 0u);", "p.v"),
        ReduceOp::Max if float => (lowest, "return Pair(max_nan(a, b), 0u);", "p.v"),
        ReduceOp::Min if float => (highest, "return Pair(min_nan(a, b), 0u);", "p.v"),
        ReduceOp::Max => (lowest, "return Pair(max(a, b), 0u);", "p.v"),
        ReduceOp::Min => (highest, "return Pair(min(a, b), 0u);", "p.v"),
        ReduceOp::ArgMax if float => (lowest, ARG_MAX_F, "i32(p.i)"),
        ReduceOp::ArgMin if float => (highest, ARG_MIN_F, "i32(p.i)"),
        ReduceOp::ArgMax => (lowest, ARG_MAX, "i32(p.i)"),
        ReduceOp::ArgMin => (highest, ARG_MIN, "i32(p.i)"),
    }
}

fn zero(t: GpuType) -> &'static str {
    match t.compute() {
        "i32" => "0i",
        "u32" => "0u",
        _ => "0.0",
    }
}
fn one(t: GpuType) -> &'static str {
    match t.compute() {
        "i32" => "1i",
        "u32" => "1u",
        _ => "1.0",
    }
}

fn convert(from: GpuType, to: GpuType) -> String {
    match (from.compute(), to.compute()) {
        (a, b) if a == b => "x".into(),
        // A float is true unless ±0, tested on the bits: NaN is true (`x != 0.0` is ordered in
        // SPIR-V, so false), and a subnormal stays true where the driver flushes it.
        ("f32", "u32") => "select(0u, 1u, (bitcast<u32>(x) & 0x7fffffffu) != 0u)".into(),
        (_, "u32") => format!("select(0u, 1u, x != {})", zero(from)),
        // As the CPU's `as`: NaN is 0, out-of-range values saturate (naga clamps to the largest
        // f32 below 2^31, 2147483520).
        ("f32", "i32") => {
            "select(select(i32(x), 2147483647i, x >= 2147483648.0), 0i, is_nan_f(x))".into()
        }
        ("u32", _) => format!("select({}, {}, x != 0u)", zero(to), one(to)),
        (_, c) => format!("{c}(x)"),
    }
}

/// `nn`, `nt`, `tn`, `tt`: whether A / B are stored transposed.
fn layouts(a_t: bool, b_t: bool) -> String {
    let l = |t: bool| if t { 't' } else { 'n' };
    format!("{}{}", l(a_t), l(b_t))
}

/// A tile's part of a kernel key: `4x8_8x8` for rows x cols, workgroup.
pub(super) fn tile_key(t: &Tile) -> String {
    t.to_string().replace('/', "_")
}

impl Kernel {
    /// Cache key and pipeline label, e.g. `unary_exp_f32`, `binary_add_f16packed`.
    pub fn key(&self) -> String {
        match self {
            Kernel::Unary(op, t) => format!("unary_{}_{}", op.name(), t.key()),
            Kernel::Binary(op, t) => format!("binary_{}_{}", op.name(), t.key()),
            Kernel::UnaryVec4(op) => format!("unary_{}_f32x4", op.name()),
            Kernel::BinaryVec4(op) => format!("binary_{}_f32x4", op.name()),
            Kernel::Where(t) => format!("where_{}", t.key()),
            Kernel::Copy(a, b) => format!("copy_{}_{}", a.key(), b.key()),
            Kernel::Fill(t) => format!("fill_{}", t.key()),
            Kernel::Reduce(op, t) => format!("reduce_{}_{}", op.name(), t.key()),
            Kernel::ReduceSmall(op, t) => format!("reduce_small_{}_{}", op.name(), t.key()),
            Kernel::ReduceSubgroup(op, t) => format!("reduce_sg_{}_{}", op.name(), t.key()),
            Kernel::Cumsum(t) => format!("cumsum_{}", t.key()),
            Kernel::SoftmaxRows { log } => {
                format!("{}softmax_rows_f32", if *log { "log_" } else { "" })
            }
            Kernel::SoftmaxBackwardRows { log } => {
                format!(
                    "{}softmax_backward_rows_f32",
                    if *log { "log_" } else { "" }
                )
            }
            Kernel::NllRows => "nll_rows_f32".into(),
            Kernel::NllRowsBackward => "nll_rows_backward_f32".into(),
            Kernel::Matmul(t, op, tile) => {
                let kind = if tile.is_shared() { "tiled" } else { "direct" };
                format!("{}_{}_{kind}_{}", op.key(), t.key(), tile_key(tile))
            }
            Kernel::MatmulVec4 { a_t, b_t, tile } => {
                let kind = if tile.is_shared() {
                    "tiled_vec4"
                } else {
                    "vec4"
                };
                let l = layouts(*a_t, *b_t);
                format!("matmul_{l}_f32_{kind}_{}", tile_key(tile))
            }
            Kernel::Gather(t) => format!("gather_{}", t.key()),
            Kernel::ScatterAdd(t) => format!("scatter_add_{}", t.key()),
            Kernel::ScatterAddSorted(t) => format!("scatter_add_sorted_{}", t.key()),
            Kernel::Im2col(t) => format!("im2col_{}", t.key()),
            Kernel::Col2im(t) => format!("col2im_{}", t.key()),
            Kernel::AdamF32 => "adam_f32".into(),
            Kernel::SgdF32 { momentum } => {
                format!("sgd_f32_{}", ["plain", "momentum"][*momentum as usize])
            }
            Kernel::MaxPool(t) => format!("max_pool2d_{}", t.key()),
            Kernel::MaxPoolBackward(t) => format!("max_pool2d_backward_{}", t.key()),
            Kernel::MaxPoolBackwardTiles(t) => format!("max_pool2d_backward_tiles_{}", t.key()),
            Kernel::SortKeys => "sort_keys".into(),
            Kernel::SortStep => "sort_step".into(),
            Kernel::SortLocal => "sort_local".into(),
            Kernel::SortIndices => "sort_indices".into(),
        }
    }

    /// The full WGSL source.
    pub fn source(&self) -> String {
        self.body().replace("{{PARAMS}}", &self.params().wgsl())
    }

    /// The parameter block this kernel reads (`params.rs`): its WGSL declares that struct, and
    /// a launch with another is refused.
    pub(crate) fn params(&self) -> ParamsDecl {
        use super::params::*;
        fn of<P: KernelParams>() -> ParamsDecl {
            ParamsDecl::of::<P>()
        }
        match self {
            Kernel::Unary(..) => of::<UnaryParams>(),
            Kernel::UnaryVec4(_) => of::<UnaryVec4Params>(),
            Kernel::Binary(..) => of::<BinaryParams>(),
            Kernel::BinaryVec4(_) => of::<BinaryVec4Params>(),
            Kernel::Where(_) => of::<WhereParams>(),
            Kernel::Copy(..) => of::<CopyParams>(),
            Kernel::Fill(_) => of::<FillParams>(),
            Kernel::Reduce(..) | Kernel::ReduceSubgroup(..) => of::<ReduceParams>(),
            Kernel::ReduceSmall(..)
            | Kernel::SoftmaxRows { .. }
            | Kernel::SoftmaxBackwardRows { .. } => of::<ReduceSmallParams>(),
            Kernel::Cumsum(_) => of::<CumsumParams>(),
            Kernel::NllRows | Kernel::NllRowsBackward => of::<NllRowsParams>(),
            Kernel::Matmul(_, Gemm::Strided, _) | Kernel::MatmulVec4 { .. } => of::<MatmulParams>(),
            Kernel::Matmul(..) => of::<ConvGemmParams>(),
            Kernel::Gather(_) => of::<GatherParams>(),
            Kernel::ScatterAdd(_) => of::<ScatterAddParams>(),
            Kernel::ScatterAddSorted(_) => of::<ScatterAddSortedParams>(),
            Kernel::Im2col(_)
            | Kernel::Col2im(_)
            | Kernel::MaxPool(_)
            | Kernel::MaxPoolBackward(_)
            | Kernel::MaxPoolBackwardTiles(_) => of::<WindowParams>(),
            Kernel::AdamF32 => of::<AdamParams>(),
            Kernel::SgdF32 { .. } => of::<SgdParams>(),
            Kernel::SortKeys => of::<SortKeysParams>(),
            Kernel::SortStep => of::<SortStepParams>(),
            Kernel::SortLocal => of::<SortLocalParams>(),
            Kernel::SortIndices => of::<SortIndicesParams>(),
        }
    }

    /// The WGSL without the parameter struct's declaration.
    fn body(&self) -> String {
        use GpuType::{I32, U32};
        match *self {
            Kernel::Unary(op, t) => fill(
                UNARY,
                &[("src", t, false), ("dst", t, true)],
                &[("EXPR", op.wgsl())],
            ),
            Kernel::UnaryVec4(op) => fill(UNARY_VEC4, &[], &[("EXPR", op.wgsl())]),
            Kernel::BinaryVec4(op) => {
                let out = if op.is_comparison() { "u32" } else { "f32" };
                let expr = op.wgsl_f32();
                fill(BINARY_VEC4, &[], &[("OUT", out), ("EXPR", expr)])
            }
            Kernel::Binary(op, t) => {
                let out = if op.is_comparison() { U32 } else { t };
                // Floats handle NaN on the bits; integer division ops check their divisor (the
                // index-check words are `params.check`).
                let expr = match (op, t.compute()) {
                    (_, "f32") => op.wgsl_f32(),
                    (BinaryOp::Remainder, "i32") => "remainder_i(a, checked_divisor(b))",
                    (BinaryOp::Fmod, "i32") => "fmod_i(a, checked_divisor(b))",
                    _ => op.wgsl(),
                };
                let check = if op.divides_integers() && t.compute() == "i32" {
                    index_check(3)
                } else {
                    String::new()
                };
                fill(
                    BINARY,
                    &[("lhs", t, false), ("rhs", t, false), ("dst", out, true)],
                    &[("C", t.compute()), ("EXPR", expr), ("INDEX_CHECK", &check)],
                )
            }
            Kernel::Where(t) => fill(
                WHERE,
                &[
                    ("cond", U32, false),
                    ("lhs", t, false),
                    ("rhs", t, false),
                    ("dst", t, true),
                ],
                &[],
            ),
            Kernel::Copy(a, b) => fill(
                COPY,
                &[("src", a, false), ("dst", b, true)],
                &[("CONVERT", &convert(a, b))],
            ),
            Kernel::Fill(t) => fill(FILL, &[("dst", t, true)], &[("C", t.compute())]),
            Kernel::Reduce(op, t) | Kernel::ReduceSmall(op, t) | Kernel::ReduceSubgroup(op, t) => {
                let template = match self {
                    Kernel::Reduce(..) => REDUCE,
                    Kernel::ReduceSmall(..) => REDUCE_SMALL,
                    _ => REDUCE_SUBGROUP,
                };
                let (init, merge, store) = reduce_parts(op, t);
                // ReduceOp::out_dtype: indices for arg ops; f32 sums and products of halves.
                let out = match op {
                    ReduceOp::ArgMax | ReduceOp::ArgMin => I32,
                    ReduceOp::Sum | ReduceOp::Prod if t.compute() == "f32" => GpuType::F32,
                    _ => t,
                };
                // Naga (wgpu 30) takes subgroup operations without `enable subgroups;` (which
                // it refuses) once the device has SUBGROUP; natively only, so no browser's
                // compiler, which would want the directive, sees this kernel.
                fill(
                    template,
                    &[("src", t, false), ("dst", out, true)],
                    &[
                        // First: the snippets have placeholders of their own.
                        ("PAIR", REDUCE_PAIR),
                        ("CHUNK", REDUCE_CHUNK),
                        ("C", t.compute()),
                        ("INIT", init),
                        ("MERGE", merge),
                        ("STORE", store),
                    ],
                )
            }
            Kernel::Cumsum(t) => fill(
                CUMSUM,
                &[("src", t, false), ("dst", t, true)],
                &[("C", t.compute())],
            ),
            Kernel::Matmul(t, op, tile) => match tile.is_shared() {
                true => op.source(t, &tile.shared_body(MATMUL, TileFill::Operands)),
                false => op.source(t, &tile.direct(MATMUL_DIRECT)),
            },
            Kernel::MatmulVec4 { a_t, b_t, tile } => match tile.is_shared() {
                true => {
                    let body = tile.shared_body(MATMUL, TileFill::Vec4 { a_t, b_t });
                    fill(&body.replace("{{OPERANDS}}", VEC4_OPERANDS), &[], &[])
                }
                false => fill(&tile.vec4(MATMUL_VEC4, a_t, b_t), &[], &[]),
            },
            Kernel::Gather(t) => fill(
                GATHER,
                &[("x", t, false), ("idx", I32, false), ("dst", t, true)],
                &[("C", t.compute()), ("INDEX_CHECK", &index_check(3))],
            ),
            Kernel::ScatterAdd(t) => fill(
                SCATTER_ADD,
                &[
                    ("base", t, false),
                    ("idx", I32, false),
                    ("src", t, false),
                    ("dst", t, true),
                ],
                &[("INDEX_CHECK", &index_check(4))],
            ),
            Kernel::ScatterAddSorted(t) => fill(
                SCATTER_ADD_SORTED,
                &[
                    ("base", t, false),
                    ("idx", I32, false),
                    ("perm", I32, false),
                    ("src", t, false),
                    ("dst", t, true),
                ],
                &[("INDEX_CHECK", &index_check(5))],
            ),
            Kernel::Im2col(t) => fill(
                IM2COL,
                &[("src", t, false), ("dst", t, true)],
                &[("C", t.compute())],
            ),
            Kernel::Col2im(t) => fill(
                COL2IM,
                &[("src", t, false), ("dst", t, true)],
                &[("C", t.compute())],
            ),
            Kernel::AdamF32 => fill(ADAM, &[], &[]),
            Kernel::SgdF32 { momentum } => {
                let mut b = vec![("p", GpuType::F32, true), ("g", GpuType::F32, false)];
                let step = if momentum {
                    b.push(("buf", GpuType::F32, true));
                    SGD_MOMENTUM
                } else {
                    ""
                };
                fill(SGD, &b, &[("MOMENTUM", step)])
            }
            Kernel::SoftmaxRows { log } => {
                let store = if log {
                    "let lse = log_f(s);\n    for (var j = 0u; j < n; j = j + 1u) {\n        st_dst(base + j, (ld_src(base + j) - m) - lse);\n    }"
                } else {
                    "for (var j = 0u; j < n; j = j + 1u) {\n        st_dst(base + j, exp_f(ld_src(base + j) - m) / s);\n    }"
                };
                fill(
                    SOFTMAX_ROWS,
                    &[("src", GpuType::F32, false), ("dst", GpuType::F32, true)],
                    &[("STORE", store)],
                )
            }
            Kernel::SoftmaxBackwardRows { log } => {
                let (term, grad) = if log {
                    (
                        "ld_g(base + j)",
                        "ld_g(base + j) - exp_f(ld_y(base + j)) * s",
                    )
                } else {
                    (
                        "ld_g(base + j) * ld_y(base + j)",
                        "ld_y(base + j) * (ld_g(base + j) - s)",
                    )
                };
                fill(
                    SOFTMAX_BACKWARD_ROWS,
                    &[
                        ("y", GpuType::F32, false),
                        ("g", GpuType::F32, false),
                        ("dst", GpuType::F32, true),
                    ],
                    &[("TERM", term), ("GRAD", grad)],
                )
            }
            Kernel::NllRows => fill(
                NLL_ROWS,
                &[
                    ("logp", GpuType::F32, false),
                    ("tgt", I32, false),
                    ("weight", GpuType::F32, false),
                    ("loss", GpuType::F32, true),
                    ("wt", GpuType::F32, true),
                    ("kept", I32, true),
                ],
                &[("INDEX_CHECK", &index_check(6))],
            ),
            Kernel::NllRowsBackward => fill(
                NLL_ROWS_BACKWARD,
                &[
                    ("kept", I32, false),
                    ("wt", GpuType::F32, false),
                    ("g", GpuType::F32, false),
                    ("dst", GpuType::F32, true),
                ],
                &[],
            ),
            Kernel::MaxPool(t) => fill(
                MAXPOOL,
                &[("src", t, false), ("dst", t, true), ("idx", I32, true)],
                &[],
            ),
            Kernel::MaxPoolBackward(t) => fill(
                MAXPOOL_BACKWARD,
                &[("grad", t, false), ("idx", I32, false), ("dst", t, true)],
                &[],
            ),
            Kernel::MaxPoolBackwardTiles(t) => fill(
                MAXPOOL_BACKWARD_TILES,
                &[("grad", t, false), ("idx", I32, false), ("dst", t, true)],
                &[],
            ),
            Kernel::SortKeys => fill(
                SORT_KEYS,
                &[("src", U32, false), ("keys", U32, true), ("idx", U32, true)],
                &[],
            ),
            Kernel::SortStep => fill(SORT_STEP, &[("keys", U32, true), ("idx", U32, true)], &[]),
            Kernel::SortLocal => fill(SORT_LOCAL, &[("keys", U32, true), ("idx", U32, true)], &[]),
            Kernel::SortIndices => fill(
                SORT_INDICES,
                &[("idx", U32, false), ("dst", I32, true)],
                &[],
            ),
        }
    }

    /// Every variant the engine can ask for (validated with naga in the tests), built from the
    /// ops' `ALL` lists and their per-op properties, so a new op cannot be left out.
    pub fn all() -> Vec<Kernel> {
        use crate::ops::Operands;
        let mut v = vec![
            Kernel::AdamF32,
            Kernel::SgdF32 { momentum: false },
            Kernel::SgdF32 { momentum: true },
            Kernel::SoftmaxRows { log: false },
            Kernel::SoftmaxRows { log: true },
            Kernel::SoftmaxBackwardRows { log: false },
            Kernel::SoftmaxBackwardRows { log: true },
            Kernel::NllRows,
            Kernel::NllRowsBackward,
            Kernel::SortKeys,
            Kernel::SortStep,
            Kernel::SortLocal,
            Kernel::SortIndices,
        ];
        for (a_t, b_t) in [(false, false), (false, true), (true, false), (true, true)] {
            let f32_tiles = Tile::ALL.into_iter().filter(|t| !t.half);
            v.extend(f32_tiles.map(|tile| Kernel::MatmulVec4 { a_t, b_t, tile }));
        }
        v.extend(UnaryOp::ALL.iter().map(|&op| Kernel::UnaryVec4(op)));
        // The storage types each binary op's kernels take (bool is U32).
        let takes = |op: BinaryOp, t: GpuType| {
            let float = GpuType::FLOATS.contains(&t);
            match op.operands() {
                Operands::Float => float,
                Operands::Number => t != GpuType::U32,
                Operands::Any => true,
                Operands::Bool => t == GpuType::U32,
            }
        };
        for &op in BinaryOp::ALL {
            if takes(op, GpuType::F32) {
                v.push(Kernel::BinaryVec4(op));
            }
            let types = GpuType::ALL.into_iter().filter(|&t| takes(op, t));
            v.extend(types.map(|t| Kernel::Binary(op, t)));
        }
        for t in GpuType::ALL {
            let float = GpuType::FLOATS.contains(&t);
            if float {
                v.extend(UnaryOp::ALL.iter().map(|&op| Kernel::Unary(op, t)));
                for op in Gemm::ALL {
                    // f16 staging in native f16 GEMMs only.
                    let tiles = Tile::ALL
                        .into_iter()
                        .filter(|x| !x.half || t == GpuType::F16);
                    v.extend(tiles.map(|tile| Kernel::Matmul(t, op, tile)));
                }
                v.extend([
                    Kernel::MaxPool(t),
                    Kernel::MaxPoolBackward(t),
                    Kernel::MaxPoolBackwardTiles(t),
                ]);
            }
            if t != GpuType::U32 {
                v.extend(ReduceOp::ALL.iter().flat_map(|&op| {
                    [
                        Kernel::Reduce(op, t),
                        Kernel::ReduceSmall(op, t),
                        Kernel::ReduceSubgroup(op, t),
                    ]
                }));
                v.extend([
                    Kernel::Cumsum(t),
                    Kernel::ScatterAdd(t),
                    Kernel::ScatterAddSorted(t),
                    Kernel::Col2im(t),
                ]);
            }
            v.extend([
                Kernel::Where(t),
                Kernel::Fill(t),
                Kernel::Gather(t),
                Kernel::Im2col(t),
            ]);
            v.extend(GpuType::ALL.iter().map(|&u| Kernel::Copy(t, u)));
        }
        v
    }
}
