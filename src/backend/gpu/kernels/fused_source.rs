//! The WGSL of a fused elementwise program: one generated kernel for a chain of unary and binary
//! ops (`gpu/fused.rs` caches it by structure).

use super::{fill, GpuType, FUSED};
use crate::backend::gpu::params::{FusedParams, ParamsDecl};
use crate::ops::fused::{FusedInstr, FusedProgram};

/// The WGSL of a fused elementwise program ([`FusedProgram`]; `shaders/fused.wgsl`): f32 inputs
/// bound from 1 as `in0`, `in1`, ..., the output after them; each instruction is a function of
/// its operands (and, for a unary op, its two parameters, read from `params.tail` at launch, so
/// that programs differing only in their scalars share the shader). Each operand passes through
/// `opaque` (an xor with a zero word of the launch), so that the shader compiler sees every op
/// as the single-op kernel does, over a value it cannot know: llvmpipe otherwise folds `t - t`
/// to 0 where `t` is infinite (eager gives NaN), and would be free to rewrite across ops.
///
/// ```
/// use wgtorch::backend::gpu::kernels::fused_source;
/// use wgtorch::ops::{fused::FusedProgram, BinaryOp, UnaryOp};
/// let mut p = FusedProgram::new(2)?;
/// let s = p.binary(BinaryOp::Add, 0, 1)?;
/// p.unary(UnaryOp::LeakyRelu(0.1), s)?;
/// let wgsl = fused_source(&p);
/// assert!(wgsl.contains("fn op0(a: f32, b: f32) -> f32 {\n    return a + b;"));
/// assert!(wgsl.contains("let r3 = op1(opaque(r2, zb + 2u), "));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn fused_source(p: &FusedProgram) -> String {
    use std::fmt::Write;
    let k = p.inputs();
    let mut bindings: Vec<(String, GpuType, bool)> = (0..k)
        .map(|j| (format!("in{j}"), GpuType::F32, false))
        .collect();
    bindings.push(("dst".into(), GpuType::F32, true));
    let bindings: Vec<(&str, GpuType, bool)> = bindings
        .iter()
        .map(|(n, t, w)| (n.as_str(), *t, *w))
        .collect();
    let (mut funcs, mut body) = (String::new(), String::new());
    // Each input's element offset from one walk over the coordinates: input j's strides follow
    // the shape, its offset follows the last strides.
    let _ = writeln!(body, "    var rem = i;");
    for j in 0..k {
        let _ = writeln!(body, "    var o{j} = params.tail[ob + {j}u];");
    }
    let _ = writeln!(body, "    for (var d = i32(nd) - 1; d >= 0; d = d - 1) {{");
    let _ = writeln!(body, "        let s = params.tail[u32(d)];");
    let _ = writeln!(body, "        let q = rem / s;");
    let _ = writeln!(body, "        let c = rem - q * s;");
    let _ = writeln!(body, "        rem = q;");
    for j in 0..k {
        let _ = writeln!(
            body,
            "        o{j} = o{j} + c * params.tail[{}u * nd + u32(d)];",
            j + 1
        );
    }
    let _ = writeln!(body, "    }}");
    for j in 0..k {
        let _ = writeln!(body, "    let r{j} = ld_in{j}(o{j});");
    }
    for (m, instr) in p.instrs().iter().enumerate() {
        let r = k + m;
        match *instr {
            FusedInstr::Unary { op, x } => {
                let _ = writeln!(
                    funcs,
                    "fn op{m}(x: f32, p0: f32, p1: f32) -> f32 {{\n    return {};\n}}",
                    op.wgsl()
                );
                let _ = writeln!(
                    body,
                    "    let r{r} = op{m}(opaque(r{x}, zb + {}u), bitcast<f32>(params.tail[pb + {}u]), bitcast<f32>(params.tail[pb + {}u]));",
                    2 * m,
                    2 * m,
                    2 * m + 1
                );
            }
            FusedInstr::Binary { op, a, b } => {
                let expr = op.wgsl_f32();
                let _ = writeln!(
                    funcs,
                    "fn op{m}(a: f32, b: f32) -> f32 {{\n    return {expr};\n}}"
                );
                let _ = writeln!(
                    body,
                    "    let r{r} = op{m}(opaque(r{a}, zb + {}u), opaque(r{b}, zb + {}u));",
                    2 * m,
                    2 * m + 1
                );
            }
        }
    }
    let _ = write!(body, "    st_dst(i, r{});", k + p.instrs().len() - 1);
    let instrs = p.instrs().len().to_string();
    let src = fill(
        FUSED,
        &bindings,
        &[
            ("INPUTS", &k.to_string()),
            ("INSTRS", &instrs),
            ("FUNCS", &funcs),
            ("BODY", &body),
        ],
    );
    src.replace("{{PARAMS}}", &ParamsDecl::of::<FusedParams>().wgsl())
}
