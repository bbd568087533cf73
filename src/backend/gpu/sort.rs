//! Row sort on the GPU: a bitonic network over each row padded (in a work buffer) to a power of
//! two, one dispatch per compare-exchange step, so no invocation loops (no llvmpipe loop cap)
//! and any number of rows fits (`GpuContext::dispatch` splits large grids).

use super::kernels::Kernel;
use super::{groups, launch, output, u, GpuStorage};
use crate::{DType, Device, Error, Result};

/// For each row of a contiguous f32 or int32 `[rows, n]` input, the int32 indices that sort it
/// (stable; NaN above every number).
pub(crate) fn argsort_rows(
    x: &GpuStorage,
    rows: usize,
    n: usize,
    descending: bool,
) -> Result<GpuStorage> {
    let ctx = x.ctx();
    let is_float = match x.dtype {
        DType::F32 => 1,
        DType::I32 => 0,
        dtype => {
            return Err(Error::UnsupportedDType {
                op: "sort",
                dtype,
                hint: " (the GPU row sort takes float32 or int32 keys)",
            })
        }
    };
    let out = output(ctx, "sort", rows * n, DType::I32)?;
    if rows == 0 || n == 0 {
        return Ok(out);
    }
    let p = n.next_power_of_two();
    let total = rows
        .checked_mul(p)
        .ok_or_else(|| Error::oom("sort", Device::Gpu(ctx.ordinal), u64::MAX))?;
    let keys = output(ctx, "sort", total, DType::I32)?;
    let idx = output(ctx, "sort", total, DType::I32)?;
    launch(
        ctx,
        "sort",
        Kernel::SortKeys,
        &[u(total), u(n), u(p), is_float],
        &[x.raw(), keys.raw(), idx.raw()],
        groups(total),
    )?;
    let mut k = 2;
    while k <= p {
        let mut j = k / 2;
        while j >= 1 {
            launch(
                ctx,
                "sort",
                Kernel::SortStep,
                &[u(total / 2), u(n), u(p), u(j), u(k), descending as u32],
                &[keys.raw(), idx.raw()],
                groups(total / 2),
            )?;
            j /= 2;
        }
        k *= 2;
    }
    launch(
        ctx,
        "sort",
        Kernel::SortIndices,
        &[u(rows * n), u(n), u(p)],
        &[idx.raw(), out.raw()],
        groups(rows * n),
    )?;
    Ok(out)
}
