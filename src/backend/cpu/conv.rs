//! CPU convolution: one sample at a time, in parallel over the batch. Each task unfolds its
//! sample into a reused buffer (`C*kh*kw × Ho*Wo`, never the whole batch's columns) and runs one
//! packed GEMM on it; 1×1 stride-1 unpadded convolutions skip the unfold. The backward pair uses
//! the same per-sample columns: `dW = Σ_n dY[n] · cols[n]ᵀ` (one accumulator per task, summed at
//! the end) and `dX[n] = fold(Wᵀ · dY[n])`.

use super::matmul::{gemm, Gemm};
use super::{pool, with_cpu, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::ops::ConvGeom;
use rayon::prelude::*;

/// `y = conv(x, w) + bias`: `x` `[N, C, H, W]`, `w` `[O, C, kh, kw]`, bias `[O]`, all contiguous
/// and of one dtype. Returns `[N, O, Ho, Wo]`.
pub(crate) fn conv2d(
    x: &CpuStorage,
    w: &CpuStorage,
    bias: Option<&CpuStorage>,
    g: &ConvGeom,
    o: usize,
) -> CpuStorage {
    widen(
        x,
        w,
        bias,
        |x, w, b| forward(x, w, b, g, o),
        |x, w, b| forward(x, w, b, g, o),
    )
}

/// The input gradient `[N, C, H, W]` from `gy` `[N, O, Ho, Wo]` and `w`.
pub(crate) fn conv2d_backward_input(
    gy: &CpuStorage,
    w: &CpuStorage,
    g: &ConvGeom,
    o: usize,
) -> CpuStorage {
    widen(
        gy,
        w,
        None,
        |gy, w, _| backward_input(gy, w, g, o),
        |gy, w, _| backward_input(gy, w, g, o),
    )
}

/// The weight gradient `[O, C, kh, kw]` from `gy` `[N, O, Ho, Wo]` and `x`.
pub(crate) fn conv2d_backward_weight(
    gy: &CpuStorage,
    x: &CpuStorage,
    g: &ConvGeom,
    o: usize,
) -> CpuStorage {
    widen(
        gy,
        x,
        None,
        |gy, x, _| backward_weight(gy, x, g, o),
        |gy, x, _| backward_weight(gy, x, g, o),
    )
}

/// Run the f32 or f64 kernel on storages of that type; half types widen to f32 and round the
/// result once (as matmul does).
fn widen(
    a: &CpuStorage,
    b: &CpuStorage,
    c: Option<&CpuStorage>,
    f32k: impl Fn(&[f32], &[f32], Option<&[f32]>) -> Vec<f32>,
    f64k: impl Fn(&[f64], &[f64], Option<&[f64]>) -> Vec<f64>,
) -> CpuStorage {
    match (a, b) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => {
            CpuStorage::F32(f32k(a, b, c.and_then(f32::slice)))
        }
        (CpuStorage::F64(a), CpuStorage::F64(b)) => {
            CpuStorage::F64(f64k(a, b, c.and_then(f64::slice)))
        }
        _ => with_cpu!(a, av, T => {
            let wide = |v: &[T]| v.iter().map(|x| x.to_f64() as f32).collect::<Vec<f32>>();
            let bv = T::slice(b).expect("conv2d: operands share a dtype");
            let cv = c.map(|c| wide(T::slice(c).expect("conv2d: bias shares the dtype")));
            let out = f32k(&wide(av), &wide(bv), cv.as_deref());
            T::wrap(out.into_iter().map(|v| T::from_f64(v as f64)).collect())
        }),
    }
}

/// A task's column buffer, taken from the host pool and returned to it when the task's state drops
/// (a fresh multi-hundred-KiB buffer per task would fault its pages in every step).
struct Cols<T: Gemm>(Vec<T>);

impl<T: Gemm> Drop for Cols<T> {
    fn drop(&mut self) {
        pool::give_back(std::mem::take(&mut self.0));
    }
}
impl<T: Gemm> std::ops::Deref for Cols<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}
impl<T: Gemm> std::ops::DerefMut for Cols<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

/// The column buffer for one sample of `g` (`k` rows of `l`); empty for pointwise convolutions,
/// whose columns are the sample itself.
fn cols<T: Gemm>(g: &ConvGeom, k: usize, l: usize) -> Cols<T> {
    Cols(pool::any(if is_pointwise(g) { 0 } else { k * l }))
}

/// True when the columns of a sample are the sample itself (1×1, stride 1, no padding).
fn is_pointwise(g: &ConvGeom) -> bool {
    g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0
}

fn forward<T: Gemm>(x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom, o: usize) -> Vec<T> {
    let (k, l, chw) = (g.c * g.kh * g.kw, g.ho * g.wo, g.c * g.h * g.w);
    let mut out = pool::any(g.n * o * l);
    if l == 0 || o == 0 {
        return out;
    }
    out.par_chunks_mut(o * l).enumerate().for_each_init(
        || cols(g, k, l),
        |cols, (n, y)| {
            let xn = &x[n * chw..(n + 1) * chw];
            let cols: &[T] = if is_pointwise(g) {
                xn
            } else {
                im2col(xn, g, cols);
                cols
            };
            if let Some(b) = bias {
                for (row, &bv) in y.chunks_mut(l).zip(b) {
                    row.fill(bv);
                }
            }
            let beta = if bias.is_some() { T::one() } else { T::zero() };
            gemm(o, k, l, w, [k, 1], cols, [l, 1], beta, y, l);
        },
    );
    out
}

fn backward_input<T: Gemm>(gy: &[T], w: &[T], g: &ConvGeom, o: usize) -> Vec<T> {
    let (k, l, chw) = (g.c * g.kh * g.kw, g.ho * g.wo, g.c * g.h * g.w);
    let mut gx = pool::any(g.n * chw);
    if chw == 0 {
        return gx;
    }
    gx.par_chunks_mut(chw).enumerate().for_each_init(
        || cols(g, k, l),
        |cols, (n, gxn)| {
            let gyn = &gy[n * o * l..(n + 1) * o * l];
            // Wᵀ [k, o] · dY[n] [o, l]
            if is_pointwise(g) {
                gemm(k, o, l, w, [1, k], gyn, [l, 1], T::zero(), gxn, l);
            } else {
                gemm(k, o, l, w, [1, k], gyn, [l, 1], T::zero(), cols, l);
                col2im(cols, g, gxn);
            }
        },
    );
    gx
}

fn backward_weight<T: Gemm>(gy: &[T], x: &[T], g: &ConvGeom, o: usize) -> Vec<T> {
    let (k, l, chw) = (g.c * g.kh * g.kw, g.ho * g.wo, g.c * g.h * g.w);
    let zero = || pool::filled(o * k, T::zero());
    if l == 0 {
        return zero();
    }
    // Fixed groups of samples, one accumulator each, summed in order: the result does not depend
    // on how rayon schedules the groups (training runs are reproducible).
    const GROUP: usize = 4;
    let parts: Vec<Vec<T>> = (0..g.n.div_ceil(GROUP))
        .into_par_iter()
        .map(|gi| {
            let (mut acc, mut cols) = (zero(), cols(g, k, l));
            for n in gi * GROUP..((gi + 1) * GROUP).min(g.n) {
                let xn = &x[n * chw..(n + 1) * chw];
                let c: &[T] = if is_pointwise(g) {
                    xn
                } else {
                    im2col(xn, g, &mut cols);
                    &cols
                };
                // dY[n] [o, l] · colsᵀ [l, k], accumulated.
                let gyn = &gy[n * o * l..(n + 1) * o * l];
                gemm(o, l, k, gyn, [l, 1], c, [1, l], T::one(), &mut acc, k);
            }
            acc
        })
        .collect();
    let mut parts = parts.into_iter();
    let mut total = parts.next().unwrap_or_else(zero);
    for p in parts {
        total.iter_mut().zip(&p).for_each(|(a, &b)| *a += b);
        pool::give_back(p);
    }
    total
}

/// For kernel offset `(ki, kj)` and output row `oh`: the input row, or None when it is padding,
/// and the range of output columns `ow` whose input column `ow*sw + kj*dw - pw` is inside.
pub(super) fn row_span(
    g: &ConvGeom,
    ki: usize,
    kj: usize,
    oh: usize,
) -> Option<(usize, usize, usize)> {
    let h = (oh * g.sh + ki * g.dh) as isize - g.ph as isize;
    if h < 0 || h >= g.h as isize {
        return None;
    }
    let off = (kj * g.dw) as isize - g.pw as isize;
    // First ow with ow*sw + off >= 0, and one past the last with ow*sw + off < W.
    let lo = if off >= 0 {
        0
    } else {
        ((-off) as usize).div_ceil(g.sw)
    };
    let hi = if (g.w as isize) <= off {
        0
    } else {
        ((g.w as isize - off) as usize).div_ceil(g.sw).min(g.wo)
    };
    Some((h as usize, lo.min(hi), hi))
}

/// Unfold one sample `[C, H, W]` into `cols` `[C*kh*kw, Ho*Wo]` (zeros for padding).
fn im2col<T: Gemm>(x: &[T], g: &ConvGeom, cols: &mut [T]) {
    let (l, hw) = (g.ho * g.wo, g.h * g.w);
    let off = |kj: usize| (kj * g.dw) as isize - g.pw as isize;
    for (r, row) in cols.chunks_mut(l).enumerate() {
        let (c, ki, kj) = (r / (g.kh * g.kw), (r / g.kw) % g.kh, r % g.kw);
        let plane = &x[c * hw..(c + 1) * hw];
        for (oh, dst) in row.chunks_mut(g.wo).enumerate() {
            let Some((h, lo, hi)) = row_span(g, ki, kj, oh) else {
                dst.fill(T::zero());
                continue;
            };
            let src = &plane[h * g.w..(h + 1) * g.w];
            dst[..lo].fill(T::zero());
            dst[hi..].fill(T::zero());
            let first = (lo * g.sw) as isize + off(kj);
            if g.sw == 1 {
                dst[lo..hi].copy_from_slice(&src[first as usize..first as usize + hi - lo]);
            } else {
                for (i, d) in dst[lo..hi].iter_mut().enumerate() {
                    *d = src[first as usize + i * g.sw];
                }
            }
        }
    }
}

/// Fold `cols` `[C*kh*kw, Ho*Wo]` into one sample `[C, H, W]`, summing overlaps (im2col's adjoint).
fn col2im<T: Gemm>(cols: &[T], g: &ConvGeom, x: &mut [T]) {
    let (l, hw) = (g.ho * g.wo, g.h * g.w);
    x.fill(T::zero());
    let off = |kj: usize| (kj * g.dw) as isize - g.pw as isize;
    for (r, row) in cols.chunks(l).enumerate() {
        let (c, ki, kj) = (r / (g.kh * g.kw), (r / g.kw) % g.kh, r % g.kw);
        let plane = &mut x[c * hw..(c + 1) * hw];
        for (oh, src) in row.chunks(g.wo).enumerate() {
            let Some((h, lo, hi)) = row_span(g, ki, kj, oh) else {
                continue;
            };
            let dst = &mut plane[h * g.w..(h + 1) * g.w];
            let first = ((lo * g.sw) as isize + off(kj)) as usize;
            for (i, &v) in src[lo..hi].iter().enumerate() {
                dst[first + i * g.sw] += v;
            }
        }
    }
}
