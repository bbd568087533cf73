//! CPU elementwise kernels: strided inputs, contiguous outputs.

use super::vmath::vectorized;
use super::{for_offsets, par_fill, pool, with_cpu, with_dtype, CpuElem, CpuStorage, GRAIN};
use crate::dtype::Elem;
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::Layout;
use crate::DType;

/// `f` itself: a place where a closure may carry `#[inline(always)]` (an attribute on a closure
/// is accepted in argument position), so that it inlines into [`vectorized`] loops.
#[inline(always)]
pub(super) fn inlined<F>(f: F) -> F {
    f
}

/// A copy of `f` in the calling task's own frame (see [`map`]).
#[inline(always)]
fn local<F: Copy>(f: F) -> F {
    f
}

/// Call `$body` with `$f` bound to the scalar function of `$op`. The common ops get a closure of
/// their own, so each is compiled into its own loop (the per-element `match` folds away and the
/// loop vectorises); the rest share one closure that matches per element. Each closure is
/// `#[inline(always)]` so that it inlines into [`vectorized`] loops.
macro_rules! mono_unary {
    ($op:expr, $f:ident => $body:expr) => {
        mono_unary!(@arms $op, $f => $body;
            unit [Relu, Step, Neg, Exp, Sigmoid, Tanh, Gelu, GeluTanh, Silu, Erf, Log, Sqrt, Square];
            scalar [MulScalar, AddScalar])
    };
    (@arms $op:expr, $f:ident => $body:expr; unit [$($u:ident),*]; scalar [$($s:ident),*]) => {{
        use UnaryOp::*;
        match $op {
            $($u => {
                let $f = inlined(#[inline(always)] |x| $u.cpu(x));
                $body
            })*
            $($s(a) => {
                let $f = inlined(#[inline(always)] move |x| $s(a).cpu(x));
                $body
            })*
            // `x.pow(2)` (the squared norms of gradient clipping) and `x.pow(3)` (tanh-GELU
            // written as ops) are products ([`UnaryOp::cpu`]), each in its own loop.
            PowScalar(e) if e == 2.0 => {
                let $f = inlined(#[inline(always)] |x| Square.cpu(x));
                $body
            }
            PowScalar(e) if e == 3.0 => {
                let $f = inlined(#[inline(always)] |x| PowScalar(3.0).cpu(x));
                $body
            }
            op => {
                let $f = inlined(#[inline(always)] move |x| op.cpu(x));
                $body
            }
        }
    }};
}

/// [`mono_unary!`] for binary ops.
macro_rules! mono_binary {
    ($op:expr, $f:ident => $body:expr) => {
        mono_binary!(@arms $op, $f => $body;
            [Add, Sub, Mul, Div, ThresholdBackward, SigmoidBackward, TanhBackward, GeluBackward])
    };
    (@arms $op:expr, $f:ident => $body:expr; [$($b:ident),*]) => {{
        use BinaryOp::*;
        match $op {
            $($b => {
                let $f = inlined(#[inline(always)] |a, b| $b.cpu(a, b));
                $body
            })*
            op => {
                let $f = inlined(#[inline(always)] move |a, b| op.cpu(a, b));
                $body
            }
        }
    }};
}

// The fused kernels (`fused.rs`) run each op through the same closures.
pub(super) use {mono_binary, mono_unary};

/// `op(x)` for a float tensor.
pub(crate) fn unary(op: UnaryOp, x: &CpuStorage, l: &Layout) -> CpuStorage {
    with_cpu!(x, v, T => mono_unary!(op, f => T::wrap(map(v, l, #[inline(always)] move |x: T| T::from_acc(f(x.to_acc()))))))
}

/// `f` over the elements of the view `l` of `v`, into a new contiguous vector.
///
/// `f` is `Copy` and each parallel task works on its own copy: a closure reached through a
/// shared reference keeps its captures (a scalar operand, the op) in memory, which LLVM reloads
/// per element because the output's stores might alias them, and the loop does not vectorise
/// (`mul_scalar` ran scalar at 15–23 GB/s against `add`'s 38).
#[inline(always)]
fn map<T: Elem, U: CpuElem>(
    v: &[T],
    l: &Layout,
    f: impl Fn(T) -> U + Copy + Sync + Send,
) -> Vec<U> {
    let n = l.numel();
    let mut out = pool::any(n);
    if n == 0 {
        // A zero-size view may start past its storage's end (a slice of an empty tensor).
        return out;
    }
    if l.is_contiguous() {
        let src = &v[l.offset..l.offset + n];
        par_fill(&mut out, |start, chunk| {
            let f = local(f);
            let src = &src[start..start + chunk.len()];
            vectorized(
                #[inline(always)]
                || {
                    for (o, &x) in chunk.iter_mut().zip(src) {
                        *o = f(x);
                    }
                },
            )
        });
    } else if let Some(n) = row_len(l) {
        let s = l.strides[l.shape.len() - 1];
        par_rows(&mut out, n, |r0, chunk| {
            let f = local(f);
            let starts = row_starts(l, r0, chunk.len() / n);
            vectorized(
                #[inline(always)]
                || {
                    for (o, &p) in chunk.chunks_exact_mut(n).zip(&starts) {
                        if s == 1 {
                            for (o, &x) in o.iter_mut().zip(&v[p..p + n]) {
                                *o = f(x);
                            }
                        } else {
                            for (j, o) in o.iter_mut().enumerate() {
                                *o = f(v[p + j * s]);
                            }
                        }
                    }
                },
            );
        });
    } else {
        par_fill(&mut out, |start, chunk| {
            let f = local(f);
            for_offsets(l, start, chunk.len(), |i, o| chunk[i] = f(v[o]));
        });
    }
    out
}

/// Rows (the last dim) at least this long take the row loops of [`map`], [`zip`] and
/// [`where_cond`] for strided views: one offset computation per row, and a slice loop (which
/// vectorises) where the row is contiguous or broadcast. Shorter rows go element by element.
const MIN_ROW: usize = 16;

/// The row length of `l` when its rows are long enough for the row loops.
fn row_len(l: &Layout) -> Option<usize> {
    l.shape.last().copied().filter(|&n| n >= MIN_ROW)
}

/// The storage offsets of the first elements of rows `r0..r0 + count` of `l`.
fn row_starts(l: &Layout, r0: usize, count: usize) -> Vec<usize> {
    let nd = l.shape.len();
    let outer = Layout {
        shape: l.shape[..nd - 1].to_vec(),
        strides: l.strides[..nd - 1].to_vec(),
        offset: l.offset,
    };
    let mut starts = Vec::with_capacity(count);
    for_offsets(&outer, r0, count, |_, o| starts.push(o));
    starts
}

/// Fill `out`, made of rows of `n`, in parallel blocks of whole rows (about [`GRAIN`] elements
/// each); `f(first_row, block)` writes a block.
fn par_rows<U: Send>(out: &mut [U], n: usize, f: impl Fn(usize, &mut [U]) + Sync + Send) {
    use rayon::prelude::*;
    let rows_per_task = (GRAIN / n).max(1);
    if out.len() <= GRAIN {
        f(0, out);
    } else {
        out.par_chunks_mut(rows_per_task * n)
            .enumerate()
            .for_each(|(c, block)| f(c * rows_per_task, block));
    }
}

/// Copy the elements of a strided view into a new contiguous storage.
pub(crate) fn contiguous(x: &CpuStorage, l: &Layout) -> CpuStorage {
    with_cpu!(x, v, T => T::wrap(super::gather_strided(v, l)))
}

/// Convert to another dtype (strided in, contiguous out).
pub(crate) fn cast(x: &CpuStorage, l: &Layout, to: DType) -> CpuStorage {
    // Between f32 and a half type over whole contiguous storages (autocast's casts): in bulk,
    // with the same values.
    if let Some(v) = super::head::<f32>(x, l.numel()).filter(|_| l.is_contiguous() && l.offset == 0)
    {
        if let Some(h) = super::half_f32::Half::of(to) {
            return super::half_f32::narrow(v, h);
        }
    }
    let whole = l.is_contiguous() && l.offset == 0 && x.len() == l.numel();
    if to == DType::F32 && whole {
        if let Some((out, _)) = super::half_f32::widen(x) {
            return CpuStorage::F32(out);
        }
    }
    // Between f32 and a half type in any other layout (a slice of attention's projections, a
    // transposed weight): the strided copy first, then in bulk, instead of element by element
    // through f64 (the same values either way).
    let half = |d: DType| super::half_f32::Half::of(d).is_some();
    if !whole
        && l.numel() > 0
        && ((x.dtype() == DType::F32 && half(to)) || (half(x.dtype()) && to == DType::F32))
    {
        let dense = contiguous(x, l);
        let out = cast(&dense, &Layout::contiguous(&l.shape), to);
        pool::recycle(dense);
        return out;
    }
    with_cpu!(x, v, S => with_dtype!(to, D => {
        let mut out = pool::any(l.numel());
        par_fill(&mut out, |start, chunk| {
            for_offsets(l, start, chunk.len(), |i, o| chunk[i] = convert::<S, D>(v[o]));
        });
        D::wrap(out)
    }))
}

/// One element converted as PyTorch's casts do: integers (and bool) through int64, exactly
/// (int64 -> int32 wraps, int -> float rounds once), floats through f64.
#[inline(always)]
fn convert<S: Elem, D: Elem>(s: S) -> D {
    if S::INT {
        D::from_i64(s.to_i64())
    } else {
        D::from_f64(s.to_f64())
    }
}

/// `op(a, b)`: both layouts already broadcast to the output shape and of one dtype.
/// Comparisons give bool; integer arithmetic wraps ([`BinaryOp::cpu_int`]); int64 compares
/// exactly (not through f64, which rounds past 2^53).
pub(crate) fn binary(
    op: BinaryOp,
    a: &CpuStorage,
    al: &Layout,
    b: &CpuStorage,
    bl: &Layout,
) -> CpuStorage {
    match (a, b, op.is_comparison()) {
        (CpuStorage::I32(av), CpuStorage::I32(bv), false) => {
            return CpuStorage::I32(zip(av, al, bv, bl, move |a, b| op.cpu_int(a, b)));
        }
        (CpuStorage::I64(av), CpuStorage::I64(bv), false) => {
            return CpuStorage::I64(zip(av, al, bv, bl, move |a, b| op.cpu_int(a, b)));
        }
        (CpuStorage::I64(av), CpuStorage::I64(bv), true) => {
            return CpuStorage::Bool(zip(av, al, bv, bl, move |a, b| op.cmp_ord(a, b)));
        }
        _ => {}
    }
    with_cpu!(a, av, T => {
        let bv = T::slice(b).expect("binary: operands share a dtype");
        if op.is_comparison() {
            CpuStorage::Bool(zip(av, al, bv, bl, move |a: T, b: T| op.cmp(a.to_acc(), b.to_acc())))
        } else {
            mono_binary!(op, f => T::wrap(zip(av, al, bv, bl, #[inline(always)] move |a: T, b: T| T::from_acc(f(a.to_acc(), b.to_acc())))))
        }
    })
}

/// Whether the view `l` of `x` holds a zero (the divisor check of integer `remainder` and
/// `fmod`). Broadcast dims (stride 0) are visited once.
pub(crate) fn has_zero(x: &CpuStorage, l: &Layout) -> bool {
    if l.numel() == 0 {
        return false;
    }
    let (shape, strides) = l
        .shape
        .iter()
        .zip(&l.strides)
        .filter(|&(_, &s)| s != 0)
        .map(|(&d, &s)| (d, s))
        .unzip();
    let l = Layout {
        shape,
        strides,
        offset: l.offset,
    };
    let mut found = false;
    with_cpu!(x, v, T => for_offsets(&l, 0, l.numel(), |_, o| found |= <T as Elem>::to_f64(v[o]) == 0.0));
    found
}

/// `f(a, b)` over two views of the output's shape, into a new contiguous vector. Contiguous
/// operands and a broadcast scalar take direct loops. As in [`map`], each task copies `f`.
#[inline(always)]
fn zip<T: Elem, U: CpuElem>(
    av: &[T],
    al: &Layout,
    bv: &[T],
    bl: &Layout,
    f: impl Fn(T, T) -> U + Copy + Sync + Send,
) -> Vec<U> {
    let n = al.numel();
    let mut out = pool::any(n);
    if n == 0 {
        // Nothing to read: a zero-size operand may have no storage at all, or start past its
        // end (a slice of an empty tensor), or have every stride 0.
        return out;
    }
    let scalar = |l: &Layout| l.strides.iter().all(|&s| s == 0);
    if al.is_contiguous() && bl.is_contiguous() {
        let (a, b) = (&av[al.offset..al.offset + n], &bv[bl.offset..bl.offset + n]);
        par_fill(&mut out, |start, chunk| {
            let f = local(f);
            let (a, b) = (
                &a[start..start + chunk.len()],
                &b[start..start + chunk.len()],
            );
            vectorized(
                #[inline(always)]
                || {
                    for ((o, &x), &y) in chunk.iter_mut().zip(a).zip(b) {
                        *o = f(x, y);
                    }
                },
            )
        });
    } else if al.is_contiguous() && scalar(bl) {
        let (a, y) = (&av[al.offset..al.offset + n], bv[bl.offset]);
        par_fill(&mut out, |start, chunk| {
            let f = local(f);
            let a = &a[start..start + chunk.len()];
            vectorized(
                #[inline(always)]
                || {
                    for (o, &x) in chunk.iter_mut().zip(a) {
                        *o = f(x, y);
                    }
                },
            )
        });
    } else if let Some(n) = row_len(al) {
        let nd = al.shape.len();
        let (sa, sb) = (al.strides[nd - 1], bl.strides[nd - 1]);
        par_rows(&mut out, n, |r0, chunk| {
            let f = local(f);
            let rows = chunk.len() / n;
            let (ra, rb) = (row_starts(al, r0, rows), row_starts(bl, r0, rows));
            vectorized(
                #[inline(always)]
                || {
                    for ((o, &pa), &pb) in chunk.chunks_exact_mut(n).zip(&ra).zip(&rb) {
                        match (sa, sb) {
                            (1, 1) => {
                                for ((o, &x), &y) in
                                    o.iter_mut().zip(&av[pa..pa + n]).zip(&bv[pb..pb + n])
                                {
                                    *o = f(x, y);
                                }
                            }
                            (1, 0) => {
                                let y = bv[pb];
                                for (o, &x) in o.iter_mut().zip(&av[pa..pa + n]) {
                                    *o = f(x, y);
                                }
                            }
                            (0, 1) => {
                                let x = av[pa];
                                for (o, &y) in o.iter_mut().zip(&bv[pb..pb + n]) {
                                    *o = f(x, y);
                                }
                            }
                            _ => {
                                for (j, o) in o.iter_mut().enumerate() {
                                    *o = f(av[pa + j * sa], bv[pb + j * sb]);
                                }
                            }
                        }
                    }
                },
            );
        });
    } else {
        par_fill(&mut out, |start, chunk| {
            let f = local(f);
            let mut boff = vec![0usize; chunk.len()];
            for_offsets(bl, start, chunk.len(), |i, o| boff[i] = o);
            for_offsets(al, start, chunk.len(), |i, o| {
                chunk[i] = f(av[o], bv[boff[i]])
            });
        });
    }
    out
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
        let mut out = pool::any(al.numel());
        if let Some(n) = row_len(al) {
            let nd = al.shape.len();
            let (sc, sa, sb) = (cl.strides[nd - 1], al.strides[nd - 1], bl.strides[nd - 1]);
            par_rows(&mut out, n, |r0, chunk| {
                let rows = chunk.len() / n;
                let (rc, ra, rb) = (row_starts(cl, r0, rows), row_starts(al, r0, rows), row_starts(bl, r0, rows));
                for (i, o) in chunk.chunks_exact_mut(n).enumerate() {
                    let (pc, pa, pb) = (rc[i], ra[i], rb[i]);
                    for (j, o) in o.iter_mut().enumerate() {
                        *o = if cv[pc + j * sc] { av[pa + j * sa] } else { bv[pb + j * sb] };
                    }
                }
            });
            return T::wrap(out);
        }
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
        let nd = dl.shape.len();
        match row_len(dl) {
            // Rows contiguous in the destination: a slice copy per row.
            Some(n) if dl.strides[nd - 1] == 1 => {
                let rows = Layout {
                    shape: dl.shape[..nd - 1].to_vec(),
                    strides: dl.strides[..nd - 1].to_vec(),
                    offset: dl.offset,
                };
                for_offsets(&rows, 0, rows.numel(), |i, o| {
                    dv[o..o + n].copy_from_slice(&s[i * n..(i + 1) * n]);
                });
            }
            _ => for_offsets(dl, 0, dl.numel(), |i, o| dv[o] = s[i]),
        }
    })
}

/// One SGD step in place (f32): `d = g + wd·p` (when `wd ≠ 0`); with momentum (`buf`),
/// `b = d` on the buffer's first step, else `b = momentum·b + (1 - dampening)·d`, and `d = d +
/// momentum·b` (Nesterov) or `d = b`; then `p = p - lr·d`. The same operations in the same
/// order as the tensor ops of `optim/sgd.rs`, so the same bits.
pub(crate) fn sgd(p: &mut [f32], g: &[f32], buf: Option<&mut [f32]>, h: crate::backend::SgdStep) {
    use rayon::prelude::*;
    let grain = super::GRAIN;
    let update = |p: &mut [f32], g: &[f32], mut b: Option<&mut [f32]>| {
        for i in 0..p.len() {
            let w = p[i];
            let mut d = g[i];
            if h.weight_decay != 0.0 {
                d += w * h.weight_decay;
            }
            if let Some(b) = b.as_deref_mut() {
                let v = if h.first {
                    d
                } else {
                    b[i] * h.momentum + d * h.undamped
                };
                b[i] = v;
                d = if h.nesterov { d + v * h.momentum } else { v };
            }
            p[i] = w - d * h.lr;
        }
    };
    match buf {
        Some(b) => p
            .par_chunks_mut(grain)
            .zip(g.par_chunks(grain).zip(b.par_chunks_mut(grain)))
            .for_each(|(p, (g, b))| update(p, g, Some(b))),
        None => p
            .par_chunks_mut(grain)
            .zip(g.par_chunks(grain))
            .for_each(|(p, g)| update(p, g, None)),
    }
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
