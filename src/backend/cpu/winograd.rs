//! Winograd's minimal filtering F(2×2, 3×3) for 3×3, stride-1, undilated f32 convolutions
//! (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each 2×2 block of
//! the output is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A` for the 4×4 input tile `d` under it, so the sum over
//! channels becomes 16 matrix products `M[ξ] = U[ξ] · V[ξ]` (`U` the transformed weights, `o×c`;
//! `V` the transformed tiles, `c×T`) with 16 multiply-adds per output pair of channels and
//! 2×2 outputs where the direct convolution takes 36: 2.25× fewer.
//!
//! In exact arithmetic the result is the direct sum; the transforms' coefficients are 0, ±1 and
//! ±½ (exact in binary) and sum at most 4 terms, so in f32 the two differ by rounding, within a
//! few units in the last place of the sum of the products' magnitudes (`tests` holds it to
//! 4e-6 of that). Two things differ beyond rounding and keep this path away from inputs where
//! they would show ([`safe`]): a non-finite value, which the transforms spread into its tile's
//! neighbours (∞ − ∞ is NaN where the direct sum gives ∞), and magnitudes near the top of the
//! f32 range, where a transform's partial sums could overflow although the direct sum does not.
//! [`pays`] keeps it to the shapes where the saved products outweigh the transforms. f32 only
//! (`Gemm::WINOGRAD`; f16 and bf16 widen to f32 on the CPU and take it too): f64, gradcheck's
//! reference, keeps the direct sums.
//!
//! Scratch: the transformed tiles and products take 4× the input's and 4× the output's size
//! (`16/(2·2)`), per sample in a batch, for the whole batch when it has fewer than two samples
//! per thread.

use super::conv::act;
use super::gemm::{gemm, Gemm};
use super::pool;
use super::vmath::{self, widest};
use crate::ops::ConvGeom;
use rayon::prelude::*;

/// Whether the path is on: `WGTORCH_CPU_WINOGRAD=0` turns it off (to compare the two).
pub(super) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("WGTORCH_CPU_WINOGRAD").as_deref() != Ok("0"))
}

widest!(filters_widest, filters_on => filters<T: Gemm>(u: &mut [T], w: &[T], c: usize));
widest!(channel_widest, channel_on => channel<T: Gemm>(v: &mut [T], col0: usize, x: &[T], g: &ConvGeom));
widest!(outputs_widest, outputs_on => outputs<T: Gemm>(y: &mut [T], m: [&[T]; 16], bv: T, res: Option<&[T]>, relu: bool, g: &ConvGeom));

/// Winograd's tile count per axis for `n` outputs (two outputs per tile).
fn tiles(n: usize) -> usize {
    n.div_ceil(2)
}

/// `G` applied to three taps `(a, b, d)` along one axis of a filter.
#[inline(always)]
fn g_of<T: Gemm>([a, b, d]: [T; 3], half: T) -> [T; 4] {
    [a, (a + b + d) * half, (a - b + d) * half, d]
}

/// `Bᵀ` applied to four values along one axis of an input tile.
#[inline(always)]
fn bt_of<T: Gemm>([d0, d1, d2, d3]: [T; 4]) -> [T; 4] {
    [d0 - d2, d1 + d2, d2 - d1, d1 - d3]
}

/// `Aᵀ` applied to four values along one axis of a product tile.
#[inline(always)]
fn at_of<T: Gemm>([m0, m1, m2, m3]: [T; 4]) -> [T; 2] {
    [m0 + m1 + m2, m1 - m2 - m3]
}

/// True when `g` (with `o` output channels) is a 3×3, stride-1, undilated convolution on which
/// F(2×2, 3×3) is cheaper than the direct GEMM, the weight transform included (paid once per
/// call, for all samples). The costs are in multiply-adds of the GEMM kernels: the direct
/// product computes `wo + 2` columns per output row; the Winograd products 16 per tile; a
/// transformed tile or output value costs about [`TRANSFORM`] of them and a transformed weight
/// [`FILTER`] (it is written once and read back from memory by the products, where the
/// weights of a deep layer do not stay in cache). Fewer than [`MIN_CHANNELS`] on either side
/// leave the products too small to run at the kernels' speed. An output of one tile (2×2 or
/// less) stays direct too: a product of one column would take the GEMM's matrix-vector path
/// for a lone sample and the packed kernels for a batch, and round differently, so the result
/// would depend on how [`forward`] splits the batch, which depends on the thread count. No
/// samples is false (the direct cost is 0), which [`forward`] relies on.
pub(super) fn pays(g: &ConvGeom, o: usize) -> bool {
    if (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw) != (3, 3, 1, 1, 1, 1) || g.c.min(o) < MIN_CHANNELS {
        return false;
    }
    let t = tiles(g.ho) * tiles(g.wo);
    if t < 2 {
        return false;
    }
    let t = t as f64;
    let (n, o, c) = (g.n as f64, o as f64, g.c as f64);
    let direct = n * o * c * 9.0 * (g.ho * (g.wo + 2)) as f64;
    let products = n * o * c * 16.0 * t;
    let transforms = 16.0 * (TRANSFORM * n * t * (c + o) + FILTER * o * c);
    products + transforms < direct
}

/// The fewest input and output channels that take this path: with fewer, each product is too
/// shallow or too narrow for the microkernels (the SimpleCNN's 32 → 64 and 64 → 32 channel
/// convolutions at 16×16, batch 64, ran 3.5–4.3 ms against 3.7–3.9 direct, on an AMD EPYC).
const MIN_CHANNELS: usize = 64;

/// The cost of one transformed tile or output value, in multiply-adds of the GEMM kernels
/// (measured on an AMD EPYC, Zen 4, with ResNet-18's layers and the SimpleCNN's).
const TRANSFORM: f64 = 14.0;

/// The cost of one transformed weight, in multiply-adds of the GEMM kernels: written once and
/// read back by the products, 16/9 of the weights' own size, from memory where a deep layer's
/// weights do not stay in cache (a ResNet-18 at batch 1 ran its 256-channel 14×14 layers
/// slower so: 1.5–1.7 ms against 1.5 direct).
const FILTER: f64 = 80.0;

/// True when every value of `x` and `w` is finite and at most [`BOUND`] in magnitude, so that
/// no partial sum of the transforms can overflow where the direct sum would not: a transformed
/// input sums at most 4 magnitudes, a transformed weight at most 9 quartered ones, each element
/// of `M` `c` of their products and each output 9 of those, under `144·c·BOUND²` in all, far below
/// `f32::MAX` for any channel count that fits in memory (and the direct sum of such values is
/// finite too).
pub(super) fn safe<T: Gemm>(x: &[T], w: &[T]) -> bool {
    let bound = T::from(BOUND).expect("the bound is representable");
    let small = |v: &[T]| {
        v.par_chunks(1 << 14).all(|ch| {
            // No early exit inside a chunk: the loop vectorises; NaN compares false.
            vmath::vectorized(|| ch.iter().fold(true, |ok, v| ok & (v.abs() <= bound)))
        })
    };
    small(x) && small(w)
}

/// The largest magnitude [`safe`] admits: 2⁴⁰ (about 1.1e12).
const BOUND: f64 = (1u64 << 40) as f64;

/// `U = G g Gᵀ` for every 3×3 filter of `w` (`[o, c, 3, 3]`), laid out `[o][16][c]`: row `ξ` of
/// output channel `oc` holds `U[ξ][oc][..]`, so product `ξ` reads its A with row stride `16·c`.
/// Sixteen input channels at a time, lane by lane (the loops over lanes vectorise).
fn weights<T: Gemm>(w: &[T], o: usize, c: usize) -> Vec<T> {
    let mut u = pool::any(o * 16 * c);
    u.par_chunks_mut(16 * c)
        .zip(w.par_chunks(9 * c))
        .with_min_len(4)
        .for_each(|(u, w)| filters_widest(u, w, c));
    u
}

/// [`weights`] for one output channel: `w` its `c` filters, `u` its 16 rows of `c`.
#[inline(always)]
fn filters<T: Gemm>(u: &mut [T], w: &[T], c: usize) {
    const L: usize = 16;
    let half = T::from(0.5).expect("½ is representable");
    for c0 in (0..c).step_by(L) {
        let n = L.min(c - c0);
        // The filters' taps, tap-major: g[tap][lane].
        let mut g = [[T::zero(); L]; 9];
        for (lane, f) in w[c0 * 9..(c0 + n) * 9].chunks_exact(9).enumerate() {
            for (tap, &v) in f.iter().enumerate() {
                g[tap][lane] = v;
            }
        }
        // G g (4×3), then (G g) Gᵀ (4×4): rows and columns both map (a, b, d) to
        // (a, (a + b + d)/2, (a - b + d)/2, d).
        let mut t = [[T::zero(); L]; 12];
        for j in 0..3 {
            for l in 0..L {
                let r = g_of([g[j][l], g[3 + j][l], g[6 + j][l]], half);
                for (i, v) in r.into_iter().enumerate() {
                    t[3 * i + j][l] = v;
                }
            }
        }
        for i in 0..4 {
            let mut out = [[T::zero(); L]; 4];
            for l in 0..L {
                let r = g_of([t[3 * i][l], t[3 * i + 1][l], t[3 * i + 2][l]], half);
                for (j, v) in r.into_iter().enumerate() {
                    out[j][l] = v;
                }
            }
            for (j, v) in out.iter().enumerate() {
                let dst = &mut u[(4 * i + j) * c + c0..][..n];
                match <&mut [T; L]>::try_from(&mut *dst) {
                    Ok(dst) => *dst = *v,
                    Err(_) => dst.copy_from_slice(&v[..n]),
                }
            }
        }
    }
}

/// `V = Bᵀ d B` for every 4×4 tile `d` of every channel of `x` (`[N, C, H, W]`, padded by `ph`,
/// `pw`), laid out `[c][16][N·T]` (tiles of a sample row-major, samples in order): product `ξ`
/// reads its B with row stride `16·N·T`.
fn tiles_of<T: Gemm>(x: &[T], g: &ConvGeom, par: bool) -> Vec<T> {
    let (t, hw) = (tiles(g.ho) * tiles(g.wo), g.h * g.w);
    let nt = g.n * t;
    let mut v = pool::any(g.c * 16 * nt);
    each(par, &mut v, 16 * nt, |c, v| {
        for n in 0..g.n {
            let plane = &x[(n * g.c + c) * hw..][..hw];
            channel_widest(v, n * t, plane, g);
        }
    });
    v
}

/// [`tiles_of`] for one plane `x`: into columns `col0..col0 + T` of `v`'s 16 rows. First each padded row's
/// horizontal transforms (`(d0 - d2, d1 + d2, d2 - d1, d1 - d3)` of each tile's four columns),
/// kept apart by the row's parity, so that the vertical transforms of every tile are sums of
/// the same index in four arrays: tile `i` (`ti·tw + tj`) reads rows `2ti`, `2ti + 1` at `i`
/// and rows `2ti + 2`, `2ti + 3` at `i + tw`, and each product's row is one contiguous run.
#[inline(always)]
fn channel<T: Gemm>(v: &mut [T], col0: usize, x: &[T], g: &ConvGeom) {
    let (th, tw) = (tiles(g.ho), tiles(g.wo));
    let t = th * tw;
    let stride = v.len() / 16;
    // hz[parity][s]: (th + 1)·tw values, row q of the parity at q·tw.
    let len = (th + 1) * tw;
    let mut hz = pool::any::<T>(8 * len);
    let mut row = vec![T::zero(); 2 * tw + 2];
    for p in 0..2 * th + 2 {
        let hin = p as isize - g.ph as isize;
        row.fill(T::zero());
        if (0..g.h as isize).contains(&hin) {
            // Input column j is padded column j + pw.
            let src = &x[hin as usize * g.w..][..g.w];
            let lo = g.pw.min(row.len());
            let n = g.w.min(row.len() - lo);
            row[lo..lo + n].copy_from_slice(&src[..n]);
        }
        let at = (p / 2) * tw;
        let base = (p % 2) * 4 * len;
        let (h0, rest) = hz[base..base + 4 * len].split_at_mut(len);
        let (h1, rest) = rest.split_at_mut(len);
        let (h2, h3) = rest.split_at_mut(len);
        let (h0, h1, h2, h3) = (
            &mut h0[at..at + tw],
            &mut h1[at..at + tw],
            &mut h2[at..at + tw],
            &mut h3[at..at + tw],
        );
        for (j, d) in row.windows(4).step_by(2).enumerate() {
            [h0[j], h1[j], h2[j], h3[j]] = bt_of([d[0], d[1], d[2], d[3]]);
        }
    }
    // Bᵀ down the columns: (r0 - r2, r1 + r2, r2 - r1, r1 - r3) over rows 2ti..2ti + 3.
    for s in 0..4 {
        let (ev, od) = (&hz[s * len..][..len], &hz[(4 + s) * len..][..len]);
        let (r0, r1, r2, r3) = (&ev[..t], &od[..t], &ev[tw..tw + t], &od[tw..tw + t]);
        let (v0, rest) = v.split_at_mut(4 * stride);
        let (v1, rest) = rest.split_at_mut(4 * stride);
        let (v2, v3) = rest.split_at_mut(4 * stride);
        let run = s * stride + col0;
        let (v0, v1, v2, v3) = (
            &mut v0[run..run + t],
            &mut v1[run..run + t],
            &mut v2[run..run + t],
            &mut v3[run..run + t],
        );
        for i in 0..t {
            [v0[i], v1[i], v2[i], v3[i]] = bt_of([r0[i], r1[i], r2[i], r3[i]]);
        }
    }
    pool::give_back(hz);
}

/// `y = conv(x, w) + bias` then the epilogue, by F(2×2, 3×3), for a `g` that [`pays`] and
/// inputs that are [`safe`]: `x` `[N, C, H, W]`, `w` `[O, C, 3, 3]`, the result `[N, O, Ho, Wo]`.
pub(super) fn forward<T: Gemm>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    (residual, relu): (Option<&[T]>, bool),
    g: &ConvGeom,
    o: usize,
) -> Vec<T> {
    let l = g.ho * g.wo;
    if g.n == 0 || l == 0 || o == 0 {
        return Vec::new();
    }
    let u = weights(w, o, g.c);
    let mut out = pool::any(g.n * o * l);
    if g.n >= 2 * rayon::current_num_threads() {
        // A batch: one sample per task, each in order on its thread (its transformed tiles and
        // products then stay in that core's cache, where the whole batch's would not).
        let (chw, one) = (g.c * g.h * g.w, ConvGeom { n: 1, ..*g });
        out.par_chunks_mut(o * l).enumerate().for_each(|(n, y)| {
            let x = &x[n * chw..][..chw];
            let r = residual.map(|r| &r[n * o * l..][..o * l]);
            samples(x, &u, bias, (r, relu), &one, o, y, false);
        });
    } else {
        samples(x, &u, bias, (residual, relu), g, o, &mut out, true);
    }
    pool::give_back(u);
    out
}

/// The convolution of the samples of `x` (`g.n` of them) with the transformed weights `u`, into
/// `out`: each step split over threads when `par`, else in order.
#[allow(clippy::too_many_arguments)]
fn samples<T: Gemm>(
    x: &[T],
    u: &[T],
    bias: Option<&[T]>,
    (residual, relu): (Option<&[T]>, bool),
    g: &ConvGeom,
    o: usize,
    out: &mut [T],
    par: bool,
) {
    let (c, l) = (g.c, g.ho * g.wo);
    let t = tiles(g.ho) * tiles(g.wo);
    let nt = g.n * t;
    let v = tiles_of(x, g, par);
    // M[ξ] (o×NT) = U[ξ] (o×c) · V[ξ] (c×NT), one product per task.
    let mut m = pool::any(16 * o * nt);
    each(par, &mut m, o * nt, |xi, m| {
        let (a, b) = (&u[xi * c..], &v[xi * nt..]);
        gemm(o, c, nt, a, [16 * c, 1], b, [16 * nt, 1], T::zero(), m, nt);
    });
    pool::give_back(v);
    // Y = Aᵀ M A, one output plane per task.
    let prods = &m;
    each(par, out, l, |plane, y| {
        let (n, oc) = (plane / o, plane % o);
        let bv = bias.map_or(T::zero(), |b| b[oc]);
        let res = residual.map(|r| &r[plane * l..][..l]);
        let m: [&[T]; 16] = std::array::from_fn(|xi| &prods[(xi * o + oc) * nt + n * t..][..t]);
        outputs_widest(y, m, bv, res, relu, g);
    });
    pool::give_back(m);
}

/// `f(i, chunk)` for the chunks of `len` of `v`: on rayon's threads when `par`, else in order.
fn each<T: Send>(par: bool, v: &mut [T], len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if par {
        v.par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, ch)| f(i, ch));
    } else {
        v.chunks_mut(len).enumerate().for_each(|(i, ch)| f(i, ch));
    }
}

/// `Y = Aᵀ M A` for one output channel (`m[ξ]` its `T` values of product `ξ`), plus `bv`, then
/// the epilogue, into its `Ho×Wo` plane `y`: down the columns for every tile at once
/// (`(m0 + m1 + m2, m1 - m2 - m3)`), then across each output row pair.
#[inline(always)]
fn outputs<T: Gemm>(
    y: &mut [T],
    m: [&[T]; 16],
    bv: T,
    res: Option<&[T]>,
    relu: bool,
    g: &ConvGeom,
) {
    let (th, tw) = (tiles(g.ho), tiles(g.wo));
    let t = th * tw;
    // vt[i][s]: T values each.
    let mut vt = pool::any::<T>(8 * t);
    for s in 0..4 {
        let (a, b, c, d) = (&m[s][..t], &m[4 + s][..t], &m[8 + s][..t], &m[12 + s][..t]);
        let (top, bottom) = vt.split_at_mut(4 * t);
        let (top, bottom) = (
            &mut top[s * t..(s + 1) * t],
            &mut bottom[s * t..(s + 1) * t],
        );
        for i in 0..t {
            [top[i], bottom[i]] = at_of([a[i], b[i], c[i], d[i]]);
        }
    }
    let mut pair = vec![T::zero(); 2 * tw];
    for oh in 0..g.ho {
        let (ti, i) = (oh / 2, oh % 2);
        let col = |s: usize| &vt[(i * 4 + s) * t + ti * tw..][..tw];
        let (a, b, c, d) = (col(0), col(1), col(2), col(3));
        for (j, p) in pair.chunks_exact_mut(2).enumerate() {
            [p[0], p[1]] = at_of([a[j], b[j], c[j], d[j]]);
        }
        y[oh * g.wo..][..g.wo].copy_from_slice(&pair[..g.wo]);
    }
    pool::give_back(vt);
    // The bias, the residual and the ReLU over the plane, as the direct path applies them.
    match res {
        Some(r) => {
            for (y, &r) in y.iter_mut().zip(r) {
                *y = act((*y + bv) + r, relu);
            }
        }
        None => {
            for y in y.iter_mut() {
                *y = act(*y + bv, relu);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ConvGeom;

    /// Deterministic values in [-1, 1).
    fn noise(len: usize, seed: u64) -> Vec<f32> {
        crate::backend::cpu::gemm::tests::mat(len, seed)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    fn geom(n: usize, c: usize, h: usize, w: usize, pad: [usize; 2]) -> ConvGeom {
        ConvGeom::new("conv2d", &[n, c, h, w], [3, 3], [1, 1], pad, [1, 1]).unwrap()
    }

    /// The direct sum in f64, with its magnitude `Σ|w·x| + |b| + |r|` per output (the scale of
    /// its rounding error).
    fn direct(
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        r: Option<&[f32]>,
        g: &ConvGeom,
        o: usize,
    ) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for n in 0..g.n {
            for oc in 0..o {
                for oh in 0..g.ho {
                    for ow in 0..g.wo {
                        let bv = b.map_or(0.0, |b| b[oc] as f64);
                        let (mut s, mut mag) = (bv, bv.abs());
                        for c in 0..g.c {
                            for ki in 0..3 {
                                for kj in 0..3 {
                                    let (ih, iw) = (oh + ki, ow + kj);
                                    let (Some(ih), Some(iw)) =
                                        (ih.checked_sub(g.ph), iw.checked_sub(g.pw))
                                    else {
                                        continue;
                                    };
                                    if ih >= g.h || iw >= g.w {
                                        continue;
                                    }
                                    let p = w[((oc * g.c + c) * 3 + ki) * 3 + kj] as f64
                                        * x[((n * g.c + c) * g.h + ih) * g.w + iw] as f64;
                                    s += p;
                                    mag += p.abs();
                                }
                            }
                        }
                        if let Some(r) = r {
                            let rv = r[((n * o + oc) * g.ho + oh) * g.wo + ow] as f64;
                            s += rv;
                            mag += rv.abs();
                        }
                        out.push((s, mag));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_direct_sum() {
        // Odd and even sizes (a last tile half outside the output), paddings 0 to 2, a batch,
        // channel counts that are not multiples of 16, bias, residual and ReLU.
        let cases = [
            (1, 16, 5, 7, 16, [1, 1], true, false, false),
            (2, 20, 8, 6, 17, [1, 1], true, true, true),
            (1, 33, 9, 4, 16, [0, 0], false, false, true),
            (1, 16, 3, 3, 24, [2, 1], true, true, false),
            (3, 17, 6, 11, 18, [0, 2], false, true, true),
        ];
        for (i, &(n, c, h, w, o, pad, bias, res, relu)) in cases.iter().enumerate() {
            let g = geom(n, c, h, w, pad);
            let s = i as u64 * 4;
            let x = noise(n * c * h * w, s + 1);
            let wt = noise(o * c * 9, s + 2);
            let b = bias.then(|| noise(o, s + 3));
            let r = res.then(|| noise(n * o * g.ho * g.wo, s + 4));
            let y = forward(&x, &wt, b.as_deref(), (r.as_deref(), relu), &g, o);
            let want = direct(&x, &wt, b.as_deref(), r.as_deref(), &g, o);
            assert_eq!(y.len(), want.len(), "case {i}");
            for (j, (&y, &(s, mag))) in y.iter().zip(&want).enumerate() {
                let s = if relu { s.max(0.0) } else { s };
                let tol = 4e-6 * mag + 1e-30;
                assert!(
                    (y as f64 - s).abs() <= tol,
                    "case {i}, output {j}: {y} against {s} (tolerance {tol:e})"
                );
            }
        }
    }

    /// A batch of 3 runs one sample per task on one thread and as one batch on two: the same
    /// bits either way.
    #[test]
    fn a_batch_gives_the_same_bits_on_any_thread_count() {
        let g = geom(3, 64, 7, 9, [1, 1]);
        let (x, w) = (noise(3 * 64 * 63, 21), noise(64 * 64 * 9, 22));
        let b = noise(64, 23);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| forward(&x, &w, Some(&b), (None, true), &g, 64))
        };
        let (one, two) = (run(1), run(2));
        assert_eq!(one.len(), 3 * 64 * 63);
        assert!(one
            .iter()
            .zip(&two)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        let want = direct(&x, &w, Some(&b), None, &g, 64);
        for (&y, &(s, mag)) in one.iter().zip(&want) {
            assert!((y as f64 - s.max(0.0)).abs() <= 4e-6 * mag);
        }
    }

    /// The transforms' AVX-512, AVX2 and baseline copies (adds, subtractions and halvings, no
    /// products to contract) give the same bits; a set the CPU lacks runs the widest below it.
    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        use vmath::Isa;
        let isas = [Isa::Baseline, Isa::Avx2, Isa::Avx512];
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits());
        // 37 channels: two full 16-lane groups and a partial one.
        let (c, g) = (37, geom(1, 37, 9, 8, [1, 2]));
        let w = noise(9 * c, 31);
        let filters = |isa| {
            let mut u = vec![0.0f32; 16 * c];
            filters_on(isa, &mut u, &w, c);
            u
        };
        let t = tiles(g.ho) * tiles(g.wo);
        let x = noise(g.h * g.w, 32);
        let channel = |isa| {
            // Columns 3..3 + t of rows of 2t + 3 (a sample after the first).
            let mut v = vec![0.0f32; 16 * (2 * t + 3)];
            channel_on(isa, &mut v, 3, &x, &g);
            v
        };
        let m: Vec<Vec<f32>> = (0..16u64).map(|xi| noise(t, 40 + xi)).collect();
        let (bv, r) = (0.25, noise(g.ho * g.wo, 33));
        let outputs = |isa, res: Option<&[f32]>, relu| {
            let mut y = vec![0.0f32; g.ho * g.wo];
            let m = std::array::from_fn(|xi| &m[xi][..]);
            outputs_on(isa, &mut y, m, bv, res, relu, &g);
            y
        };
        let (u, v) = (filters(Isa::Baseline), channel(Isa::Baseline));
        let (y0, y1) = (
            outputs(Isa::Baseline, None, false),
            outputs(Isa::Baseline, Some(&r), true),
        );
        assert!(u.iter().chain(&v).chain(&y0).any(|&e| e != 0.0));
        for isa in isas {
            assert!(same(&filters(isa), &u), "{isa:?}");
            assert!(same(&channel(isa), &v), "{isa:?}");
            assert!(same(&outputs(isa, None, false), &y0), "{isa:?}");
            assert!(same(&outputs(isa, Some(&r), true), &y1), "{isa:?}");
        }
    }

    #[test]
    fn pays_where_it_saves_products() {
        let conv = |c: usize, hw: usize, o: usize| (geom(1, c, hw, hw, [1, 1]), o);
        // ResNet-18's stride-1 3×3 layers at 224², batch 1: the two larger maps take it; at
        // 14×14 and 7×7 the weights to transform outweigh the products saved until the batch
        // shares them.
        for (c, hw) in [(64, 56), (128, 28)] {
            let (g, o) = conv(c, hw, c);
            assert!(pays(&g, o), "{c}@{hw}²");
        }
        for (c, hw) in [(256, 14), (512, 7)] {
            let (g, o) = conv(c, hw, c);
            assert!(!pays(&g, o), "{c}@{hw}²");
        }
        assert!(pays(&geom(2, 256, 14, 14, [1, 1]), 256));
        // Batches (one sample per task).
        assert!(pays(&geom(8, 64, 56, 56, [1, 1]), 64));
        assert!(pays(&geom(64, 64, 16, 16, [1, 1]), 64));
        // The SimpleCNN's second convolution at batch 64 (and its input gradient): too few
        // channels for the products to run fast.
        assert!(!pays(&geom(64, 32, 16, 16, [1, 1]), 64));
        assert!(!pays(&geom(64, 64, 16, 16, [1, 1]), 32));
        // `tests/cpu_kernels.rs`'s convolution (and its input gradient) takes the path.
        assert!(pays(&geom(2, 64, 31, 32, [1, 1]), 64));
        // No samples, one tile, too few channels on either side, or another geometry.
        assert!(!pays(&geom(0, 64, 56, 56, [1, 1]), 64));
        assert!(!pays(&geom(64, 512, 2, 2, [1, 1]), 512));
        assert!(!pays(&conv(3, 32, 64).0, 64));
        assert!(!pays(&conv(64, 32, 8).0, 8));
        let other = [
            ([3, 3], [2, 2], [1, 1]),
            ([3, 3], [1, 1], [2, 2]),
            ([5, 5], [1, 1], [1, 1]),
            ([1, 3], [1, 1], [1, 1]),
        ];
        for (k, s, d) in other {
            let g = ConvGeom::new("conv2d", &[1, 64, 56, 56], k, s, [1, 1], d).unwrap();
            assert!(!pays(&g, 64), "{k:?} {s:?} {d:?}");
        }
    }

    #[test]
    fn safe_only_for_finite_values_far_from_overflow() {
        let ok = noise(40_000, 7);
        assert!(safe(&ok, &ok[..900]));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2.2e12, -2.2e12] {
            let mut v = ok.clone();
            v[33_333] = bad;
            assert!(!safe(&v, &ok[..900]), "{bad} in x");
            assert!(!safe(&ok, &v), "{bad} in w");
        }
        assert!(safe(&[1.0e12f32], &[-1.0e12f32]));
    }
}
