//! The launcher of fused elementwise programs ([`FusedProgram`]): one shader per program
//! structure ([`kernels::fused_source`](super::kernels::fused_source)), cached by
//! [`FusedProgram::key`]; the scalar parameters travel in the launch's parameter words.

use super::params::{words, FusedParams};
use super::{coalesce, groups, output, strided_tail, u, GpuStorage};
use crate::ops::fused::FusedProgram;
use crate::shape::Layout;
use crate::{DType, Result};

/// Runs `p` over f32 `inputs`, each a view broadcast to the output's shape.
pub(crate) fn fused(p: &FusedProgram, inputs: &[(&GpuStorage, &Layout)]) -> Result<GpuStorage> {
    let (x0, l0) = inputs[0];
    let ctx = x0.ctx();
    let n = l0.numel();
    let out = output(ctx, "fused", n, DType::F32)?;
    let strides: Vec<&[usize]> = inputs.iter().map(|(_, l)| &l.strides[..]).collect();
    let (sh, st) = coalesce(&l0.shape, &strides);
    let params = FusedParams {
        n: u(n),
        ndim: u(sh.len()),
    };
    let mut tail = strided_tail(&sh, &st);
    tail.extend(inputs.iter().map(|(_, l)| u(l.offset)));
    for i in p.instrs() {
        tail.extend(i.params().map(f32::to_bits));
    }
    // The zero words each operand is xored with (`opaque` in the generated WGSL).
    tail.extend(std::iter::repeat_n(0u32, 2 * p.instrs().len()));
    let key = p.key();
    let pipeline = ctx.pipeline("fused", &key, || super::kernels::fused_source(p))?;
    let mut bufs: Vec<&wgpu::Buffer> = inputs.iter().map(|(s, _)| s.raw()).collect();
    bufs.push(out.raw());
    ctx.dispatch(
        "fused",
        &key,
        &pipeline,
        &words(&params, &tail),
        &bufs,
        groups(n),
    )?;
    Ok(out)
}
