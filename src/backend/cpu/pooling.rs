//! Max pooling on the CPU: values and, for training, the index of each window's first maximum,
//! plane by plane, and its backward (scattering gradients to those indices).

use super::{pool, with_cpu, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::ops::ConvGeom;
use rayon::prelude::*;

/// The taps `k` of output position `o` whose input `o*s + k*d - p` lies in `[0, size)`.
fn tap_range(
    o: usize,
    s: usize,
    d: usize,
    p: usize,
    k: usize,
    size: usize,
) -> std::ops::Range<usize> {
    let start = o * s;
    // k*d >= p - start, and start + k*d - p < size.
    let lo = if start >= p {
        0
    } else {
        (p - start).div_ceil(d)
    };
    let hi = if start >= size + p {
        0
    } else {
        (size + p - start).div_ceil(d).min(k)
    };
    lo.min(hi)..hi
}

/// One pooling window: its maximum and the flat index of the first maximum (-1 if `taps` is
/// empty), NaN winning.
#[inline(always)]
fn window<T: Elem, I: Iterator<Item = usize>>(src: &[T], taps: impl Fn() -> I) -> (T, i32) {
    use num_traits::Float;
    // Fast pass: a plain `>` (compiled branch-free; a data-dependent branch on random data costs
    // ~10x here). Strictly greater keeps the first maximum, as in PyTorch.
    let mut best = <<T as Elem>::Acc as crate::dtype::Real>::of(f64::NEG_INFINITY);
    let (mut at, mut nan) = (usize::MAX, false);
    for q in taps() {
        let val = src[q].to_acc();
        let take = val > best;
        best = if take { val } else { best };
        at = if take { q } else { at };
        nan |= val.is_nan();
    }
    if nan || at == usize::MAX {
        // Exact pass for windows of NaN or -inf only: the first NaN wins, else the first element.
        at = usize::MAX;
        for q in taps() {
            let val = src[q].to_acc();
            if at == usize::MAX || val > best || (val.is_nan() && !best.is_nan()) {
                (best, at) = (val, q);
            }
        }
    }
    let at = if at == usize::MAX { -1 } else { at as i32 };
    (T::from_acc(best), at)
}

/// Max pooling of `[N*C, H, W]` planes: values and, when `indices`, the flat index (h * W + w)
/// of each window's first maximum (NaN wins, as in PyTorch). Inference skips the indices: they
/// cost more than the maxima.
pub(crate) fn max_pool(
    x: &CpuStorage,
    g: &ConvGeom,
    indices: bool,
) -> (CpuStorage, Option<CpuStorage>) {
    // Half types pool their f32 widening (the maxima are input values: narrowing them back is
    // exact), which costs one pass instead of a software conversion per window tap.
    if let Some((wide, half)) = super::half_f32::widen(x) {
        return match max_pool(&CpuStorage::F32(wide), g, indices) {
            (CpuStorage::F32(vals), idx) => {
                let out = super::half_f32::narrow(&vals, half);
                pool::give_back(vals);
                (out, idx)
            }
            other => other,
        };
    }
    let n = g.n * g.c * g.ho * g.wo;
    let plane_out = g.ho * g.wo;
    let mut idx: Vec<i32> = if indices { pool::any(n) } else { Vec::new() };
    let vals = with_cpu!(x, v, T => {
        let mut out = pool::any(n);
        // Without indices each task writes its plane's indices to a scratch row.
        let ix_planes: Vec<Option<&mut [i32]>> = if indices {
            idx.chunks_mut(plane_out.max(1)).map(Some).collect()
        } else {
            (0..g.n * g.c).map(|_| None).collect()
        };
        let plan = PoolPlan::new(g, indices);
        out.par_chunks_mut(plane_out.max(1)).zip(ix_planes.into_par_iter()).enumerate().for_each_init(
            || (vec![Default::default(); g.w], vec![0u32; g.w], vec![0i32; g.wo], vec![Default::default(); g.w], vec![0u32; g.w]),
            |(cmax, cidx, scratch, wmax, widx), (plane, (o, ixp))| {
                let src = &v[plane * g.h * g.w..(plane + 1) * g.h * g.w];
                let bufs = PoolRows { cmax, cidx, scratch, wmax, widx };
                pool_plane_widest(Plane { src, o, ixp }, bufs, &plan)
            });
        T::wrap(out)
    });
    (vals, indices.then_some(CpuStorage::I32(idx)))
}

/// What every plane of a max pooling shares: the geometry, each output row's and column's kernel
/// taps inside the input, the output columns whose window has no padding column, and whether the
/// argmax is wanted.
struct PoolPlan {
    g: ConvGeom,
    rows: Vec<std::ops::Range<usize>>,
    cols: Vec<std::ops::Range<usize>>,
    inner: std::ops::Range<usize>,
    indices: bool,
}

impl PoolPlan {
    fn new(g: &ConvGeom, indices: bool) -> Self {
        let rows: Vec<_> = (0..g.ho)
            .map(|oh| tap_range(oh, g.sh, g.dh, g.ph, g.kh, g.h))
            .collect();
        let cols: Vec<_> = (0..g.wo)
            .map(|ow| tap_range(ow, g.sw, g.dw, g.pw, g.kw, g.w))
            .collect();
        // Output columns whose window lies inside the row (no padding column): without indices
        // their maxima are read from the row of running maxima over the window's width.
        let full = |ow: usize| cols[ow].len() == g.kw;
        let inner = (0..g.wo).find(|&ow| full(ow)).map_or(0..0, |lo| {
            lo..(lo..g.wo).find(|&ow| !full(ow)).unwrap_or(g.wo)
        });
        PoolPlan {
            g: *g,
            rows,
            cols,
            inner,
            indices,
        }
    }
}

/// One plane's input (`[H, W]`), output (`[Ho, Wo]`) and, when the plan wants them, indices.
struct Plane<'a, T> {
    src: &'a [T],
    o: &'a mut [T],
    ixp: Option<&'a mut [i32]>,
}

/// A task's row buffers for [`pool_plane`]: running maxima down the columns and their flat
/// indices, indices written when the caller wants none, and maxima across the window's width
/// with their indices.
struct PoolRows<'a, A> {
    cmax: &'a mut Vec<A>,
    cidx: &'a mut Vec<u32>,
    scratch: &'a mut Vec<i32>,
    wmax: &'a mut Vec<A>,
    widx: &'a mut Vec<u32>,
}

super::vmath::widest!(pool_plane_widest, pool_plane_on => pool_plane<T: Elem>(plane: Plane<'_, T>, bufs: PoolRows<'_, T::Acc>, plan: &PoolPlan));

/// The larger of `a` and `b` where neither is NaN (rows with NaN take the exact per-window pass).
/// On wasm a compare and a select, which vectorises (`f32::max` is a library call there: wasm's
/// own `max` propagates NaN); elsewhere `max`, one instruction (a select over a running maximum
/// in memory becomes a masked store on AVX-512, which the next row's load cannot forward from).
#[inline(always)]
fn larger<A: num_traits::Float>(a: A, b: A) -> A {
    if cfg!(target_arch = "wasm32") {
        if b > a {
            b
        } else {
            a
        }
    } else {
        a.max(b)
    }
}

/// `m[i]`, `ix[i]`: the maximum of `cmax[i + kj*dw]` over `kj < K` and its index `cidx[..]`, the
/// smallest index among equal maxima (the first in the window's row-major order: `cidx` holds
/// each column's first row with its maximum). Compares and selects in registers, one store per
/// element, so the loop vectorises (a select written back over a running maximum in memory
/// becomes masked stores). No NaN here (rows with NaN take the exact per-window pass).
#[inline(always)]
fn window_argmax<A: num_traits::Float, const K: usize>(
    cmax: &[A],
    cidx: &[u32],
    dw: usize,
    m: &mut [A],
    ix: &mut [u32],
) {
    let n = m.len();
    let ix = &mut ix[..n];
    let tap = |kj: usize| {
        cmax[kj * dw..kj * dw + n]
            .iter()
            .zip(&cidx[kj * dw..kj * dw + n])
    };
    /// The later tap `(x, xi)` wins over `(best, bi)` when larger, or equal at a smaller index.
    #[inline(always)]
    fn fold<A: num_traits::Float>((best, bi): (A, u32), (x, xi): (A, u32)) -> (A, u32) {
        if (x > best) | ((x == best) & (xi < bi)) {
            (x, xi)
        } else {
            (best, bi)
        }
    }
    // Each output written once from the taps (a select stored over a value read from the same
    // place would become a masked store).
    let out = m.iter_mut().zip(ix.iter_mut());
    match K {
        2 => {
            for ((mo, io), ((&a, &ai), (&b, &bi))) in out.zip(tap(0).zip(tap(1))) {
                (*mo, *io) = fold((a, ai), (b, bi));
            }
        }
        _ => {
            debug_assert_eq!(K, 3, "window_argmax: 2- or 3-wide windows");
            for ((mo, io), (((&a, &ai), (&b, &bi)), (&c, &ci))) in
                out.zip(tap(0).zip(tap(1)).zip(tap(2)))
            {
                (*mo, *io) = fold(fold((a, ai), (b, bi)), (c, ci));
            }
        }
    }
}

/// `dst[k] = src[k * S]`.
#[inline(always)]
fn pick<T: Elem, const S: usize>(dst: &mut [T], src: &[T::Acc]) {
    for (d, s) in dst.iter_mut().zip(src.chunks(S)) {
        *d = T::from_acc(s[0]);
    }
}

/// Max pooling of one plane.
#[inline(always)]
fn pool_plane<T: Elem>(plane: Plane<'_, T>, bufs: PoolRows<'_, T::Acc>, plan: &PoolPlan) {
    use num_traits::Float;
    let Plane { src, o, ixp } = plane;
    let PoolRows {
        cmax,
        cidx,
        scratch,
        wmax,
        widx,
    } = bufs;
    let PoolPlan {
        g,
        rows,
        cols,
        inner,
        indices,
    } = plan;
    let indices = *indices;
    if is_2x2(g) {
        return pool_2x2(src, o, ixp, g.w, g.wo);
    }
    let ConvGeom {
        w: ww,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        wo,
        ..
    } = *g;
    // The window's taps in (ki, kj) order: flat input positions, padding skipped.
    let taps = |oh: usize, ow: usize| {
        let (ki, kj) = (rows[oh].clone(), cols[ow].clone());
        ki.flat_map(move |ki| {
            let row = (oh * sh + ki * dh - ph) * ww;
            // kj's range keeps ow * sw + kj * dw >= pw.
            kj.clone().map(move |kj| row + ow * sw + kj * dw - pw)
        })
    };
    let mut ixp = ixp;
    // Separably, row by row of the output: first down each input column over the
    // window's rows (a vector loop), keeping the first row that holds the column's
    // maximum; then across each window's columns, where the first maximum in (ki, kj)
    // order is the one with the smallest flat index among equal values. Rows where NaN
    // appears take the exact per-window pass instead.
    for (oh, o) in o.chunks_exact_mut(wo).enumerate() {
        let ix: &mut [i32] = match ixp.as_deref_mut() {
            Some(p) => &mut p[oh * wo..(oh + 1) * wo],
            None => &mut scratch[..],
        };
        let mut ks = rows[oh].clone();
        let Some(k0) = ks.next() else {
            o.fill(T::from_acc(<<T as Elem>::Acc as crate::dtype::Real>::of(
                f64::NEG_INFINITY,
            )));
            ix.fill(-1);
            continue;
        };
        let at = |ki: usize| (oh * sh + ki * dh - ph) * ww;
        let first = &src[at(k0)..][..ww];
        let mut nan = false;
        for (w, ((m, i), &x)) in cmax.iter_mut().zip(cidx.iter_mut()).zip(first).enumerate() {
            let x = x.to_acc();
            nan |= x.is_nan();
            (*m, *i) = (x, (at(k0) + w) as u32);
        }
        for ki in ks {
            let base = at(ki);
            let (row, m, i) = (&src[base..][..ww], &mut cmax[..ww], &mut cidx[..ww]);
            // Masks instead of `if`, which the compiler turns into a branch per
            // element (mispredicted on data like this) and does not vectorise.
            if indices {
                for w in 0..ww {
                    let x = row[w].to_acc();
                    nan |= x.is_nan();
                    let take = 0u32.wrapping_sub((x > m[w]) as u32);
                    i[w] = (i[w] & !take) | ((base + w) as u32 & take);
                    m[w] = larger(m[w], x);
                }
            } else {
                for w in 0..ww {
                    let x = row[w].to_acc();
                    nan |= x.is_nan();
                    m[w] = larger(m[w], x);
                }
            }
        }
        if nan {
            for (ow, (o, ix)) in o.iter_mut().zip(ix.iter_mut()).enumerate() {
                (*o, *ix) = window(src, || taps(oh, ow));
            }
            continue;
        }
        // The windows inside the row, by vector loops over the row: wmax[i] (and widx[i]) is the
        // maximum over the window that starts at column i, then each inner window reads its own.
        // With indices, for 2- and 3-wide windows (the others take the loop below).
        let vector = !inner.is_empty() && (!indices || matches!(g.kw, 2 | 3));
        if vector {
            let span = (g.kw - 1) * dw;
            let len = ww - span;
            if indices {
                let (m, i) = (&mut wmax[..len], &mut widx[..len]);
                match g.kw {
                    2 => window_argmax::<_, 2>(cmax, cidx, dw, m, i),
                    _ => window_argmax::<_, 3>(cmax, cidx, dw, m, i),
                }
            } else {
                wmax[..len].copy_from_slice(&cmax[..len]);
                for kj in 1..g.kw {
                    let shifted = &cmax[kj * dw..kj * dw + len];
                    for (m, &x) in wmax[..len].iter_mut().zip(shifted) {
                        *m = larger(*m, x);
                    }
                }
            }
            // A constant stride, so that the compiler vectorises the strided reads.
            let first = inner.start * sw - pw;
            let dst = &mut o[inner.clone()];
            match sw {
                1 => pick::<T, 1>(dst, &wmax[first..]),
                2 => pick::<T, 2>(dst, &wmax[first..]),
                _ => {
                    for (k, d) in dst.iter_mut().enumerate() {
                        *d = T::from_acc(wmax[first + k * sw]);
                    }
                }
            }
            if indices {
                for (k, d) in ix[inner.clone()].iter_mut().enumerate() {
                    *d = widx[first + k * sw] as i32;
                }
            }
        }
        // Across each window's columns: the first maximum in (ki, kj) order is the one
        // with the smallest flat index among equal values.
        let todo = if vector { inner.clone() } else { 0..0 };
        let (left, right) = (0..todo.start, todo.end.max(todo.start)..wo);
        for ow in left.chain(right) {
            let (o, ix) = (&mut o[ow], &mut ix[ow]);
            let mut kj = cols[ow].clone();
            let Some(j0) = kj.next() else {
                (*o, *ix) = window(src, || taps(oh, ow));
                continue;
            };
            let col = |kj: usize| ow * sw + kj * dw - pw;
            let (mut best, mut bi) = (cmax[col(j0)], cidx[col(j0)]);
            if indices {
                for kj in kj {
                    let (x, i) = (cmax[col(kj)], cidx[col(kj)]);
                    // `|` and `&`, not `||` and `&&`: no data-dependent branch.
                    let take = (x > best) | ((x == best) & (i < bi));
                    let take = 0u32.wrapping_sub(take as u32);
                    bi = (bi & !take) | (i & take);
                    best = larger(best, x);
                }
            } else {
                for kj in kj {
                    best = larger(best, cmax[col(kj)]);
                }
            }
            (*o, *ix) = (T::from_acc(best), bi as i32);
        }
    }
}

/// A 2×2 window at stride 2 with no padding or dilation, the common CNN pooling, which
/// [`pool_2x2`] runs directly (every window lies inside the plane; the check says so).
fn is_2x2(g: &ConvGeom) -> bool {
    (g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw) == (2, 2, 2, 2, 0, 0, 1, 1)
        && 2 * g.ho <= g.h
        && 2 * g.wo <= g.w
}

/// [`pool_plane`] for [`is_2x2`] windows: each output row from its two input rows in one
/// branch-free loop. The taps fold in (ki, kj) order, a later one winning when larger or when
/// it is NaN and the maximum so far is not: the first maximum and NaN first, as [`window`].
#[inline(always)]
fn pool_2x2<T: Elem>(src: &[T], o: &mut [T], mut ixp: Option<&mut [i32]>, w: usize, wo: usize) {
    use num_traits::Float;
    #[inline(always)]
    fn fold<A: Float>((best, bi): (A, i32), (x, xi): (A, i32)) -> (A, i32) {
        if (x > best) | (x.is_nan() & !best.is_nan()) {
            (x, xi)
        } else {
            (best, bi)
        }
    }
    for (oh, out) in o.chunks_exact_mut(wo).enumerate() {
        let at = 2 * oh * w;
        let (r0, r1) = (&src[at..at + 2 * wo], &src[at + w..at + w + 2 * wo]);
        let taps = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        match ixp.as_deref_mut() {
            Some(ix) => {
                let ix = &mut ix[oh * wo..(oh + 1) * wo];
                for (ow, ((out, ix), (t, b))) in out.iter_mut().zip(ix).zip(taps).enumerate() {
                    let i = (at + 2 * ow) as i32;
                    let m = fold((t[0].to_acc(), i), (t[1].to_acc(), i + 1));
                    let m = fold(m, (b[0].to_acc(), i + w as i32));
                    let (v, vi) = fold(m, (b[1].to_acc(), i + w as i32 + 1));
                    (*out, *ix) = (T::from_acc(v), vi);
                }
            }
            None => {
                for (out, (t, b)) in out.iter_mut().zip(taps) {
                    let m = fold((t[0].to_acc(), 0), (t[1].to_acc(), 0));
                    let m = fold(m, (b[0].to_acc(), 0));
                    *out = T::from_acc(fold(m, (b[1].to_acc(), 0)).0);
                }
            }
        }
    }
}

/// Scatter the output gradient of max pooling back to the argmax positions.
pub(crate) fn max_pool_backward(grad: &CpuStorage, idx: &[i32], g: &ConvGeom) -> CpuStorage {
    let (plane_in, plane_out) = (g.h * g.w, g.ho * g.wo);
    with_cpu!(grad, v, T => {
        let mut out = pool::any(g.n * g.c * plane_in);
        out.par_chunks_mut(plane_in).enumerate().for_each(|(plane, o)| {
            o.fill(T::default());
            let (gs, is) = (&v[plane * plane_out..][..plane_out], &idx[plane * plane_out..][..plane_out]);
            for (&gv, &at) in gs.iter().zip(is) {
                if at >= 0 {
                    let d = &mut o[at as usize];
                    *d = T::from_acc(d.to_acc() + gv.to_acc());
                }
            }
        });
        T::wrap(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::vmath::Isa;

    /// Max pooling's AVX-512, AVX2 and baseline copies give the same maxima and indices, with
    /// and without indices and with a NaN in the plane (a set the CPU lacks runs the widest below it).
    #[test]
    fn every_instruction_set_gives_the_same_pooling() {
        let (h, w) = (11, 37);
        let plane: Vec<f32> = crate::backend::cpu::gemm::tests::mat(h * w, 51)
            .into_iter()
            // Coarse values, so that windows hold ties.
            .map(|v| (v * 4.0).round() as f32)
            .collect();
        let mut with_nan = plane.clone();
        with_nan[5 * w + 9] = f32::NAN;
        // ResNet's 3×3/2 padded by 1, a 2×2/2, and a dilated 3×3 with stride 1.
        let geoms = [
            ([3, 3], [2, 2], [1, 1], [1, 1]),
            ([2, 2], [2, 2], [0, 0], [1, 1]),
            ([3, 3], [1, 1], [1, 1], [2, 2]),
        ];
        for (k, s, p, d) in geoms {
            let g = ConvGeom::new("max_pool2d", &[1, 1, h, w], k, s, p, d).unwrap();
            for src in [&plane, &with_nan] {
                for indices in [false, true] {
                    let plan = PoolPlan::new(&g, indices);
                    let run = |isa| {
                        let (mut o, mut ix) = (vec![0.0f32; g.ho * g.wo], vec![0i32; g.ho * g.wo]);
                        let (mut cmax, mut cidx, mut scratch) =
                            (vec![0.0; w], vec![0; w], vec![0; g.wo]);
                        let (mut wmax, mut widx) = (vec![0.0; w], vec![0; w]);
                        let bufs = PoolRows {
                            cmax: &mut cmax,
                            cidx: &mut cidx,
                            scratch: &mut scratch,
                            wmax: &mut wmax,
                            widx: &mut widx,
                        };
                        let ixp = indices.then_some(&mut ix[..]);
                        pool_plane_on(
                            isa,
                            Plane {
                                src,
                                o: &mut o,
                                ixp,
                            },
                            bufs,
                            &plan,
                        );
                        (o.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), ix)
                    };
                    let want = run(Isa::Baseline);
                    assert!(want.0.iter().any(|&b| f32::from_bits(b) != 0.0));
                    if indices {
                        assert!(want.1.iter().any(|&i| i != 0));
                    }
                    for isa in [Isa::Avx2, Isa::Avx512] {
                        assert_eq!(run(isa), want, "{isa:?}, {k:?}/{s:?}, indices {indices}");
                    }
                }
            }
        }
    }
}
