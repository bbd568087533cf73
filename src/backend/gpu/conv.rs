//! GPU convolution and pooling: conv2d and its two gradients as implicit GEMMs on the shared GEMM
//! bodies, im2col/col2im (grouped convolutions, average pooling, the differentiable formulation),
//! and the max-pool kernel pair.

use super::kernels::{Gemm, GpuType, Kernel};
use super::matmul::gemm;
use super::params::{ConvGemmParams, WindowParams};
use super::{
    cast, check_loop, full, groups, launch, output, reduce_rows, u, GpuContext, GpuStorage,
};
use crate::backend::ConvEpilogue;
use crate::ops::{ConvGeom, ReduceOp};
use crate::shape::Layout;
use crate::{DType, Result};
use std::sync::Arc;

/// One implicit-GEMM convolution product (`shaders/gemm_conv_*.wgsl`): `[M, N, K]` and
/// `batches` for `kind` over geometry `g` with `o` output channels and `nb` samples per batch
/// entry.
#[allow(clippy::too_many_arguments)]
fn conv_gemm(
    ctx: &Arc<GpuContext>,
    op: &'static str,
    (kind, t): (Gemm, GpuType),
    [m, n, k, batches]: [usize; 4],
    g: &ConvGeom,
    (o, nb): (usize, usize),
    bufs: &[&wgpu::Buffer],
) -> Result<()> {
    let p = ConvGemmParams {
        m: u(m),
        n: u(n),
        k: u(k),
        k_start: 0,
        k_end: 0,
        g: g.into(),
        o: u(o),
        nb: u(nb),
    };
    let chunk = |k_start, k_end| ConvGemmParams {
        k_start,
        k_end,
        ..p
    };
    gemm(ctx, op, (kind, t), [m, n, k, batches], chunk, bufs)
}

/// conv2d as an implicit GEMM per sample, with the bias added in the epilogue, then `epi`'s
/// residual (the output's shape, f32 storage) and relu once the last k is summed.
pub(crate) fn conv2d(
    x: &GpuStorage,
    w: &GpuStorage,
    bias: Option<&GpuStorage>,
    epi: ConvEpilogue<'_, GpuStorage>,
    g: &ConvGeom,
    o: usize,
) -> Result<GpuStorage> {
    let ctx = x.ctx();
    if (epi.relu || epi.residual.is_some()) && x.ty() != GpuType::F32 {
        // A half output would be rounded once where the ops round twice: the op layer composes
        // the epilogue from ops there.
        return Err(crate::Error::msg(format!(
            "internal: conv2d's fused epilogue runs on a GPU in float32 only, got {:?}",
            x.dtype
        )));
    }
    let l = g.ho * g.wo;
    let out = output(ctx, "conv2d", g.n * o * l, x.dtype)?;
    if g.n * o * l == 0 {
        return Ok(out);
    }
    let k = g.c * g.kh * g.kw;
    let zeros;
    let bias = match bias {
        Some(b) => b,
        None => {
            zeros = full(ctx, 0, o, 0.0, x.dtype)?;
            &zeros
        }
    };
    let mut bufs = vec![x.raw(), w.raw(), out.raw(), bias.raw()];
    bufs.extend(epi.residual.map(GpuStorage::raw));
    let fused = Gemm::ConvForward {
        residual: epi.residual.is_some(),
        relu: epi.relu,
    };
    let kind = (fused, x.ty());
    conv_gemm(ctx, "conv2d", kind, [l, o, k, g.n], g, (o, 1), &bufs)?;
    Ok(out)
}

/// conv2d's input gradient as an implicit GEMM per sample (no column buffer, no fold pass).
pub(crate) fn conv2d_backward_input(
    gy: &GpuStorage,
    w: &GpuStorage,
    g: &ConvGeom,
    o: usize,
) -> Result<GpuStorage> {
    let ctx = gy.ctx();
    let hw = g.h * g.w;
    let n = g.n * g.c * hw;
    if o == 0 || g.kh * g.kw == 0 {
        return full(ctx, 0, n, 0.0, gy.dtype);
    }
    let out = output(ctx, "conv2d_backward", n, gy.dtype)?;
    if n == 0 {
        return Ok(out);
    }
    let k = o * g.kh * g.kw;
    let bufs = [gy.raw(), w.raw(), out.raw()];
    let kind = (Gemm::ConvInput, gy.ty());
    conv_gemm(
        ctx,
        "conv2d_backward",
        kind,
        [hw, g.c, k, g.n],
        g,
        (o, 1),
        &bufs,
    )?;
    Ok(out)
}

/// conv2d's weight gradient: an implicit GEMM per split of the batch (enough splits to fill the
/// adapter), then one reduction over the splits.
pub(crate) fn conv2d_backward_weight(
    gy: &GpuStorage,
    x: &GpuStorage,
    g: &ConvGeom,
    o: usize,
) -> Result<GpuStorage> {
    let ctx = gy.ctx();
    let k = g.c * g.kh * g.kw;
    let l = g.ho * g.wo;
    if g.n * l == 0 || o * k == 0 {
        return full(ctx, 0, o * k, 0.0, gy.dtype);
    }
    let tile = if ctx.is_cpu_adapter() { 32 } else { 64 };
    let tiles = o.div_ceil(tile) * k.div_ceil(tile);
    let want: usize = if ctx.is_cpu_adapter() { 16 } else { 256 };
    let splits = want.div_ceil(tiles).clamp(1, g.n);
    let nb = g.n.div_ceil(splits);
    let splits = g.n.div_ceil(nb);
    let dst = if splits == 1 {
        "conv2d_backward"
    } else {
        "conv2d_backward (splits)"
    };
    let parts = output(ctx, dst, splits * o * k, gy.dtype)?;
    let bufs = [x.raw(), gy.raw(), parts.raw()];
    let kind = (Gemm::ConvWeight, gy.ty());
    let mnk = [k, o, nb * l, splits];
    conv_gemm(ctx, "conv2d_backward", kind, mnk, g, (o, nb), &bufs)?;
    if splits == 1 {
        return Ok(parts);
    }
    // Sum the splits: view [splits, O*K] as rows of the transposed layout and reduce each column.
    let cols = Layout {
        shape: vec![o * k, splits],
        strides: vec![1, o * k],
        offset: 0,
    };
    let t = cast(&parts, &cols, 0, gy.dtype)?;
    let sum = reduce_rows(ReduceOp::Sum, &t, o * k, splits)?;
    // Half sums come back in f32 (ReduceOp::out_dtype): round once to the gradient's dtype.
    if sum.dtype == gy.dtype {
        return Ok(sum);
    }
    cast(&sum, &Layout::contiguous(&[o * k]), 0, gy.dtype)
}

/// The window kernels (max pooling both ways, col2im) loop over the kernel's rows and, in each,
/// its columns in one invocation: refused past the adapter's loop cap.
fn check_window(ctx: &GpuContext, op: &'static str, g: &ConvGeom) -> Result<()> {
    let what = format!("a {}x{} window over {}x{} planes", g.kh, g.kw, g.h, g.w);
    check_loop(ctx, op, what, g.kh.saturating_mul(g.kw.saturating_add(1)))
}

/// The window kernels' block: `total` invocations over geometry `g`, im2col's padding `pad`.
fn window(total: usize, g: &ConvGeom, pad: u32) -> WindowParams {
    WindowParams {
        total: u(total),
        g: g.into(),
        pad,
    }
}

pub(crate) fn im2col(x: &GpuStorage, g: &ConvGeom, pad: f64) -> Result<GpuStorage> {
    let ctx = x.ctx();
    let n = g.n * g.c * g.kh * g.kw * g.ho * g.wo;
    let out = output(ctx, "im2col", n, x.dtype)?;
    let bits = match x.ty() {
        GpuType::I32 | GpuType::U32 => pad as i32 as u32,
        _ => (pad as f32).to_bits(),
    };
    let k = Kernel::Im2col(x.ty());
    let bufs = [x.raw(), out.raw()];
    launch(ctx, "im2col", k, &window(n, g, bits), &[], &bufs, groups(n))?;
    Ok(out)
}

pub(crate) fn col2im(cols: &GpuStorage, g: &ConvGeom) -> Result<GpuStorage> {
    let ctx = cols.ctx();
    check_window(ctx, "col2im", g)?;
    let n = g.n * g.c * g.h * g.w;
    let out = output(ctx, "col2im", n, cols.dtype)?;
    let k = Kernel::Col2im(cols.ty());
    let bufs = [cols.raw(), out.raw()];
    launch(ctx, "col2im", k, &window(n, g, 0), &[], &bufs, groups(n))?;
    Ok(out)
}

/// Max pooling over `[N*C, H, W]` planes: values and argmax flat indices (i32).
pub(crate) fn max_pool(x: &GpuStorage, g: &ConvGeom) -> Result<(GpuStorage, GpuStorage)> {
    let ctx = x.ctx();
    check_window(ctx, "max_pool2d", g)?;
    let n = g.n * g.c * g.ho * g.wo;
    let out = output(ctx, "max_pool2d", n, x.dtype)?;
    let idx = output(ctx, "max_pool2d", n, DType::I32)?;
    let k = Kernel::MaxPool(x.ty());
    let bufs = [x.raw(), out.raw(), idx.raw()];
    launch(
        ctx,
        "max_pool2d",
        k,
        &window(n, g, 0),
        &[],
        &bufs,
        groups(n),
    )?;
    Ok((out, idx))
}

/// Whether the pooling windows of `g` tile its planes exactly: stride = kernel, no padding or
/// dilation, and no rows or columns left over (`H = Ho * kh`, `W = Wo * kw`).
fn tiles_planes(g: &ConvGeom) -> bool {
    (g.sh, g.sw, g.ph, g.pw, g.dh, g.dw) == (g.kh, g.kw, 0, 0, 1, 1)
        && g.ho.checked_mul(g.kh) == Some(g.h)
        && g.wo.checked_mul(g.kw) == Some(g.w)
}

/// The input gradient of max pooling from the output gradient and the argmax indices.
pub(crate) fn max_pool_backward(
    grad: &GpuStorage,
    idx: &GpuStorage,
    g: &ConvGeom,
) -> Result<GpuStorage> {
    let ctx = grad.ctx();
    check_window(ctx, "max_pool2d_backward", g)?;
    let n = g.n * g.c * g.h * g.w;
    let out = output(ctx, "max_pool2d_backward", n, grad.dtype)?;
    let bufs = [grad.raw(), idx.raw(), out.raw()];
    let op = "max_pool2d_backward";
    if tiles_planes(g) {
        // Each input element in exactly one window: one invocation per window writes them all.
        let windows = g.n * g.c * g.ho * g.wo;
        let k = Kernel::MaxPoolBackwardTiles(grad.ty());
        launch(
            ctx,
            op,
            k,
            &window(windows, g, 0),
            &[],
            &bufs,
            groups(windows),
        )?;
    } else {
        let k = Kernel::MaxPoolBackward(grad.ty());
        launch(ctx, op, k, &window(n, g, 0), &[], &bufs, groups(n))?;
    }
    Ok(out)
}
