//! CPU indexing kernels: gather, scatter_add, and the im2col/col2im pair behind convolution.

use super::{for_offsets, par_fill, pool, with_cpu, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::ops::ConvGeom;
use crate::shape::{contiguous_strides, Layout};
use crate::{Error, Result};
use rayon::prelude::*;

/// Every index the view `il` of `idx` holds must lie in `[0, size)`, else the error names `op`,
/// the first bad index, `dim` and `size`, as PyTorch's does (the GPU kernels check on the device:
/// `backend/gpu/checks.rs`). Broadcast (stride-0) dimensions repeat elements: each is read once.
fn check_indices<I: Index>(
    op: &'static str,
    idx: &[I],
    il: &Layout,
    dim: usize,
    size: usize,
) -> Result<()> {
    let shape = il.shape.iter().zip(&il.strides);
    let once = Layout {
        shape: shape
            .map(|(&n, &s)| if s == 0 { n.min(1) } else { n })
            .collect(),
        ..il.clone()
    };
    let mut bad = None;
    for_offsets(&once, 0, once.numel(), |_, o| {
        let j: i64 = idx[o].into();
        if bad.is_none() && (j < 0 || j as u64 >= size as u64) {
            bad = Some(j);
        }
    });
    match bad {
        Some(j) => Err(Error::IndexOutOfRange {
            op,
            index: j,
            dim,
            size,
        }),
        None => Ok(()),
    }
}

/// An index element type: int32 or int64 (checked against the size before it is used).
pub(crate) trait Index: Copy + Into<i64> + Send + Sync {}
impl Index for i32 {}
impl Index for i64 {}

/// Dispatch `$body` over the index storages (int32, int64) with `$v` bound to the slice; the op
/// layer has checked the dtype, so the other variants never arrive.
macro_rules! with_index {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            CpuStorage::I32($v) => $body,
            CpuStorage::I64($v) => $body,
            other => Err(crate::Error::UnsupportedDType {
                op: "index",
                dtype: other.dtype(),
                hint: "; indices must be int64 or int32",
            }),
        }
    };
}

/// The row length when whole rows move: `dim` is not the last dim and the index is constant
/// along the last one (index_select and embedding expand a 1-D index that way), rows of 16+.
fn row_len(il: &Layout, dim: usize) -> Option<usize> {
    let nd = il.shape.len();
    (nd >= 2 && dim + 1 < nd && il.strides[nd - 1] == 0 && il.shape[nd - 1] >= 16)
        .then(|| il.shape[nd - 1])
}

/// For each row of the index view `il` (rows of `n`), the start of the row it addresses in a
/// contiguous tensor of strides `xs` (indices already checked).
fn row_targets<I: Index>(idx: &[I], il: &Layout, xs: &[usize], dim: usize, n: usize) -> Vec<usize> {
    let nd = il.shape.len();
    let outer = Layout {
        shape: il.shape[..nd - 1].to_vec(),
        strides: il.strides[..nd - 1].to_vec(),
        offset: il.offset,
    };
    let ostr = contiguous_strides(&outer.shape);
    let mut starts = Vec::with_capacity(il.numel() / n);
    for_offsets(&outer, 0, outer.numel(), |r, o| {
        let (mut lin, mut t) = (r, 0);
        for d in 0..nd - 1 {
            let c = lin / ostr[d];
            lin %= ostr[d];
            t += if d == dim { idx[o].into() as usize } else { c } * xs[d];
        }
        starts.push(t);
    });
    starts
}

/// [`gather`] with the index storage of either integer dtype.
pub(crate) fn gather_any(
    op: &'static str,
    x: &CpuStorage,
    xshape: &[usize],
    dim: usize,
    idx: &CpuStorage,
    il: &Layout,
) -> Result<CpuStorage> {
    with_index!(idx, i => gather(op, x, xshape, dim, i, il))
}

/// [`scatter_add`] with the index storage of either integer dtype.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_add_any(
    op: &'static str,
    base: &mut CpuStorage,
    bshape: &[usize],
    dim: usize,
    idx: &CpuStorage,
    il: &Layout,
    src: &CpuStorage,
    sl: &Layout,
) -> Result<()> {
    with_index!(idx, i => scatter_add(op, base, bshape, dim, i, il, src, sl))
}

/// `out[..., j, ...] = x[..., idx[..., j, ...], ...]` along `dim` (torch.gather). `x` is contiguous
/// of shape `xshape`; `idx` has the output's shape. An out-of-range index is an error naming `op`.
pub(crate) fn gather<I: Index>(
    op: &'static str,
    x: &CpuStorage,
    xshape: &[usize],
    dim: usize,
    idx: &[I],
    il: &Layout,
) -> Result<CpuStorage> {
    check_indices(op, idx, il, dim, xshape.get(dim).copied().unwrap_or(1))?;
    let xs = contiguous_strides(xshape);
    let ostr = contiguous_strides(&il.shape);
    if let Some(n) = row_len(il, dim) {
        let starts = row_targets(idx, il, &xs, dim, n);
        return Ok(with_cpu!(x, v, T => {
            let mut out = pool::any(il.numel());
            out.par_chunks_mut(n)
                .zip(&starts)
                .with_min_len((super::GRAIN / n).max(1))
                .for_each(|(o, &t)| o.copy_from_slice(&v[t..t + n]));
            T::wrap(out)
        }));
    }
    with_cpu!(x, v, T => {
        let mut out = vec![T::default(); il.numel()];
        par_fill(&mut out, |start, chunk| {
            for_offsets(il, start, chunk.len(), |i, o| {
                let mut lin = start + i;
                let mut src = 0;
                for d in 0..ostr.len() {
                    let c = lin / ostr[d];
                    lin %= ostr[d];
                    src += if d == dim { idx[o].into() as usize } else { c } * xs[d];
                }
                chunk[i] = v[src];
            });
        });
        Ok(T::wrap(out))
    })
}

/// `base[..., idx[..., j, ...], ...] += src[..., j, ...]` along `dim`; `base` is contiguous. An
/// out-of-range index is an error naming `op`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_add<I: Index>(
    op: &'static str,
    base: &mut CpuStorage,
    bshape: &[usize],
    dim: usize,
    idx: &[I],
    il: &Layout,
    src: &CpuStorage,
    sl: &Layout,
) -> Result<()> {
    check_indices(op, idx, il, dim, bshape.get(dim).copied().unwrap_or(1))?;
    let bs = contiguous_strides(bshape);
    let ostr = contiguous_strides(&il.shape);
    with_cpu!(src, sv, T => {
        let bv = T::slice_mut(base).expect("scatter_add: same dtype");
        let s = super::gather_strided(sv, sl);
        if let Some(n) = row_len(il, dim) {
            // Whole rows in the elements' order (repeated indices accumulate as before).
            let starts = row_targets(idx, il, &bs, dim, n);
            for (&t, src) in starts.iter().zip(s.chunks_exact(n)) {
                for (d, x) in bv[t..t + n].iter_mut().zip(src) {
                    *d = T::from_f64(d.to_f64() + x.to_f64());
                }
            }
            return Ok(());
        }
        let mut io = vec![0usize; il.numel()];
        for_offsets(il, 0, il.numel(), |i, o| io[i] = o);
        for (i, &o) in io.iter().enumerate() {
            let mut lin = i;
            let mut dst = 0;
            for d in 0..ostr.len() {
                let c = lin / ostr[d];
                lin %= ostr[d];
                dst += if d == dim { idx[o].into() as usize } else { c } * bs[d];
            }
            // Integers add exactly and wrap (int64 past 2^53 included), floats in f64.
            bv[dst] = if T::INT {
                T::from_i64(bv[dst].to_i64().wrapping_add(s[i].to_i64()))
            } else {
                T::from_f64(bv[dst].to_f64() + s[i].to_f64())
            };
        }
    });
    Ok(())
}

/// Unfold `[N, C, H, W]` (contiguous) into columns `[N, C*kh*kw, Ho*Wo]`; padding reads `pad`.
pub(crate) fn im2col(x: &CpuStorage, g: &ConvGeom, pad: f64) -> CpuStorage {
    with_cpu!(x, v, T => {
        let padv = T::from_f64(pad);
        let (kk, l) = (g.kh * g.kw, g.ho * g.wo);
        let mut out = pool::any(g.n * g.c * kk * l);
        par_fill(&mut out, |start, chunk| {
            for (i, o) in chunk.iter_mut().enumerate() {
                let e = start + i;
                let (row, p) = (e / l, e % l);
                let (nc, kij) = (row / kk, row % kk);
                let (ki, kj) = (kij / g.kw, kij % g.kw);
                let (oh, ow) = (p / g.wo, p % g.wo);
                let h = (oh * g.sh + ki * g.dh) as isize - g.ph as isize;
                let w = (ow * g.sw + kj * g.dw) as isize - g.pw as isize;
                *o = if h < 0 || w < 0 || h >= g.h as isize || w >= g.w as isize {
                    padv
                } else {
                    v[nc * g.h * g.w + h as usize * g.w + w as usize]
                };
            }
        });
        T::wrap(out)
    })
}

/// Fold columns `[N, C*kh*kw, Ho*Wo]` back to `[N, C, H, W]`, summing overlaps (im2col's adjoint).
pub(crate) fn col2im(cols: &CpuStorage, g: &ConvGeom) -> CpuStorage {
    with_cpu!(cols, v, T => {
        let (kk, l) = (g.kh * g.kw, g.ho * g.wo);
        let mut out = vec![T::default(); g.n * g.c * g.h * g.w];
        par_fill(&mut out, |start, chunk| {
            for (i, o) in chunk.iter_mut().enumerate() {
                let e = start + i;
                let (nc, hw) = (e / (g.h * g.w), e % (g.h * g.w));
                let (h, w) = (hw / g.w, hw % g.w);
                let mut acc = 0.0f64;
                for ki in 0..g.kh {
                    let hh = (h + g.ph) as isize - (ki * g.dh) as isize;
                    if hh < 0 || !(hh as usize).is_multiple_of(g.sh) || hh as usize / g.sh >= g.ho {
                        continue;
                    }
                    let oh = hh as usize / g.sh;
                    for kj in 0..g.kw {
                        let ww = (w + g.pw) as isize - (kj * g.dw) as isize;
                        if ww < 0 || !(ww as usize).is_multiple_of(g.sw) || ww as usize / g.sw >= g.wo {
                            continue;
                        }
                        let ow = ww as usize / g.sw;
                        acc += v[(nc * kk + ki * g.kw + kj) * l + oh * g.wo + ow].to_f64();
                    }
                }
                *o = T::from_f64(acc);
            }
        });
        T::wrap(out)
    })
}
