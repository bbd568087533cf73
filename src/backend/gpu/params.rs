//! Each kernel family's parameter block, declared once as a `#[repr(C)]` Pod struct from which
//! the matching WGSL struct is generated: the launcher fills the struct by field name, the
//! shader reads `params.field`, and a field missing on either side does not compile (Rust) or
//! validate (naga). Variable-length words (shapes, strides) follow the fixed fields in
//! `params.tail`, with the grid offset of a split dispatch as its last three words
//! (`GpuContext::dispatch`).
//!
//! Which struct a kernel takes is [`Kernel::params`](super::kernels::Kernel::params); the
//! kernel's WGSL declares exactly that struct as `Params`, and [`launch`](super::launch)
//! refuses a block of another type.

use std::fmt::Write;

/// A type a parameter field can have: a 4-byte scalar or a nested parameter struct.
pub(crate) trait WgslField: bytemuck::Pod {
    /// Its WGSL type name.
    const WGSL: &'static str;
    /// Append the declarations it needs (nested structs, each once).
    fn declare(_out: &mut String) {}
}

impl WgslField for u32 {
    const WGSL: &'static str = "u32";
}
impl WgslField for i32 {
    const WGSL: &'static str = "i32";
}
impl WgslField for f32 {
    const WGSL: &'static str = "f32";
}

/// A kernel's parameter block.
pub(crate) trait KernelParams: WgslField {
    /// The Rust name, for the check at launch and the generated WGSL's comment.
    const NAME: &'static str;
    /// `(name, WGSL type, byte offset)` of each field, in memory order.
    const FIELDS: &'static [Field];
    /// Append the declarations its fields need (nested structs, each once).
    fn declare_fields(out: &mut String);
}

/// A field of a parameter struct: name, WGSL type, byte offset in the Rust struct.
pub(crate) type Field = (&'static str, &'static str, usize);

/// What a kernel's WGSL needs of its parameter type: its name and its declaration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamsDecl {
    /// The Rust struct's name.
    pub(crate) name: &'static str,
    /// Its fields.
    pub(crate) fields: &'static [Field],
    /// Its size in bytes (where the tail starts).
    pub(crate) size: usize,
    /// Appends the nested structs' declarations.
    nested: fn(&mut String),
}

impl ParamsDecl {
    /// The declaration of `P`.
    pub(crate) fn of<P: KernelParams>() -> ParamsDecl {
        ParamsDecl {
            name: P::NAME,
            fields: P::FIELDS,
            size: std::mem::size_of::<P>(),
            nested: P::declare_fields,
        }
    }
    /// WGSL declaring `struct Params` with `P`'s fields and the tail (binding 0 is declared as
    /// `Params` in `shaders/prelude.wgsl`), preceded by any nested struct.
    pub(crate) fn wgsl(&self) -> String {
        let mut s = String::new();
        (self.nested)(&mut s);
        let _ = writeln!(
            s,
            "// {} (src/backend/gpu/params.rs), then the tail",
            self.name
        );
        let tail = format!(
            "    // from byte {}: the launcher's words, then the grid offset x, y, z\n{}",
            self.size, "    tail: array<u32>,\n"
        );
        s.push_str(&declaration("Params", self.fields, &tail));
        s
    }
}

fn declaration(name: &str, fields: &[Field], extra: &str) -> String {
    let mut s = format!("struct {name} {{\n");
    for (f, t, _) in fields {
        let _ = writeln!(s, "    {f}: {t},");
    }
    s.push_str(extra);
    s.push_str("}\n");
    s
}

/// The parameter words of one launch: the block's bytes, then the tail.
pub(crate) fn words<P: KernelParams>(p: &P, tail: &[u32]) -> Vec<u32> {
    let mut w: Vec<u32> = bytemuck::cast_slice(std::slice::from_ref(p)).to_vec();
    w.extend_from_slice(tail);
    w
}

macro_rules! kernel_params {
    ($(
        $(#[$meta:meta])*
        struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        pub(crate) struct $name {
            $( $(#[$fmeta])* pub(crate) $field: $ty, )*
        }
        impl WgslField for $name {
            const WGSL: &'static str = stringify!($name);
            fn declare(out: &mut String) {
                Self::declare_fields(out);
                let own = declaration(stringify!($name), Self::FIELDS, "");
                if !out.contains(&own) {
                    out.push_str(&own);
                }
            }
        }
        impl KernelParams for $name {
            const NAME: &'static str = stringify!($name);
            const FIELDS: &'static [Field] = &[$(
                (stringify!($field), <$ty as WgslField>::WGSL, std::mem::offset_of!($name, $field))
            ),*];
            fn declare_fields(out: &mut String) {
                $( <$ty as WgslField>::declare(out); )*
            }
        }
    )*};
}

kernel_params! {
    /// The index-check words of a checking kernel (`shaders/index_check.wgsl`, `checks.rs`).
    struct IndexCheck {
        /// The op's id in the check buffer's op list.
        op: u32,
        /// The launching thread's slot.
        slot: u32,
        /// The thread's token (a failure recorded with an older token loses).
        token: u32,
    }

    /// A convolution's or pooling window's geometry ([`crate::ops::ConvGeom`]).
    struct ConvShape {
        /// Batch size.
        n: u32,
        /// Input channels.
        c: u32,
        /// Input height.
        h: u32,
        /// Input width.
        w: u32,
        /// Kernel height.
        kh: u32,
        /// Kernel width.
        kw: u32,
        /// Stride along the height.
        sh: u32,
        /// Stride along the width.
        sw: u32,
        /// Padding along the height.
        ph: u32,
        /// Padding along the width.
        pw: u32,
        /// Dilation along the height.
        dh: u32,
        /// Dilation along the width.
        dw: u32,
        /// Output height.
        ho: u32,
        /// Output width.
        wo: u32,
    }

    /// `fused.wgsl` (`kernels::fused_source`); the tail holds the shape, each input's strides
    /// (`ndim` each), the inputs' offsets and two f32 parameters (bits) per instruction.
    struct FusedParams {
        /// Elements.
        n: u32,
        /// Dimensions of the coalesced view.
        ndim: u32,
    }

    /// `unary.wgsl`; the tail holds the shape and the strides (`ndim` each).
    struct UnaryParams {
        /// Elements.
        n: u32,
        /// Dimensions of the coalesced view.
        ndim: u32,
        /// The op's first scalar parameter (`UnaryOp::params`).
        p0: f32,
        /// The op's second scalar parameter.
        p1: f32,
        /// The input's offset.
        offset: u32,
    }

    /// `unary_vec4.wgsl`.
    struct UnaryVec4Params {
        /// vec4 groups (`n / 4` rounded up).
        n4: u32,
        /// Elements.
        n: u32,
        /// The op's first scalar parameter.
        p0: f32,
        /// The op's second scalar parameter.
        p1: f32,
        /// The input's offset in vec4s.
        offset4: u32,
    }

    /// `binary.wgsl`: out = f(a, b) over two strided views; the tail holds the shape and each
    /// operand's strides (`ndim` each).
    struct BinaryParams {
        /// Elements.
        n: u32,
        /// Dimensions of the coalesced views.
        ndim: u32,
        /// The first operand's offset.
        off_a: u32,
        /// The second operand's offset.
        off_b: u32,
        /// Integer division's zero-divisor check (unused by other ops).
        check: IndexCheck,
    }

    /// `copy.wgsl`: a strided copy; the tail holds the shape and the source's and the
    /// destination's strides (`ndim` each).
    struct CopyParams {
        /// Elements.
        n: u32,
        /// Dimensions of the coalesced views.
        ndim: u32,
        /// The source's offset.
        off_src: u32,
        /// The destination's offset.
        off_dst: u32,
    }

    /// `binary_vec4.wgsl`.
    struct BinaryVec4Params {
        /// vec4 groups.
        n4: u32,
        /// Elements.
        n: u32,
        /// The first operand's offset in vec4s.
        off_a4: u32,
        /// The second operand's offset in vec4s.
        off_b4: u32,
    }

    /// `where.wgsl`; the tail holds the shape and the strides of cond, a and b.
    struct WhereParams {
        /// Elements.
        n: u32,
        /// Dimensions of the coalesced views.
        ndim: u32,
        /// The condition's offset.
        off_c: u32,
        /// The first branch's offset.
        off_a: u32,
        /// The second branch's offset.
        off_b: u32,
    }

    /// `fill.wgsl`.
    struct FillParams {
        /// Elements.
        n: u32,
        /// The value's bits in the kernel's compute type.
        bits: u32,
    }

    /// `reduce.wgsl`: rows of `n` reduced in chunks of `chunk`, `k` chunks per row.
    struct ReduceParams {
        /// Rows times chunks per row (workgroups).
        total: u32,
        /// Elements per chunk.
        chunk: u32,
        /// Chunks per row.
        k: u32,
        /// Row length.
        n: u32,
    }

    /// `reduce_small.wgsl`: one invocation per row.
    struct ReduceSmallParams {
        /// Rows.
        rows: u32,
        /// Row length.
        n: u32,
    }

    /// `cumsum.wgsl`: columns `[j0, j1)` of each row, carrying the sum before `j0`.
    struct CumsumParams {
        /// Rows.
        rows: u32,
        /// Row length.
        n: u32,
        /// First column of this launch.
        j0: u32,
        /// End of this launch's columns.
        j1: u32,
    }

    /// The GEMM bodies over strided operands (`gemm_strided.wgsl`, `matmul_vec4.wgsl`, the
    /// vec4 tiles), offsets and strides in elements.
    struct MatmulParams {
        /// Rows of C.
        m: u32,
        /// Columns of C.
        n: u32,
        /// The inner dimension.
        k: u32,
        /// First k of this launch.
        k_start: u32,
        /// End of this launch's k.
        k_end: u32,
        /// A's offset.
        off_a: u32,
        /// A's batch stride.
        sab: u32,
        /// A's row stride.
        sam: u32,
        /// A's k stride.
        sak: u32,
        /// B's offset.
        off_b: u32,
        /// B's batch stride.
        sbb: u32,
        /// B's k stride.
        sbk: u32,
        /// B's column stride.
        sbn: u32,
    }

    /// The GEMM bodies over a convolution's implicit operands (`gemm_conv_*.wgsl`).
    struct ConvGemmParams {
        /// Rows of C.
        m: u32,
        /// Columns of C.
        n: u32,
        /// The inner dimension.
        k: u32,
        /// First k of this launch.
        k_start: u32,
        /// End of this launch's k.
        k_end: u32,
        /// The convolution.
        g: ConvShape,
        /// Output channels.
        o: u32,
        /// Samples per batch entry (the weight gradient's split of the batch).
        nb: u32,
    }

    /// The window kernels: `im2col.wgsl`, `col2im.wgsl`, `maxpool*.wgsl`.
    struct WindowParams {
        /// Elements written (one invocation each).
        total: u32,
        /// The window geometry.
        g: ConvShape,
        /// im2col's padding value, as bits of the compute type (0 elsewhere).
        pad: u32,
    }

    /// `index.wgsl` (gather); the tail holds x's shape and strides, the output's shape and the
    /// index's strides (`ndim` each).
    struct GatherParams {
        /// Elements.
        n: u32,
        /// Dimensions.
        ndim: u32,
        /// The gathered dimension.
        dim: u32,
        /// The index's offset.
        off_idx: u32,
        /// The bounds check.
        check: IndexCheck,
    }

    /// `scatter_add.wgsl`; the tail holds the base's shape, the index's shape and strides and
    /// the source's strides (`ndim` each).
    struct ScatterAddParams {
        /// Elements of the base.
        n: u32,
        /// Dimensions.
        ndim: u32,
        /// The scattered dimension.
        dim: u32,
        /// The index's offset (of this launch's chunk along `dim`).
        off_idx: u32,
        /// The source's offset (of this launch's chunk).
        off_src: u32,
        /// The index's length along `dim` in this launch.
        len_dim: u32,
        /// The bounds check.
        check: IndexCheck,
    }

    /// `scatter_add_sorted.wgsl`; the tail holds the base's shape, the index's shape and the
    /// source's strides (`ndim` each).
    struct ScatterAddSortedParams {
        /// Elements of the base.
        n: u32,
        /// Dimensions.
        ndim: u32,
        /// The scattered dimension.
        dim: u32,
        /// The index's offset.
        off_idx: u32,
        /// The index's stride along `dim` (the same line for every position off `dim`).
        idx_stride: u32,
        /// The source's offset.
        off_src: u32,
        /// The first sorted entry this launch visits.
        t0: u32,
        /// The end of the sorted entries this launch visits.
        t1: u32,
        /// The bounds check.
        check: IndexCheck,
    }

    /// `sgd.wgsl`.
    struct SgdParams {
        /// Elements.
        n: u32,
        /// Learning rate.
        lr: f32,
        /// Momentum (the momentum variant only).
        momentum: f32,
        /// `1 - dampening`.
        undamped: f32,
        /// Weight decay.
        weight_decay: f32,
        /// 1 for Nesterov momentum.
        nesterov: u32,
        /// 1 on the buffer's first step, which sets it to the gradient.
        first: u32,
    }

    /// `nll_rows.wgsl` and `nll_rows_backward.wgsl`.
    struct NllRowsParams {
        /// Rows (targets).
        rows: u32,
        /// Classes (the row length).
        n: u32,
        /// `rows * n` (the backward kernel's elements).
        numel: u32,
        /// The target value whose rows are ignored, when `ignores` is 1 (forward).
        ignore_index: i32,
        /// 1 when some target can equal the ignore index (it fits the i32 targets), else 0.
        ignores: u32,
        /// 1 when the class weights are read, else 0 (every row weighs 1; forward).
        weighted: u32,
        /// The bounds check of the targets (forward).
        check: IndexCheck,
    }

    /// `adam.wgsl`.
    struct AdamParams {
        /// Elements.
        n: u32,
        /// Learning rate.
        lr: f32,
        /// β₁.
        beta1: f32,
        /// β₂.
        beta2: f32,
        /// ε.
        eps: f32,
        /// `1 - β₁ᵗ`.
        bias_correction1: f32,
        /// `1 - β₂ᵗ`.
        bias_correction2: f32,
        /// Weight decay.
        weight_decay: f32,
        /// 1 for AdamW's decoupled decay.
        decoupled: u32,
    }

    /// `sort_keys.wgsl`: rows padded to `p` entries.
    struct SortKeysParams {
        /// Padded entries in all (rows × p).
        total: u32,
        /// Row length.
        n: u32,
        /// Padded row length (a power of two).
        p: u32,
        /// 1 for float keys.
        is_float: u32,
    }

    /// `sort_step.wgsl`: one compare-exchange step (j, k) of the bitonic network.
    struct SortStepParams {
        /// Pairs in all.
        pairs: u32,
        /// Row length.
        n: u32,
        /// Padded row length.
        p: u32,
        /// Partner distance.
        j: u32,
        /// Sequence length being merged.
        k: u32,
        /// 1 for a descending sort.
        descending: u32,
    }

    /// `sort_local.wgsl`: the steps from (k0, j0) through k1 in workgroup memory.
    struct SortLocalParams {
        /// Pairs in all.
        pairs: u32,
        /// Row length.
        n: u32,
        /// Padded row length.
        p: u32,
        /// First sequence length.
        k0: u32,
        /// First partner distance.
        j0: u32,
        /// Last sequence length.
        k1: u32,
        /// 1 for a descending sort.
        descending: u32,
    }

    /// `sort_indices.wgsl`.
    struct SortIndicesParams {
        /// Entries written (rows × n).
        total: u32,
        /// Row length.
        n: u32,
        /// Padded row length.
        p: u32,
    }
}

impl From<&crate::ops::ConvGeom> for ConvShape {
    fn from(g: &crate::ops::ConvGeom) -> ConvShape {
        let u = |v: usize| v as u32;
        ConvShape {
            n: u(g.n),
            c: u(g.c),
            h: u(g.h),
            w: u(g.w),
            kh: u(g.kh),
            kw: u(g.kw),
            sh: u(g.sh),
            sw: u(g.sw),
            ph: u(g.ph),
            pw: u(g.pw),
            dh: u(g.dh),
            dw: u(g.dw),
            ho: u(g.ho),
            wo: u(g.wo),
        }
    }
}

impl From<[u32; 3]> for IndexCheck {
    fn from([op, slot, token]: [u32; 3]) -> IndexCheck {
        IndexCheck { op, slot, token }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_its_fields_in_order_and_its_wgsl_declares_them() {
        let p = WindowParams {
            total: 7,
            g: ConvShape {
                n: 1,
                wo: 14,
                ..Default::default()
            },
            pad: 9,
        };
        let w = words(&p, &[5, 6]);
        assert_eq!(w.len(), 1 + 14 + 1 + 2);
        assert_eq!(
            (w[0], w[1], w[14], w[15], w[16], w[17]),
            (7, 1, 14, 9, 5, 6)
        );
        let src = ParamsDecl::of::<WindowParams>().wgsl();
        // The nested struct once, then Params with the same fields and the tail.
        assert_eq!(src.matches("struct ConvShape {").count(), 1);
        assert!(
            src.contains("struct Params {\n    total: u32,\n    g: ConvShape,\n    pad: u32,\n")
        );
        assert!(src.contains("tail: array<u32>"));
        assert!(!src.contains("struct WindowParams"));
        let adam = ParamsDecl::of::<AdamParams>().wgsl();
        assert!(adam.contains("    lr: f32,\n") && adam.contains("    decoupled: u32,\n"));
    }

    /// The WGSL struct each kernel reads lays its members out where the Rust struct has its
    /// fields (naga's layout), with the tail right after them.
    #[test]
    fn every_kernel_reads_its_struct_at_the_rust_offsets() {
        use super::super::kernels::Kernel;
        for k in Kernel::all() {
            let (key, decl) = (k.key(), k.params());
            let module = naga::front::wgsl::parse_str(&k.source()).expect("parses");
            let members = module
                .types
                .iter()
                .find_map(|(_, t)| match &t.inner {
                    naga::TypeInner::Struct { members, .. }
                        if t.name.as_deref() == Some("Params") =>
                    {
                        Some(members.clone())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{key}: no struct Params"));
            let got: Vec<(String, usize)> = members
                .iter()
                .map(|m| (m.name.clone().unwrap_or_default(), m.offset as usize))
                .collect();
            let mut want: Vec<(String, usize)> = decl
                .fields
                .iter()
                .map(|&(f, _, at)| (f.to_string(), at))
                .collect();
            want.push(("tail".into(), decl.size));
            assert_eq!(got, want, "{key} ({})", decl.name);
        }
    }

    /// A launch with a block of another type than the kernel's is an error, before anything is
    /// recorded.
    #[test]
    fn a_block_of_another_type_is_refused_at_launch() {
        use super::super::kernels::{GpuType, Kernel};
        let Some(ctx) = super::super::test_context() else {
            return;
        };
        let k = Kernel::Unary(crate::ops::UnaryOp::Exp, GpuType::F32);
        let p = FillParams { n: 1, bits: 0 };
        let e = super::super::launch(&ctx, "exp", k, &p, &[], &[], [1, 1, 1]).unwrap_err();
        assert!(
            e.to_string()
                .contains("unary_exp_f32 reads UnaryParams, was launched with FillParams"),
            "{e}"
        );
    }
}
