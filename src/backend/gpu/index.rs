//! The GPU index kernels: gather and scatter_add along a dimension, their indices checked on the
//! device (`checks.rs`).

use super::kernels::Kernel;
use super::params::{GatherParams, ScatterAddParams, ScatterAddSortedParams};
use super::{groups, launch, output, u, via_host, GpuStorage};
use crate::shape::{contiguous_strides, Layout};
use crate::{DType, Result};

/// `out = x.gather(dim, idx)` for `op` (the name an out-of-range index is reported under).
pub(crate) fn gather(
    op: &'static str,
    x: &GpuStorage,
    xshape: &[usize],
    dim: usize,
    idx: &GpuStorage,
    il: &Layout,
) -> Result<GpuStorage> {
    let ctx = x.ctx();
    let n = il.numel();
    let out = output(ctx, op, n, x.dtype)?;
    if n == 0 {
        return Ok(out);
    }
    let nd = xshape.len().max(1);
    let pad = |v: &[usize]| {
        if v.is_empty() {
            vec![1u32]
        } else {
            v.iter().map(|&x| u(x)).collect()
        }
    };
    ctx.checks.checked(op, |flag, check| {
        let p = GatherParams {
            n: u(n),
            ndim: u(nd),
            dim: u(dim),
            off_idx: u(il.offset),
            check: check.into(),
        };
        let mut tail = pad(xshape);
        tail.extend(pad(&contiguous_strides(xshape)));
        tail.extend(pad(&il.shape));
        tail.extend(if il.strides.is_empty() {
            vec![0]
        } else {
            il.strides.iter().map(|&x| u(x)).collect()
        });
        let bufs = [x.raw(), idx.raw(), out.raw(), flag];
        launch(ctx, op, Kernel::Gather(x.ty()), &p, &tail, &bufs, groups(n))
    })?;
    Ok(out)
}

/// `base.scatter_add(dim, idx, src)` for `op` (the name an out-of-range index is reported under).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_add(
    op: &'static str,
    base: &GpuStorage,
    bshape: &[usize],
    dim: usize,
    idx: &GpuStorage,
    il: &Layout,
    src: &GpuStorage,
    sl: &Layout,
) -> Result<GpuStorage> {
    if base.dtype == DType::I64 {
        let bl = Layout::contiguous(bshape);
        return via_host(op, &[(base, &bl), (idx, il), (src, sl)], |h| {
            let mut out = h[0].clone();
            crate::backend::cpu::scatter_add_any(op, &mut out, bshape, dim, &h[1], il, &h[2], sl)?;
            Ok(out)
        });
    }
    let ctx = base.ctx();
    let n: usize = bshape.iter().product();
    let out = output(ctx, op, n, base.dtype)?;
    if n == 0 {
        // No base element to visit the indices from: dimension `dim` is empty (the others bound
        // the index's), so every index is out of range. A gather with them records the first.
        if il.numel() > 0 {
            gather(op, base, bshape, dim, idx, il)?;
        }
        return Ok(out);
    }
    let nd = bshape.len().max(1);
    let pad = |v: &[usize], d: usize| {
        if v.is_empty() {
            vec![d as u32]
        } else {
            v.iter().map(|&x| u(x)).collect()
        }
    };
    let kn = il.shape.get(dim).copied().unwrap_or(1);
    // Every line off `dim` reads the same index (strides 0 there): scattered through its sort.
    let broadcast = (il.shape.iter().zip(&il.strides).enumerate())
        .all(|(d, (&len, &stride))| d == dim || len == 1 || stride == 0);
    let bindings = ctx.limits.max_storage_buffers_per_shader_stage;
    // (An index expanded to zero lines off `dim` has nothing to scatter or check.)
    if broadcast && kn >= SORTED_FROM && il.numel() > 0 && bindings >= SORTED_BINDINGS {
        return scatter_add_sorted(op, base, bshape, dim, idx, il, src, sl, out);
    }
    ctx.checks.checked(op, |flag, check| {
        let mut tail = pad(bshape, 1);
        tail.extend(pad(&il.shape, 1));
        tail.extend(pad(&il.strides, 0));
        tail.extend(pad(&sl.strides, 0));
        let at = |v: &[usize], d: usize| v.get(dim).copied().unwrap_or(d);
        let (ist, sst) = (at(&il.strides, 0), at(&sl.strides, 0));
        in_chunks(op, base, &out, n, kn, |from, dst, k0, k1| {
            let p = ScatterAddParams {
                n: u(n),
                ndim: u(nd),
                dim: u(dim),
                off_idx: u(il.offset + k0 * ist),
                off_src: u(sl.offset + k0 * sst),
                len_dim: u(k1 - k0),
                check: check.into(),
            };
            let bufs = [from.raw(), idx.raw(), src.raw(), dst.raw(), flag];
            let kernel = Kernel::ScatterAdd(base.ty());
            launch(ctx, op, kernel, &p, &tail, &bufs, groups(n))
        })
    })?;
    Ok(out)
}

/// Index lengths along `dim` from which an index broadcast off `dim` is scattered through its
/// stable sort ([`scatter_add_sorted`]), each base element then visiting only its own entries,
/// rather than by every base element reading the whole index: the embedding gradient of a
/// word-LM step (10,000 × 200 weights, 700 tokens) took 14.4 s so on lavapipe (Zen 3), 0.46 s
/// sorted. Shorter indices keep the one-pass kernel, which needs none of the sort's launches
/// (a round figure, not tuned).
const SORTED_FROM: usize = 32;

/// Storage buffers `scatter_add_sorted.wgsl` binds: its parameters, five tensors and the
/// index-check flag (an adapter with fewer takes the one-pass kernel).
const SORTED_BINDINGS: u32 = 7;

/// `scatter_add` of an index that is the same for every line off `dim` (shape `il`, strides 0 or
/// length 1 off `dim`), written into `out`: the index line's stable argsort, then one invocation
/// per base element summing the sources of its run of the sorted index in position order (the
/// one-pass kernel's sum, bit for bit in f32 and i32; half types round at each chunk's end, as
/// there, but chunks of sorted entries rather than of positions). Of several out-of-range
/// indices it reports the smallest if negative, else the largest (the CPU: the first).
#[allow(clippy::too_many_arguments)]
fn scatter_add_sorted(
    op: &'static str,
    base: &GpuStorage,
    bshape: &[usize],
    dim: usize,
    idx: &GpuStorage,
    il: &Layout,
    src: &GpuStorage,
    sl: &Layout,
    out: GpuStorage,
) -> Result<GpuStorage> {
    let ctx = base.ctx();
    let n: usize = bshape.iter().product();
    let (kn, ist) = (il.shape[dim], il.strides[dim]);
    // The sort reads its keys from the buffer's start, contiguous.
    let line = Layout {
        shape: vec![kn],
        strides: vec![ist],
        offset: il.offset,
    };
    let copy;
    let keys = if ist == 1 && il.offset == 0 {
        idx
    } else {
        copy = super::cast(idx, &line, ctx.ordinal, idx.dtype)?;
        &copy
    };
    let perm = super::sort::argsort_rows(keys, 1, kn, false)?;
    let mut tail: Vec<u32> = bshape.iter().map(|&x| u(x)).collect();
    tail.extend(il.shape.iter().map(|&x| u(x)));
    tail.extend(sl.strides.iter().map(|&x| u(x)));
    ctx.checks.checked(op, |flag, check| {
        in_chunks(op, base, &out, n, kn, |from, dst, t0, t1| {
            let p = ScatterAddSortedParams {
                n: u(n),
                ndim: u(bshape.len()),
                dim: u(dim),
                off_idx: u(il.offset),
                idx_stride: u(ist),
                off_src: u(sl.offset),
                t0: u(t0),
                t1: u(t1),
                check: check.into(),
            };
            let bufs = [
                from.raw(),
                idx.raw(),
                perm.raw(),
                src.raw(),
                dst.raw(),
                flag,
            ];
            let kernel = Kernel::ScatterAddSorted(base.ty());
            launch(ctx, op, kernel, &p, &tail, &bufs, groups(n))
        })
    })?;
    Ok(out)
}

/// Runs `launch(from, dst, k0, k1)` over `0..len` in chunks within the adapter's loop cap, each
/// adding its chunk's sources to the previous launch's result (the first reads `base`, of `n`
/// elements), the last writing `out`.
fn in_chunks(
    op: &'static str,
    base: &GpuStorage,
    out: &GpuStorage,
    n: usize,
    len: usize,
    mut launch: impl FnMut(&GpuStorage, &GpuStorage, usize, usize) -> Result<()>,
) -> Result<()> {
    let ctx = base.ctx();
    let step = ctx.loop_budget().unwrap_or(usize::MAX);
    let mut prev: Option<GpuStorage> = None;
    let mut k0 = 0;
    loop {
        let k1 = k0 + step.min(len - k0);
        let part = if k1 < len {
            Some(output(ctx, op, n, base.dtype)?)
        } else {
            None
        };
        let dst = part.as_ref().unwrap_or(out);
        launch(prev.as_ref().unwrap_or(base), dst, k0, k1)?;
        if part.is_none() {
            return Ok(());
        }
        prev = part;
        k0 = k1;
    }
}
