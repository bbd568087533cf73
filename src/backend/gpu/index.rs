//! The GPU index kernels: gather and scatter_add along a dimension, their indices checked on the
//! device (`checks.rs`).

use super::kernels::Kernel;
use super::params::{GatherParams, ScatterAddParams};
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
    ctx.checks.checked(op, |flag, check| {
        let mut tail = pad(bshape, 1);
        tail.extend(pad(&il.shape, 1));
        tail.extend(pad(&il.strides, 0));
        tail.extend(pad(&sl.strides, 0));
        // Each output element loops over the index along `dim`: past the adapter's loop cap,
        // in chunks, each launch adding its chunk to the previous launch's result.
        let at = |v: &[usize], d: usize| v.get(dim).copied().unwrap_or(d);
        let (kn, ist, sst) = (at(&il.shape, 1), at(&il.strides, 0), at(&sl.strides, 0));
        let step = ctx.loop_budget().unwrap_or(usize::MAX);
        let mut prev: Option<GpuStorage> = None;
        let mut k0 = 0;
        loop {
            let k1 = k0 + step.min(kn - k0);
            let part = if k1 < kn {
                Some(output(ctx, op, n, base.dtype)?)
            } else {
                None
            };
            let dst = part.as_ref().unwrap_or(&out);
            let from = prev.as_ref().unwrap_or(base);
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
            launch(ctx, op, kernel, &p, &tail, &bufs, groups(n))?;
            if part.is_none() {
                return Ok(());
            }
            prev = part;
            k0 = k1;
        }
    })?;
    Ok(out)
}
