//! GPU matrix products: the batched strided matmul (vec4 kernels for aligned f32 layouts, the
//! strided GEMM otherwise), and the dispatch helpers the convolution GEMMs share.

use super::kernels::{Gemm, GpuType, Kernel};
use super::{full, launch, output, u, GpuContext, GpuStorage};
use crate::shape::Layout;
use crate::{Error, Result};

/// Batched `a @ b` with `a` as `[B, M, K]` and `b` as `[B, K, N]` (any strides, batch stride 0
/// for broadcast) into a contiguous `[B, M, N]`.
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
    // The vec4 kernel on a CPU adapter loops K / 4 times in one launch: past the adapter's loop
    // cap the strided GEMM (which splits K) takes over.
    let vec4_fits = !ctx.is_cpu_adapter() || ctx.loop_budget().is_none_or(|b| k.div_ceil(4) <= b);
    let vec4 = vec4_layouts(al, bl).filter(|_| a.ty() == GpuType::F32 && vec4_fits);
    let meta = [
        u(m),
        u(n),
        u(k),
        u(al.offset),
        u(al.strides[0]),
        u(al.strides[1]),
        u(al.strides[2]),
        u(bl.offset),
        u(bl.strides[0]),
        u(bl.strides[1]),
        u(bl.strides[2]),
    ];
    match vec4 {
        Some((a_t, b_t)) if ctx.is_cpu_adapter() => {
            let g = [u(n.div_ceil(32)), u(m.div_ceil(32)), u(bs)];
            let kernel = Kernel::MatmulVec4 { a_t, b_t };
            launch(ctx, "matmul", kernel, &meta, &bufs, g)?;
        }
        Some((a_t, b_t)) => {
            let g = [u(n.div_ceil(64)), u(m.div_ceil(64)), u(bs)];
            let kernel = Kernel::MatmulTiledVec4 { a_t, b_t };
            launch(ctx, "matmul", kernel, &meta, &bufs, g)?;
        }
        None => gemm(
            ctx,
            "matmul",
            Gemm::Strided,
            a.ty(),
            [m, n, bs],
            &meta,
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

/// Dispatch one GEMM kernel over `[M, N, batches]` outputs: the barrier-free register-blocked
/// kernel on CPU adapters, the shared-memory tiles on real GPUs. `meta` starts with
/// `[M, N, K]`; the grid (columns, rows, batches) may pass the per-dimension limit (see
/// `GpuContext::dispatch`). Where the adapter caps an invocation's loop iterations (llvmpipe),
/// the register-blocked kernel runs K in chunks below the cap, one launch each, every launch
/// after the first adding to the stored result (sizes below the cap take one launch).
pub(super) fn gemm(
    ctx: &GpuContext,
    op: &'static str,
    kind: Gemm,
    t: GpuType,
    [m, n, batches]: [usize; 3],
    meta: &[u32],
    bufs: &[&wgpu::Buffer],
) -> Result<()> {
    if !ctx.is_cpu_adapter() {
        let groups = [u(n.div_ceil(64)), u(m.div_ceil(64)), u(batches)];
        return launch(ctx, op, Kernel::Matmul(t, kind), meta, bufs, groups);
    }
    let groups = [u(n.div_ceil(32)), u(m.div_ceil(32)), u(batches)];
    let k = meta[2] as usize;
    let step = ctx.loop_budget().unwrap_or(usize::MAX);
    let mut words = meta.to_vec();
    words.extend([0, 0]);
    let last = words.len() - 1;
    let mut k0 = 0;
    loop {
        let k1 = k0 + step.min(k - k0);
        (words[last - 1], words[last]) = (u(k0), u(k1));
        launch(ctx, op, Kernel::MatmulDirect(t, kind), &words, bufs, groups)?;
        k0 = k1;
        if k0 >= k {
            return Ok(());
        }
    }
}
