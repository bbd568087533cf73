//! CPU elementwise kernels: strided inputs, contiguous outputs.

use super::{for_offsets, par_fill, with_cpu, with_dtype, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::Layout;
use crate::DType;

/// `op(x)` for a float tensor.
pub(crate) fn unary(op: UnaryOp, x: &CpuStorage, l: &Layout) -> CpuStorage {
    with_cpu!(x, v, T => {
        let mut out = vec![T::default(); l.numel()];
        par_fill(&mut out, |start, chunk| {
            for_offsets(l, start, chunk.len(), |i, o| chunk[i] = T::from_acc(op.cpu(v[o].to_acc())));
        });
        T::wrap(out)
    })
}

/// Copy the elements of a strided view into a new contiguous storage.
pub(crate) fn contiguous(x: &CpuStorage, l: &Layout) -> CpuStorage {
    with_cpu!(x, v, T => T::wrap(super::gather_strided(v, l)))
}

/// Convert to another dtype (strided in, contiguous out).
pub(crate) fn cast(x: &CpuStorage, l: &Layout, to: DType) -> CpuStorage {
    with_cpu!(x, v, S => with_dtype!(to, D => {
        let mut out = vec![D::default(); l.numel()];
        par_fill(&mut out, |start, chunk| {
            for_offsets(l, start, chunk.len(), |i, o| chunk[i] = convert::<S, D>(v[o]));
        });
        D::wrap(out)
    }))
}

#[inline(always)]
fn convert<S: Elem, D: Elem>(s: S) -> D {
    D::from_f64(s.to_f64())
}

/// `op(a, b)`: both layouts already broadcast to the output shape and of one dtype.
/// Comparisons give bool.
pub(crate) fn binary(
    op: BinaryOp,
    a: &CpuStorage,
    al: &Layout,
    b: &CpuStorage,
    bl: &Layout,
) -> CpuStorage {
    let n = al.numel();
    with_cpu!(a, av, T => {
        let bv = T::slice(b).expect("binary: operands share a dtype");
        if op.is_comparison() {
            let mut out = vec![false; n];
            par_fill(&mut out, |start, chunk| {
                let mut boff = vec![0usize; chunk.len()];
                for_offsets(bl, start, chunk.len(), |i, o| boff[i] = o);
                for_offsets(al, start, chunk.len(), |i, o| {
                    chunk[i] = op.cmp(av[o].to_acc(), bv[boff[i]].to_acc())
                });
            });
            CpuStorage::Bool(out)
        } else {
            let mut out = vec![T::default(); n];
            let fast = al.is_contiguous() && bl.is_contiguous();
            par_fill(&mut out, |start, chunk| {
                if fast {
                    let a = &av[al.offset + start..al.offset + start + chunk.len()];
                    let b = &bv[bl.offset + start..bl.offset + start + chunk.len()];
                    for i in 0..chunk.len() {
                        chunk[i] = T::from_acc(op.cpu(a[i].to_acc(), b[i].to_acc()));
                    }
                    return;
                }
                let mut boff = vec![0usize; chunk.len()];
                for_offsets(bl, start, chunk.len(), |i, o| boff[i] = o);
                for_offsets(al, start, chunk.len(), |i, o| {
                    chunk[i] = T::from_acc(op.cpu(av[o].to_acc(), bv[boff[i]].to_acc()))
                });
            });
            T::wrap(out)
        }
    })
}

/// `cond ? a : b`, all three broadcast to the output shape.
pub(crate) fn where_cond(
    c: &CpuStorage,
    cl: &Layout,
    a: &CpuStorage,
    al: &Layout,
    b: &CpuStorage,
    bl: &Layout,
) -> CpuStorage {
    let cv = bool::slice(c).expect("where: bool condition");
    with_cpu!(a, av, T => {
        let bv = T::slice(b).expect("where: operands share a dtype");
        let mut out = vec![T::default(); al.numel()];
        par_fill(&mut out, |start, chunk| {
            let len = chunk.len();
            let mut co = vec![0usize; len];
            let mut bo = vec![0usize; len];
            for_offsets(cl, start, len, |i, o| co[i] = o);
            for_offsets(bl, start, len, |i, o| bo[i] = o);
            for_offsets(al, start, len, |i, o| chunk[i] = if cv[co[i]] { av[o] } else { bv[bo[i]] });
        });
        T::wrap(out)
    })
}

/// Write the contiguous `src` into the strided positions `dl` of `dst` (same dtype).
pub(crate) fn copy_into(dst: &mut CpuStorage, dl: &Layout, src: &CpuStorage, sl: &Layout) {
    with_cpu!(src, sv, T => {
        let dv = T::slice_mut(dst).expect("copy_: same dtype");
        let s = super::gather_strided(sv, sl);
        for_offsets(dl, 0, dl.numel(), |i, o| dv[o] = s[i]);
    })
}

/// Fused Adam/AdamW step in place (f32), the same formula as `shaders/adam.wgsl`.
pub(crate) fn adam(
    p: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    h: [f32; 7],
    decoupled: bool,
) {
    use rayon::prelude::*;
    let [lr, b1, b2, eps, bc1, bc2, wd] = h;
    let inv = 1.0 / bc2.sqrt();
    p.par_chunks_mut(super::GRAIN)
        .zip(g.par_chunks(super::GRAIN))
        .zip(
            m.par_chunks_mut(super::GRAIN)
                .zip(v.par_chunks_mut(super::GRAIN)),
        )
        .for_each(|((p, g), (m, v))| {
            for i in 0..p.len() {
                let (mut w, mut d) = (p[i], g[i]);
                if decoupled {
                    w *= 1.0 - lr * wd;
                } else {
                    d += w * wd;
                }
                m[i] = m[i] * b1 + d * (1.0 - b1);
                v[i] = v[i] * b2 + d * d * (1.0 - b2);
                let denom = v[i].sqrt() * inv + eps;
                p[i] = w - (m[i] / denom) * (lr / bc1);
            }
        });
}
