//! nll_loss's rows on the GPU: each row's term and weight in one kernel (targets checked on the
//! device), and its gradient in one more, where the composite takes about a dozen launches
//! (`ops/loss.rs` says which losses take them).

use super::kernels::Kernel;
use super::params::NllRowsParams;
use super::{groups, launch, output, u, GpuStorage};
use crate::{DType, Error, Result};

/// Storage buffers `nll_rows.wgsl` binds: its parameters, six tensors and the index-check flag
/// (WebGPU's default; an adapter with fewer takes the ops, whose kernels bind at most six).
const BINDINGS: u32 = 8;

/// `(loss, wt, kept)` of each of the `rows` rows of contiguous f32 log-probabilities `logp`
/// (`[rows, n]`) at its `target` (int32 or int64 words, contiguous): `-logp[t] · w[t]`, `w[t]`
/// (1 without class `weight`s), both 0 where the target is `ignore` (none: `None`), and the target
/// the gradient reads (-1 there). A target outside `[0, n)` is reported under `op` at the next
/// readback. `None` on an adapter with fewer than [`BINDINGS`] storage buffers a shader.
pub(crate) fn nll_rows(
    op: &'static str,
    logp: &GpuStorage,
    rows: usize,
    n: usize,
    target: &GpuStorage,
    weight: Option<&GpuStorage>,
    ignore: Option<i32>,
) -> Result<Option<(GpuStorage, GpuStorage, GpuStorage)>> {
    check_dtypes(op, logp, target, weight)?;
    let ctx = logp.ctx();
    if ctx.limits.max_storage_buffers_per_shader_stage < BINDINGS {
        return Ok(None);
    }
    let loss = output(ctx, op, rows, DType::F32)?;
    let wt = output(ctx, op, rows, DType::F32)?;
    let kept = output(ctx, op, rows, DType::I32)?;
    if rows == 0 {
        return Ok(Some((loss, wt, kept)));
    }
    ctx.checks.checked(op, |flag, check| {
        let p = NllRowsParams {
            rows: u(rows),
            n: u(n),
            numel: u(rows * n),
            ignore_index: ignore.unwrap_or(0),
            ignores: ignore.is_some() as u32,
            weighted: weight.is_some() as u32,
            check: check.into(),
        };
        // Unweighted, the kernel never reads its weight binding: the log-probabilities fill it.
        let w = weight.unwrap_or(logp).raw();
        let bufs = [
            logp.raw(),
            target.raw(),
            w,
            loss.raw(),
            wt.raw(),
            kept.raw(),
            flag,
        ];
        launch(ctx, op, Kernel::NllRows, &p, &[], &bufs, groups(rows))
    })?;
    Ok(Some((loss, wt, kept)))
}

/// The gradient of [`nll_rows`]'s loss with respect to `[rows, n]` log-probabilities, from the
/// loss's gradient `g` and the rows' `wt` and `kept` that it wrote.
pub(crate) fn nll_rows_backward(
    op: &'static str,
    kept: &GpuStorage,
    wt: &GpuStorage,
    g: &GpuStorage,
    rows: usize,
    n: usize,
) -> Result<GpuStorage> {
    check_dtypes(op, g, kept, Some(wt))?;
    let ctx = g.ctx();
    let numel = rows
        .checked_mul(n)
        .ok_or_else(|| Error::msg(format!("{op}: [{rows}, {n}] overflows")))?;
    let out = output(ctx, op, numel, DType::F32)?;
    if numel == 0 {
        return Ok(out);
    }
    let p = NllRowsParams {
        rows: u(rows),
        n: u(n),
        numel: u(numel),
        ignore_index: 0,
        ignores: 0,
        weighted: 0,
        check: Default::default(),
    };
    let bufs = [kept.raw(), wt.raw(), g.raw(), out.raw()];
    launch(
        ctx,
        op,
        Kernel::NllRowsBackward,
        &p,
        &[],
        &bufs,
        groups(numel),
    )?;
    Ok(out)
}

/// The kernels read f32 values and int32 words (int64 is held as int32 words on a GPU).
fn check_dtypes(
    op: &'static str,
    x: &GpuStorage,
    target: &GpuStorage,
    weight: Option<&GpuStorage>,
) -> Result<()> {
    let floats = std::iter::once(x).chain(weight);
    if let Some(bad) = floats.map(|s| s.dtype).find(|&d| d != DType::F32) {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::F32,
            found: bad,
        });
    }
    if !matches!(target.dtype, DType::I32 | DType::I64) {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::INDEX,
            found: target.dtype,
        });
    }
    Ok(())
}
