//! GPU matrix products: the batched strided matmul (vec4 kernels for aligned f32 layouts, the
//! strided GEMM otherwise), and the dispatch helpers the convolution GEMMs share.

use super::kernels::{Gemm, GpuType, Kernel, Tile};
use super::params::{KernelParams, MatmulParams};
use super::tune::TunedGemm;
use super::{full, launch, output, u, GpuContext, GpuStorage};
use crate::shape::Layout;
use crate::{Error, Result};
use std::sync::Arc;

/// Batched `a @ b` with `a` as `[B, M, K]` and `b` as `[B, K, N]` (any strides, batch stride 0
/// for broadcast) into a contiguous `[B, M, N]`, in the tile the tuner chose.
pub(crate) fn matmul(
    a: &GpuStorage,
    al: &Layout,
    b: &GpuStorage,
    bl: &Layout,
) -> Result<GpuStorage> {
    let ctx = a.ctx();
    let (bs, m, k) = (al.shape[0], al.shape[1], al.shape[2]);
    let n = bl.shape[2];
    let out = output(ctx, "matmul", bs * m * n, a.dtype)?;
    if bs * m * n == 0 {
        return Ok(out);
    }
    if k == 0 {
        return full(ctx, 0, bs * m * n, 0.0, a.dtype);
    }
    // Broadcast (stride-0) operands can hold a K past the kernels' u32 words.
    if u32::try_from(k).is_err() {
        return Err(Error::GpuLimit {
            op: "matmul",
            what: format!("an inner dimension of {k}"),
            needed: k as u64,
            limit: u32::MAX as u64,
            limit_name: "u32 indexing in wgtorch's kernels",
            adapter: ctx.adapter_name().to_string(),
        });
    }
    let bufs = [a.raw(), b.raw(), out.raw()];
    // Aligned f32 layouts read both operands as vec4; everything else takes the strided GEMM.
    let vec4 = vec4_layouts(al, bl).filter(|_| a.ty() == GpuType::F32);
    let p = MatmulParams {
        m: u(m),
        n: u(n),
        k: u(k),
        k_start: 0,
        k_end: 0,
        off_a: u(al.offset),
        sab: u(al.strides[0]),
        sam: u(al.strides[1]),
        sak: u(al.strides[2]),
        off_b: u(bl.offset),
        sbb: u(bl.strides[0]),
        sbk: u(bl.strides[1]),
        sbn: u(bl.strides[2]),
    };
    let chunk = |k_start, k_end| MatmulParams {
        k_start,
        k_end,
        ..p
    };
    match vec4 {
        Some((a_t, b_t)) => {
            let kernel = |tile| Kernel::MatmulVec4 { a_t, b_t, tile };
            TunedGemm {
                op: "matmul",
                ty: GpuType::F32,
                dims: [m, n, k, bs],
                bufs: &bufs,
                tiles: ctx.gemm_tiles(GpuType::F32),
                kernel,
                run: |tile: Tile, bufs: &[&wgpu::Buffer]| {
                    let g = tile.groups(m, n, bs).map(u);
                    launch_k_chunks(ctx, "matmul", kernel(tile), k, chunk, bufs, g)
                },
            }
            .launch(ctx)?;
        }
        None => gemm(
            ctx,
            "matmul",
            (Gemm::Strided, a.ty()),
            [m, n, k, bs],
            chunk,
            &bufs,
        )?,
    }
    Ok(out)
}

/// Whether `[B, M, K] @ [B, K, N]` can run on `matmul_vec4.wgsl`, and with which layouts: every
/// vec4 read must be 16-byte aligned and inside the operand, and K a multiple of 4 (k steps by 4).
/// A by rows needs unit k stride; transposed, unit row stride and M % 4 == 0. B by rows needs
/// unit column stride and N % 4 == 0; transposed, unit k stride. Returns (A transposed, B
/// transposed).
fn vec4_layouts(al: &Layout, bl: &Layout) -> Option<(bool, bool)> {
    let (m, k, n) = (al.shape[1], al.shape[2], bl.shape[2]);
    let (sa, sb) = (&al.strides, &bl.strides);
    let quad = |v: &[usize]| v.iter().all(|x| x % 4 == 0);
    if k % 4 != 0 {
        return None;
    }
    let a_t = if sa[2] == 1 && quad(&[k, sa[1], sa[0], al.offset]) {
        false
    } else if sa[1] == 1 && quad(&[m, sa[2], sa[0], al.offset]) {
        true
    } else {
        return None;
    };
    let b_t = if sb[2] == 1 && quad(&[n, sb[1], sb[0], bl.offset]) {
        false
    } else if sb[1] == 1 && quad(&[k, sb[2], sb[0], bl.offset]) {
        true
    } else {
        return None;
    };
    Some((a_t, b_t))
}

/// Dispatch one GEMM kernel over `[M, N, batches]` outputs with inner dimension `K`, in the tile
/// the tuner chose (`tune.rs`) among the adapter's ([`GpuContext::gemm_tiles`]): the
/// barrier-free register-blocked kernel on CPU adapters, the shared-memory tiles on real GPUs.
/// `params(k_start, k_end)` is the block of the launch summing that range of k; the grid
/// (columns, rows, batches) may pass the per-dimension limit (see `GpuContext::dispatch`).
pub(super) fn gemm<P: KernelParams>(
    ctx: &Arc<GpuContext>,
    op: &'static str,
    (kind, t): (Gemm, GpuType),
    [m, n, k, batches]: [usize; 4],
    params: impl Fn(u32, u32) -> P,
    bufs: &[&wgpu::Buffer],
) -> Result<()> {
    let kernel = |tile| Kernel::Matmul(t, kind, tile);
    TunedGemm {
        op,
        ty: t,
        dims: [m, n, k, batches],
        bufs,
        tiles: ctx.gemm_tiles(t),
        kernel,
        run: |tile: Tile, bufs: &[&wgpu::Buffer]| {
            let g = tile.groups(m, n, batches).map(u);
            launch_k_chunks(ctx, op, kernel(tile), k, &params, bufs, g)
        },
    }
    .launch(ctx)
}

/// Launch a GEMM body over k in chunks that keep each invocation below the adapter's loop cap
/// (llvmpipe), each with the block `params(k_start, k_end)`: the first launch applies the
/// epilogue, the others add to the stored result, and the last (`k_end == k`) applies the
/// operands' `finish`. Without a cap, or with K below it, this is one launch.
fn launch_k_chunks<P: KernelParams>(
    ctx: &GpuContext,
    op: &'static str,
    kernel: Kernel,
    k: usize,
    params: impl Fn(u32, u32) -> P,
    bufs: &[&wgpu::Buffer],
    groups: [u32; 3],
) -> Result<()> {
    let step = ctx.loop_budget().map_or(usize::MAX, |b| match kernel {
        Kernel::Matmul(_, _, tile) => tile.k_per_launch(b, false),
        Kernel::MatmulVec4 { tile, .. } => tile.k_per_launch(b, true),
        _ => b,
    });
    let mut k0 = 0;
    loop {
        let k1 = k0 + step.min(k - k0);
        launch(ctx, op, kernel, &params(u(k0), u(k1)), &[], bufs, groups)?;
        k0 = k1;
        if k0 >= k {
            return Ok(());
        }
    }
}
