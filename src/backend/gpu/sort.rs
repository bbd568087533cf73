//! Row sort on the GPU: a bitonic network over each row padded (in a work buffer) to a power of
//! two. Steps that pair entries 512 or more apart are one dispatch each (no loops); the shorter
//! steps run in workgroup memory, up to 45 per launch (far below llvmpipe's loop cap, whatever
//! the row length). Any number of rows fits: `GpuContext::dispatch` splits large grids.

use super::kernels::Kernel;
use super::params::{SortIndicesParams, SortKeysParams, SortLocalParams, SortStepParams};
use super::{groups, launch, output, u, GpuStorage};
use crate::{DType, Device, Error, Result};

/// The largest step `sort_local.wgsl` runs in workgroup memory: 256 pairs, 512 entries.
const LOCAL_J: usize = 256;

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
        // int64 is held as int32 words on a GPU (see DType::I64).
        DType::I32 | DType::I64 => 0,
        dtype => {
            return Err(Error::UnsupportedDType {
                op: "sort",
                dtype,
                hint: " (the GPU row sort takes float32, int32 or int64 keys)",
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
    let params = SortKeysParams {
        total: u(total),
        n: u(n),
        p: u(p),
        is_float,
    };
    let bufs = [x.raw(), keys.raw(), idx.raw()];
    launch(
        ctx,
        "sort",
        Kernel::SortKeys,
        &params,
        &[],
        &bufs,
        groups(total),
    )?;
    // Steps with j <= 256 run in workgroup memory (LOCAL_J pairs per workgroup): every k up to
    // 512 in one launch, then for each larger k the global steps j > 256 and one local launch.
    let pairs = total / 2;
    let bufs = [keys.raw(), idx.raw()];
    let local = |k0: usize, j0: usize, k1: usize| {
        let params = SortLocalParams {
            pairs: u(pairs),
            n: u(n),
            p: u(p),
            k0: u(k0),
            j0: u(j0),
            k1: u(k1),
            descending: descending as u32,
        };
        let g = [u(pairs.div_ceil(LOCAL_J)), 1, 1];
        launch(ctx, "sort", Kernel::SortLocal, &params, &[], &bufs, g)
    };
    if p >= 2 {
        local(2, 1, p.min(2 * LOCAL_J))?;
    }
    let mut k = 4 * LOCAL_J;
    while k <= p {
        let mut j = k / 2;
        while j > LOCAL_J {
            let params = SortStepParams {
                pairs: u(pairs),
                n: u(n),
                p: u(p),
                j: u(j),
                k: u(k),
                descending: descending as u32,
            };
            launch(
                ctx,
                "sort",
                Kernel::SortStep,
                &params,
                &[],
                &bufs,
                groups(pairs),
            )?;
            j /= 2;
        }
        local(k, LOCAL_J, k)?;
        k *= 2;
    }
    let params = SortIndicesParams {
        total: u(rows * n),
        n: u(n),
        p: u(p),
    };
    let bufs = [idx.raw(), out.raw()];
    launch(
        ctx,
        "sort",
        Kernel::SortIndices,
        &params,
        &[],
        &bufs,
        groups(rows * n),
    )?;
    Ok(out)
}
