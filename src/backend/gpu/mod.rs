//! The wgpu backend: kernel launchers over pooled buffers. Every launcher takes strided inputs and
//! writes a fresh contiguous output, except `copy_into` and the in-place fill.
//!
//! One [`GpuContext`] per adapter holds the device, the queue, the buffer pool, the pipeline
//! cache and the batched command encoder; [`context`] creates it on first use (natively) and
//! [`init_gpu`] is its async form (the browser). Dispatches are recorded, not run: they are
//! submitted in batches, and a readback (`to_vec`, `item`) or [`GpuContext::synchronize`] waits
//! for them.
//!
//! ```
//! use wgtorch::backend::gpu;
//! use wgtorch::{Device, Tensor};
//! match gpu::context(0) {
//!     Ok(ctx) => {
//!         let x = Tensor::ones([1024], &Device::Gpu(0))?;
//!         assert_eq!((&x * 2.0).sum_all()?.item()?, 2048.0);
//!         let stats = ctx.stats();
//!         assert!(stats.dispatches > 0 && stats.peak_bytes >= 4096);
//!         println!("{}: {stats:?}", ctx.describe());
//!     }
//!     Err(e) => println!("no GPU here: {e}"), // an Error naming why (no adapter, limits, ...)
//! }
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod adapter;
#[cfg(not(target_arch = "wasm32"))]
mod background;
mod capabilities;
mod checks;
mod context;
mod conv;
pub(crate) mod fused;
mod index;
pub mod kernels;
mod loss;
mod matmul;
mod oneshot;
mod params;
mod sort;
mod timing;
mod transfer;
pub mod tune;

pub(crate) use context::contexts;
pub use context::{context, init_gpu, GpuBuffer, GpuContext, GpuStats};
pub(crate) use conv::{
    col2im, conv2d, conv2d_backward_input, conv2d_backward_weight, im2col, max_pool,
    max_pool_backward,
};
use kernels::{GpuType, Kernel};
use params::*;
pub(crate) use sort::argsort_rows;
pub(crate) use transfer::{download, upload};
use transfer::{narrow_i64, via_host};
pub(crate) use {
    index::{gather, scatter_add},
    loss::{nll_rows, nll_rows_backward},
    matmul::matmul,
};

use crate::backend::cpu::CpuStorage;
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::shape::Layout;
use crate::{DType, Device, Error, Result};
use std::sync::Arc;

/// A tensor's storage on a GPU: a pooled buffer of 4-byte elements.
#[derive(Clone, Debug)]
pub struct GpuStorage {
    pub(crate) buf: Arc<GpuBuffer>,
    pub(crate) dtype: DType,
}

const WG: usize = 256;

/// Refuse a launch whose invocations would each loop `iters` times in all (every loop counted),
/// past the adapter's loop cap (llvmpipe ends the loops there, silently). For the loops no
/// launcher splits: the window loops of max pooling and col2im.
pub(super) fn check_loop(
    ctx: &GpuContext,
    op: &'static str,
    what: String,
    iters: usize,
) -> Result<()> {
    match ctx.loop_cap {
        Some(cap) if iters > cap as usize => Err(Error::GpuLimit {
            op,
            what,
            needed: iters as u64,
            limit: cap as u64,
            limit_name: "llvmpipe loop iterations per invocation",
            adapter: ctx.adapter_name().to_string(),
        }),
        _ => Ok(()),
    }
}

/// The launch grid of a 1-D kernel over `n` elements (`GpuContext::dispatch` splits it when it
/// passes the adapter's per-dimension limit).
fn groups(n: usize) -> [u32; 3] {
    [u(n.div_ceil(WG)), 1, 1]
}

/// Refuse, before anything is allocated on the host, a tensor of `n` elements of `dtype` that no
/// buffer of GPU `device` can hold (CPU devices pass). The creation paths that build their values
/// on the host (rand, randn, arange, eye) call it first.
pub(crate) fn check_alloc(device: &Device, op: &'static str, n: usize, dtype: DType) -> Result<()> {
    let Device::Gpu(ordinal) = *device else {
        return Ok(());
    };
    let ctx = context(ordinal)?;
    let t = gpu_type(&ctx, ordinal, dtype)?;
    ctx.check_size(op, bytes_of(t, n)).map(|_| ())
}

/// Bytes of `n` elements of `t`, saturating (a size past u64 is refused as too large anyway).
fn bytes_of(t: GpuType, n: usize) -> u64 {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    match t {
        GpuType::F16 | GpuType::F16Packed | GpuType::BF16Packed => {
            n.saturating_mul(2).saturating_add(3) / 4 * 4
        }
        _ => n.saturating_mul(4),
    }
}

/// The GPU storage type of `dtype`, or the error naming the device and adapter.
pub(crate) fn gpu_type(ctx: &GpuContext, ordinal: usize, dtype: DType) -> Result<GpuType> {
    GpuType::of(dtype, ctx.native_f16()).ok_or_else(|| Error::DTypeNotOnDevice {
        dtype,
        device: Device::Gpu(ordinal),
        adapter: ctx.adapter_name().to_string(),
    })
}

impl GpuStorage {
    fn ctx(&self) -> &Arc<GpuContext> {
        &self.buf.ctx
    }
    fn raw(&self) -> &wgpu::Buffer {
        self.buf.raw()
    }
    fn ty(&self) -> GpuType {
        GpuType::of(self.dtype, self.ctx().native_f16()).expect("GPU storage holds a GPU dtype")
    }
}

/// Merge dimensions that are contiguous in every one of `strides` (fewer index computations in
/// the kernels) and drop size-1 dimensions.
fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut sh: Vec<usize> = Vec::new();
    let mut st: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let mergeable = !sh.is_empty()
            && strides
                .iter()
                .enumerate()
                .all(|(k, s)| *st[k].last().unwrap() == s[d] * shape[d]);
        if mergeable {
            let last = sh.len() - 1;
            sh[last] *= shape[d];
            for (k, s) in strides.iter().enumerate() {
                *st[k].last_mut().unwrap() = s[d];
            }
        } else {
            sh.push(shape[d]);
            for (k, s) in strides.iter().enumerate() {
                st[k].push(s[d]);
            }
        }
    }
    if sh.is_empty() {
        sh.push(1);
        for s in st.iter_mut() {
            s.push(0);
        }
    }
    (sh, st)
}

/// A size or index as a kernel parameter word. Every one the launchers pass is bounded by a
/// buffer's element count (`GpuContext::check_size` keeps buffers under 4 GiB) or checked first
/// (a matmul's K, whose operands may be broadcast), so the conversion is exact.
fn u(v: usize) -> u32 {
    v as u32
}

/// Create an output buffer of `n` elements.
fn output(ctx: &Arc<GpuContext>, op: &'static str, n: usize, dtype: DType) -> Result<GpuStorage> {
    let t = GpuType::of(dtype, ctx.native_f16()).ok_or_else(|| Error::DTypeNotOnDevice {
        dtype,
        device: Device::Gpu(ctx.ordinal),
        adapter: ctx.adapter_name().to_string(),
    })?;
    let buf = Arc::new(ctx.alloc(op, bytes_of(t, n))?);
    Ok(GpuStorage { buf, dtype })
}

/// Run kernel `k` over a grid of `g` workgroups with its parameter block `p` (the type its WGSL
/// declares, [`Kernel::params`]; another is refused) followed by the `tail` words, and `bufs`
/// bound from 1.
fn launch<P: KernelParams>(
    ctx: &GpuContext,
    op: &'static str,
    k: Kernel,
    p: &P,
    tail: &[u32],
    bufs: &[&wgpu::Buffer],
    g: [u32; 3],
) -> Result<()> {
    let key = k.key();
    let want = k.params().name;
    if want != P::NAME {
        return Err(Error::Gpu {
            op,
            adapter: ctx.adapter_name().to_string(),
            msg: format!(
                "internal error: kernel {key} reads {want}, was launched with {}",
                P::NAME
            ),
        });
    }
    let pipeline = ctx.pipeline(op, &key, || k.source())?;
    ctx.dispatch(op, &key, &pipeline, &params::words(p, tail), bufs, g)
}

/// A new buffer of `n` copies of `value`.
pub(crate) fn full(
    ctx: &Arc<GpuContext>,
    ordinal: usize,
    n: usize,
    value: f64,
    dtype: DType,
) -> Result<GpuStorage> {
    let t = gpu_type(ctx, ordinal, dtype)?;
    if dtype == DType::I64 && (value < i32::MIN as f64 || value > i32::MAX as f64) {
        narrow_i64("full", &[value as i64])?;
    }
    let out = output(ctx, "full", n, dtype)?;
    let bits = match t.compute() {
        "i32" => (value as i32) as u32,
        "u32" => (value != 0.0) as u32,
        _ => (value as f32).to_bits(),
    };
    let p = FillParams { n: u(n), bits };
    launch(
        ctx,
        "full",
        Kernel::Fill(t),
        &p,
        &[],
        &[out.raw()],
        groups(n),
    )?;
    Ok(out)
}

/// True when coalesced views are all one contiguous run starting at 16-byte-aligned offsets: the
/// vec4 elementwise kernels apply (their output buffers are padded to 16 bytes by the pool).
fn vec4_ready(shape: &[usize], strides: &[Vec<usize>], offsets: &[usize]) -> bool {
    shape.len() == 1
        && strides.iter().all(|s| s[0] == 1)
        && offsets.iter().all(|o| o % 4 == 0)
        && shape[0] >= 4
}

pub(crate) fn unary(op: UnaryOp, x: &GpuStorage, l: &Layout) -> Result<GpuStorage> {
    let ctx = x.ctx();
    let n = l.numel();
    let out = output(ctx, op.name(), n, x.dtype)?;
    let (sh, st) = coalesce(&l.shape, &[&l.strides]);
    let [p0, p1] = op.params();
    if x.ty() == GpuType::F32 && vec4_ready(&sh, &st, &[l.offset]) {
        let p = UnaryVec4Params {
            n4: u(n.div_ceil(4)),
            n: u(n),
            p0,
            p1,
            offset4: u(l.offset / 4),
        };
        let g = groups(n.div_ceil(4));
        let k = Kernel::UnaryVec4(op);
        launch(ctx, op.name(), k, &p, &[], &[x.raw(), out.raw()], g)?;
        return Ok(out);
    }
    let p = UnaryParams {
        n: u(n),
        ndim: u(sh.len()),
        p0,
        p1,
        offset: u(l.offset),
    };
    let k = Kernel::Unary(op, x.ty());
    let bufs = [x.raw(), out.raw()];
    launch(
        ctx,
        op.name(),
        k,
        &p,
        &strided_tail(&sh, &st),
        &bufs,
        groups(n),
    )?;
    Ok(out)
}

pub(crate) fn binary(
    op: BinaryOp,
    a: &GpuStorage,
    al: &Layout,
    b: &GpuStorage,
    bl: &Layout,
) -> Result<GpuStorage> {
    if a.dtype == DType::I64 && matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) {
        return via_host(op.name(), &[(a, al), (b, bl)], |h| {
            Ok(crate::backend::cpu::binary(op, &h[0], al, &h[1], bl))
        });
    }
    let ctx = a.ctx();
    let n = al.numel();
    let out_dtype = if op.is_comparison() {
        DType::Bool
    } else {
        a.dtype
    };
    let out = output(ctx, op.name(), n, out_dtype)?;
    let (sh, st) = coalesce(&al.shape, &[&al.strides, &bl.strides]);
    if a.ty() == GpuType::F32 && vec4_ready(&sh, &st, &[al.offset, bl.offset]) {
        let p = BinaryVec4Params {
            n4: u(n.div_ceil(4)),
            n: u(n),
            off_a4: u(al.offset / 4),
            off_b4: u(bl.offset / 4),
        };
        let g = groups(n.div_ceil(4));
        let bufs = [a.raw(), b.raw(), out.raw()];
        launch(ctx, op.name(), Kernel::BinaryVec4(op), &p, &[], &bufs, g)?;
        return Ok(out);
    }
    let mut p = BinaryParams {
        n: u(n),
        ndim: u(sh.len()),
        off_a: u(al.offset),
        off_b: u(bl.offset),
        check: IndexCheck::default(),
    };
    let tail = strided_tail(&sh, &st);
    let kernel = Kernel::Binary(op, a.ty());
    if op.divides_integers() && !a.dtype.is_float() {
        // A zero divisor is recorded on the device and reported at the thread's next readback
        // as PyTorch's ZeroDivisionError (checks.rs).
        ctx.checks.checked(op.name(), |flag, check| {
            p.check = check.into();
            let bufs = [a.raw(), b.raw(), out.raw(), flag];
            launch(ctx, op.name(), kernel, &p, &tail, &bufs, groups(n))
        })?;
        return Ok(out);
    }
    let bufs = [a.raw(), b.raw(), out.raw()];
    launch(ctx, op.name(), kernel, &p, &tail, &bufs, groups(n))?;
    Ok(out)
}

pub(crate) fn where_cond(
    c: &GpuStorage,
    cl: &Layout,
    a: &GpuStorage,
    al: &Layout,
    b: &GpuStorage,
    bl: &Layout,
) -> Result<GpuStorage> {
    let ctx = a.ctx();
    let n = al.numel();
    let out = output(ctx, "where", n, a.dtype)?;
    let (sh, st) = coalesce(&al.shape, &[&cl.strides, &al.strides, &bl.strides]);
    let p = WhereParams {
        n: u(n),
        ndim: u(sh.len()),
        off_c: u(cl.offset),
        off_a: u(al.offset),
        off_b: u(bl.offset),
    };
    let bufs = [c.raw(), a.raw(), b.raw(), out.raw()];
    let k = Kernel::Where(a.ty());
    launch(
        ctx,
        "where",
        k,
        &p,
        &strided_tail(&sh, &st),
        &bufs,
        groups(n),
    )?;
    Ok(out)
}

/// The tail words of the strided kernels: the coalesced shape, then each operand's strides.
fn strided_tail(shape: &[usize], strides: &[Vec<usize>]) -> Vec<u32> {
    let all = std::iter::once(shape).chain(strides.iter().map(|s| &s[..]));
    all.flat_map(|v| v.iter().map(|&x| u(x))).collect()
}

/// The copy kernel's parameters and tail for `n` elements from `sl` to `dl`.
fn copy_params(n: usize, sl: &Layout, dl: &Layout) -> (CopyParams, Vec<u32>) {
    let (sh, st) = coalesce(&sl.shape, &[&sl.strides, &dl.strides]);
    let p = CopyParams {
        n: u(n),
        ndim: u(sh.len()),
        off_src: u(sl.offset),
        off_dst: u(dl.offset),
    };
    (p, strided_tail(&sh, &st))
}

/// Copy a strided view into a new contiguous buffer, converting to `to`.
pub(crate) fn cast(x: &GpuStorage, l: &Layout, ordinal: usize, to: DType) -> Result<GpuStorage> {
    if to == DType::I64 && x.dtype.is_float() {
        return via_host("to_dtype", &[(x, l)], |h| {
            Ok(crate::backend::cpu::cast(&h[0], l, to))
        });
    }
    let ctx = x.ctx();
    let t = gpu_type(ctx, ordinal, to)?;
    let n = l.numel();
    let out = output(ctx, "contiguous", n, to)?;
    let (p, tail) = copy_params(n, l, &Layout::contiguous(&l.shape));
    let k = Kernel::Copy(x.ty(), t);
    let bufs = [x.raw(), out.raw()];
    launch(ctx, "contiguous", k, &p, &tail, &bufs, groups(n))?;
    Ok(out)
}

/// Write `src` (strided) into the strided positions `dl` of `dst`.
pub(crate) fn copy_into(
    dst: &GpuStorage,
    dl: &Layout,
    src: &GpuStorage,
    sl: &Layout,
) -> Result<()> {
    let n = dl.numel();
    let from = Layout {
        shape: dl.shape.clone(),
        ..sl.clone()
    };
    let (p, tail) = copy_params(n, &from, dl);
    let k = Kernel::Copy(src.ty(), dst.ty());
    let bufs = [src.raw(), dst.raw()];
    launch(dst.ctx(), "copy_", k, &p, &tail, &bufs, groups(n))
}

/// The workgroup-per-row reduction: on subgroup operations where the context uses them.
fn reduce_kernel(ctx: &GpuContext, op: ReduceOp, t: GpuType) -> Kernel {
    if ctx.subgroups() {
        Kernel::ReduceSubgroup(op, t)
    } else {
        Kernel::Reduce(op, t)
    }
}

pub(crate) fn reduce_rows(
    op: ReduceOp,
    x: &GpuStorage,
    rows: usize,
    n: usize,
) -> Result<GpuStorage> {
    if x.dtype == DType::I64 && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
        let l = Layout::contiguous(&[rows, n]);
        return via_host(op.name(), &[(x, &l)], |h| {
            Ok(crate::backend::cpu::reduce_rows(op, &h[0], rows, n))
        });
    }
    let ctx = x.ctx();
    let out_dtype = op.out_dtype(x.dtype);
    let out = output(ctx, op.name(), rows, out_dtype)?;
    if rows == 0 {
        return Ok(out);
    }
    // Long rows of value reductions go in two passes: chunks of CHUNK, then the partials.
    let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
    if !arg && n > 2 * CHUNK {
        let k = n.div_ceil(CHUNK);
        let part = output(ctx, op.name(), rows * k, out_dtype)?;
        let p = ReduceParams {
            total: u(rows * k),
            chunk: u(CHUNK),
            k: u(k),
            n: u(n),
        };
        let kernel = reduce_kernel(ctx, op, x.ty());
        let bufs = [x.raw(), part.raw()];
        launch(ctx, op.name(), kernel, &p, &[], &bufs, [u(rows * k), 1, 1])?;
        return reduce_rows(op, &part, rows, k);
    }
    if row_per_invocation(ctx, rows, n, 1) {
        let k = Kernel::ReduceSmall(op, x.ty());
        let p = ReduceSmallParams {
            rows: u(rows),
            n: u(n),
        };
        launch(
            ctx,
            op.name(),
            k,
            &p,
            &[],
            &[x.raw(), out.raw()],
            groups(rows),
        )?;
        return Ok(out);
    }
    let p = ReduceParams {
        total: u(rows),
        chunk: u(n),
        k: 1,
        n: u(n),
    };
    let k = reduce_kernel(ctx, op, x.ty());
    launch(
        ctx,
        op.name(),
        k,
        &p,
        &[],
        &[x.raw(), out.raw()],
        [u(rows), 1, 1],
    )?;
    Ok(out)
}

/// Row length from which value reductions go in two passes ([`reduce_rows`]): chunks of this
/// many, then the partials.
const CHUNK: usize = 4096;

/// Whether `rows` rows of `n` go one invocation per row, in a kernel that reads the row `passes`
/// times: short rows, and on CPU adapters (where barriers are costly and invocations run as SIMD
/// lanes) any row count that fills the lanes. Not past the adapter's loop cap, which counts every
/// loop of an invocation together (llvmpipe ends a shader's loops at 65,535 iterations in all:
/// the rest of the row was silently left out); the workgroup tree loops at most CHUNK / 256 times.
fn row_per_invocation(ctx: &GpuContext, rows: usize, n: usize, passes: usize) -> bool {
    let fits = ctx
        .loop_budget()
        .is_none_or(|b| n.checked_mul(passes).is_some_and(|total| total <= b));
    n <= 64 || (ctx.is_cpu_adapter() && rows >= 16 && fits)
}

/// Softmax (log-softmax when `log`) of each row of a contiguous f32 `[rows, n]` input in one
/// kernel, where [`row_per_invocation`] takes the rows; `None` elsewhere (the caller composes it
/// from reductions and elementwise ops, five launches more).
pub(crate) fn softmax_rows(
    x: &GpuStorage,
    rows: usize,
    n: usize,
    log: bool,
) -> Result<Option<GpuStorage>> {
    if !softmax_takes(x, rows, n, 3) {
        return Ok(None);
    }
    let ctx = x.ctx();
    let op = if log { "log_softmax" } else { "softmax" };
    let out = output(ctx, op, rows * n, x.dtype)?;
    let p = ReduceSmallParams {
        rows: u(rows),
        n: u(n),
    };
    let k = Kernel::SoftmaxRows { log };
    launch(ctx, op, k, &p, &[], &[x.raw(), out.raw()], groups(rows))?;
    Ok(Some(out))
}

/// The input gradient of [`softmax_rows`] from its output `y` and the output gradient `g` (both
/// contiguous f32 `[rows, n]`) in one kernel, or `None` where the forward kernel would not run.
pub(crate) fn softmax_backward_rows(
    y: &GpuStorage,
    g: &GpuStorage,
    rows: usize,
    n: usize,
    log: bool,
) -> Result<Option<GpuStorage>> {
    if g.dtype != DType::F32 || !softmax_takes(y, rows, n, 2) {
        return Ok(None);
    }
    let ctx = y.ctx();
    let op = if log {
        "log_softmax_backward"
    } else {
        "softmax_backward"
    };
    let out = output(ctx, op, rows * n, y.dtype)?;
    let p = ReduceSmallParams {
        rows: u(rows),
        n: u(n),
    };
    let k = Kernel::SoftmaxBackwardRows { log };
    let bufs = [y.raw(), g.raw(), out.raw()];
    launch(ctx, op, k, &p, &[], &bufs, groups(rows))?;
    Ok(Some(out))
}

/// Whether the fused softmax kernels take `rows` f32 rows of `n` of `x`'s dtype, reading each
/// row `passes` times (3 forward, 2 backward): one invocation per row, and rows no longer than
/// those [`reduce_rows`] sums in one pass (longer ones the composite sums in chunks).
pub(crate) fn softmax_takes(x: &GpuStorage, rows: usize, n: usize, passes: usize) -> bool {
    x.dtype == DType::F32
        && rows > 0
        && (1..=2 * CHUNK).contains(&n)
        && row_per_invocation(x.ctx(), rows, n, passes)
}

pub(crate) fn cumsum_rows(x: &GpuStorage, rows: usize, n: usize) -> Result<GpuStorage> {
    if x.dtype == DType::I64 {
        let l = Layout::contiguous(&[rows, n]);
        return via_host("cumsum", &[(x, &l)], |h| {
            Ok(crate::backend::cpu::cumsum_rows(&h[0], rows, n))
        });
    }
    let ctx = x.ctx();
    let out = output(ctx, "cumsum", rows * n, x.dtype)?;
    // Rows past the adapter's loop cap run in column chunks, each carrying the previous sum.
    let step = ctx.loop_budget().unwrap_or(usize::MAX);
    let mut j0 = 0;
    while j0 < n {
        let j1 = j0 + step.min(n - j0);
        let p = CumsumParams {
            rows: u(rows),
            n: u(n),
            j0: u(j0),
            j1: u(j1),
        };
        let k = Kernel::Cumsum(x.ty());
        launch(
            ctx,
            "cumsum",
            k,
            &p,
            &[],
            &[x.raw(), out.raw()],
            groups(rows),
        )?;
        j0 = j1;
    }
    Ok(out)
}

/// The first GPU for a unit test: `None` without one, and a test failure without one under `CI`
/// (where lavapipe must be found), as `tests/common` does for the integration tests.
#[cfg(test)]
pub(crate) fn test_context() -> Option<Arc<GpuContext>> {
    match context(0) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var_os("CI").is_some() => panic!("no GPU adapter under CI: {e}"),
        Err(_) => None,
    }
}

/// Fused SGD step in place on `p` and, with momentum, its buffer `buf` (all f32, `n` elements);
/// `h` as [`cpu::sgd`](crate::backend::cpu::sgd) takes it.
pub(crate) fn sgd(
    p: &GpuStorage,
    g: &GpuStorage,
    buf: Option<&GpuStorage>,
    n: usize,
    h: crate::backend::SgdStep,
) -> Result<()> {
    let params = SgdParams {
        n: u(n),
        lr: h.lr,
        momentum: h.momentum,
        undamped: h.undamped,
        weight_decay: h.weight_decay,
        nesterov: h.nesterov as u32,
        first: h.first as u32,
    };
    let mut bufs = vec![p.raw(), g.raw()];
    bufs.extend(buf.map(|b| b.raw()));
    let k = Kernel::SgdF32 {
        momentum: buf.is_some(),
    };
    launch(p.ctx(), "sgd", k, &params, &[], &bufs, groups(n))
}

/// Fused Adam/AdamW step in place on `p`, `m`, `v` (all f32, `n` elements). `h` holds lr, beta1,
/// beta2, eps, the two bias corrections and the weight decay; `decoupled` selects AdamW.
pub(crate) fn adam(
    p: &GpuStorage,
    g: &GpuStorage,
    m: &GpuStorage,
    v: &GpuStorage,
    n: usize,
    h: [f32; 7],
    decoupled: bool,
) -> Result<()> {
    let [lr, beta1, beta2, eps, bias_correction1, bias_correction2, weight_decay] = h;
    let params = AdamParams {
        n: u(n),
        lr,
        beta1,
        beta2,
        eps,
        bias_correction1,
        bias_correction2,
        weight_decay,
        decoupled: decoupled as u32,
    };
    let bufs = [p.raw(), g.raw(), m.raw(), v.raw()];
    launch(
        p.ctx(),
        "adam",
        Kernel::AdamF32,
        &params,
        &[],
        &bufs,
        groups(n),
    )
}
