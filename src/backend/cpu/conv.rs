//! CPU convolution: one GEMM per sample, in parallel over the batch (and inside each GEMM when
//! the batch is small). The unfolded sample (`C*kh*kw × Ho*Wo`) is never written out: the GEMM
//! packs its rows from the sample's phase layout ([`Taps`], runs of memory), or unfolds them as it
//! packs ([`Unfold`], when a padding larger than the image would make the layout bigger than the
//! unfolded matrix); 1×1 stride-1 unpadded convolutions read the sample as it is. The weight
//! gradient packs the same columns transposed ([`Compact`]), `dW = Σ_n dY[n] · cols[n]ᵀ` (one
//! accumulator per group of samples, summed in order). The input gradient of a stride-1
//! convolution with 16 or more input channels is the forward convolution of the padded `dY` with
//! the flipped, channel-transposed weight ([`as_forward`]); the others fold `Wᵀ · dY[n]`
//! back into the image.

use super::gemm::{copy_short, gemm, gemm_src, Gemm, Source, Strided, Transposed};
use super::{half_f32, pool, winograd, CpuElem, CpuStorage};
use crate::backend::ConvEpilogue;
use crate::ops::{transposed_as_forward, ConvGeom};
use rayon::prelude::*;

/// `y = conv(x, w) + bias`, then the epilogue: `x` `[N, C, H, W]`, `w` `[O, C, kh, kw]`, bias
/// `[O]`, all contiguous and of one dtype (the residual too). Returns `[N, O, Ho, Wo]`.
pub(crate) fn conv2d(
    x: &CpuStorage,
    w: &CpuStorage,
    bias: Option<&CpuStorage>,
    epi: ConvEpilogue<'_, CpuStorage>,
    g: &ConvGeom,
    o: usize,
) -> CpuStorage {
    let relu = epi.relu;
    widen(
        x,
        w,
        [bias, epi.residual],
        |x, w, [b, r]| forward(x, w, b, (r, relu), g, o),
        |x, w, [b, r]| forward(x, w, b, (r, relu), g, o),
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
        [None, None],
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
        [None, None],
        |gy, x, _| backward_weight(gy, x, g, o),
        |gy, x, _| backward_weight(gy, x, g, o),
    )
}

/// Optional operands of one dtype (a bias, a residual).
type Extra<'a, T> = [Option<&'a [T]>; 2];

/// Run the f32 or f64 kernel on storages of that type; half types widen to f32 and round the
/// result once (as matmul does; the epilogue of a fused convolution included).
fn widen(
    a: &CpuStorage,
    b: &CpuStorage,
    extra: [Option<&CpuStorage>; 2],
    f32k: impl Fn(&[f32], &[f32], Extra<'_, f32>) -> Vec<f32>,
    f64k: impl Fn(&[f64], &[f64], Extra<'_, f64>) -> Vec<f64>,
) -> CpuStorage {
    match (a, b) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => {
            CpuStorage::F32(f32k(a, b, extra.map(|c| c.and_then(f32::slice))))
        }
        (CpuStorage::F64(a), CpuStorage::F64(b)) => {
            CpuStorage::F64(f64k(a, b, extra.map(|c| c.and_then(f64::slice))))
        }
        _ => {
            // Half types (the op layer admits float operands of one dtype).
            let (aw, half) = half_f32::widen(a).expect("conv2d: a float dtype");
            let wide = |s: &CpuStorage| match half_f32::widen(s) {
                Some((v, h)) if h == half => v,
                _ => panic!("conv2d: operands share a dtype"),
            };
            let bw = wide(b);
            let cv = extra.map(|c| c.map(wide));
            let out = f32k(&aw, &bw, [cv[0].as_deref(), cv[1].as_deref()]);
            let narrow = half_f32::narrow(&out, half);
            for v in [aw, bw, out].into_iter().chain(cv.into_iter().flatten()) {
                pool::give_back(v);
            }
            narrow
        }
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

/// `(residual, relu)`: see [`ConvEpilogue`].
type Epi<'a, T> = (Option<&'a [T]>, bool);

/// `max(y, 0)` when `relu` (NaN and -0 kept, as `relu` does), else `y` (the Winograd path's
/// epilogue too).
#[inline(always)]
pub(super) fn act<T: Gemm>(y: T, relu: bool) -> T {
    if relu && y < T::zero() {
        T::zero()
    } else {
        y
    }
}

fn forward<T: Gemm>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    (residual, relu): Epi<'_, T>,
    g: &ConvGeom,
    o: usize,
) -> Vec<T> {
    let (k, l, chw) = (g.c * g.kh * g.kw, g.ho * g.wo, g.c * g.h * g.w);
    let mut out = pool::any(g.n * o * l);
    if l == 0 || o == 0 {
        return out;
    }
    if let Some(r) = residual {
        assert_eq!(r.len(), out.len(), "conv2d: residual of the output's size");
    }
    if T::WINOGRAD && winograd::enabled() && winograd::pays(g, o) && winograd::safe(x, w) {
        pool::give_back(out);
        return winograd::forward(x, w, bias, (residual, relu), g, o);
    }
    // The epilogue over a sample's output `y` (sample `n`) where the GEMM wrote it in place.
    let epilogue = |n: usize, y: &mut [T]| {
        if residual.is_none() && !relu {
            return;
        }
        y.par_chunks_mut(l)
            .enumerate()
            .with_min_len(PAR_ELEMS.div_ceil(l))
            .for_each(|(oc, row)| {
                let at = (n * o + oc) * l;
                match residual {
                    Some(r) => row
                        .iter_mut()
                        .zip(&r[at..at + l])
                        .for_each(|(y, &r)| *y = act(*y + r, relu)),
                    None => row.iter_mut().for_each(|y| *y = act(*y, relu)),
                }
            });
    };
    let w = rows(w, k);
    let fill_bias = |y: &mut [T]| match bias {
        Some(b) => {
            for (row, &bv) in y.chunks_mut(l).zip(b) {
                row.fill(bv);
            }
            T::one()
        }
        None => T::zero(),
    };
    out.par_chunks_mut(o * l).enumerate().for_each(|(n, y)| {
        let xn = &x[n * chw..(n + 1) * chw];
        if is_pointwise(g) {
            let beta = fill_bias(y);
            gemm_src(o, k, l, &w, &rows(xn, l), beta, y, l, T::kernel(o, l));
            epilogue(n, y);
            return;
        }
        let Some(taps) = Taps::new(xn, g) else {
            let beta = fill_bias(y);
            gemm_src(
                o,
                k,
                l,
                &w,
                &Unfold { x: xn, g },
                beta,
                y,
                l,
                T::kernel(o, l),
            );
            epilogue(n, y);
            return;
        };
        let lq = g.ho * taps.wq;
        if taps.wq == g.wo {
            let beta = fill_bias(y);
            gemm_src(o, k, l, &w, &taps, beta, y, l, T::kernel(o, l));
            epilogue(n, y);
            return;
        }
        // The product has `wq - wo` extra columns per output row: computed into a buffer and
        // dropped when the rows are copied out (with the bias added and the epilogue applied).
        let mut wide = Cols(pool::any(o * lq));
        gemm_src(
            o,
            k,
            lq,
            &w,
            &taps,
            T::zero(),
            &mut wide,
            lq,
            T::kernel(o, lq),
        );
        y.par_chunks_mut(l)
            .zip(wide.par_chunks(lq))
            .with_min_len(PAR_ELEMS.div_ceil(l))
            .enumerate()
            .for_each(|(oc, (dst, src))| {
                let bv = bias.map_or(T::zero(), |b| b[oc]);
                let rows = dst.chunks_mut(g.wo).zip(src.chunks(taps.wq));
                match residual {
                    Some(r) => {
                        let r = &r[(n * o + oc) * l..][..l];
                        for ((d, s), r) in rows.zip(r.chunks(g.wo)) {
                            for ((d, &s), &r) in d.iter_mut().zip(s).zip(r) {
                                *d = act((s + bv) + r, relu);
                            }
                        }
                    }
                    None if relu => {
                        for (d, s) in rows {
                            d.iter_mut()
                                .zip(s)
                                .for_each(|(d, &s)| *d = act(s + bv, relu));
                        }
                    }
                    None => {
                        for (d, s) in rows {
                            d.iter_mut().zip(s).for_each(|(d, &s)| *d = s + bv);
                        }
                    }
                }
            });
    });
    out
}

/// Copies of fewer elements than this stay on one thread.
const PAR_ELEMS: usize = 1 << 15;

/// One sample's input laid out so that every row of its unfolded matrix is one run of memory:
/// the zero-padded image split into its stride phases (`x[c, i*sh + a - ph, j*sw + b - pw]` for
/// phase `(a, b)`, `hq × wq` each), where row `(c, ki, kj)` of the unfolded matrix, read over
/// output rows `wq` wide, starts at phase `(ki*dh % sh, kj*dw % sw)`, row `ki*dh / sh`, column
/// `kj*dw / sw` of channel `c`. The GEMM then packs each row with one copy, and the columns
/// `wo..wq` of each output row are computed and dropped. The buffer is about the padded input's
/// size; the unfolded matrix it stands for is `kh·kw` times larger.
struct Taps<T: Gemm> {
    buf: Cols<T>,
    /// Where row `r` of the unfolded matrix starts in `buf`.
    offs: Vec<usize>,
    /// The width of an output row as the GEMM computes it (`wo` plus the dropped columns).
    wq: usize,
}

impl<T: Gemm> Taps<T> {
    /// The layout of sample `x` for `g`, or None when it would be larger than the unfolded
    /// matrix itself (a large padding or dilation around a small image).
    fn new(x: &[T], g: &ConvGeom) -> Option<Self> {
        let hq = g.ho + (g.kh - 1) * g.dh / g.sh;
        let wq = g.wo + (g.kw - 1) * g.dw / g.sw;
        // The phases some kernel offset reads, in first-use order, and each offset's phase slot
        // with its row and column inside the phase.
        let mut slot = vec![usize::MAX; g.sh * g.sw];
        let mut phases = Vec::new();
        let mut taps = Vec::with_capacity(g.kh * g.kw);
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let p = (ki * g.dh % g.sh) * g.sw + kj * g.dw % g.sw;
                if slot[p] == usize::MAX {
                    slot[p] = phases.len();
                    phases.push(p);
                }
                taps.push((slot[p], ki * g.dh / g.sh, kj * g.dw / g.sw));
            }
        }
        let plane = hq.checked_mul(wq)?;
        let image = plane.checked_mul(g.c)?;
        // `wq` elements of slack: the last row's dropped columns read past the last plane.
        let len = image.checked_mul(phases.len())?.checked_add(wq)?;
        let unfolded = (g.c * g.kh * g.kw).checked_mul(g.ho * g.wo)?;
        if len > unfolded.saturating_add(g.c * g.h * g.w) {
            return None;
        }
        let mut buf = Cols(pool::any(len));
        let (hw, skip) = (g.h * g.w, |b: usize, pad: usize, s: usize| {
            pad.saturating_sub(b).div_ceil(s)
        });
        // Plane by plane, in parallel (a lone sample would otherwise lay out its input on one
        // thread while the other waits for the GEMM).
        let (planes, slack) = buf.split_at_mut(image * phases.len());
        slack.fill(T::zero());
        planes
            .par_chunks_mut(plane)
            .with_min_len(PAR_ELEMS.div_ceil(plane))
            .enumerate()
            .for_each(|(q, pl)| {
                let (p, c) = (phases[q / g.c], q % g.c);
                let (a, b) = (p / g.sw, p % g.sw);
                // Columns j whose input column j*sw + b - pw lies inside the image.
                let lo = skip(b, g.pw, g.sw).min(wq);
                let hi = (g.w + g.pw).saturating_sub(b).div_ceil(g.sw).clamp(lo, wq);
                for (i, row) in pl.chunks_mut(wq).enumerate() {
                    let hin = (i * g.sh + a) as isize - g.ph as isize;
                    if hin < 0 || hin >= g.h as isize {
                        row.fill(T::zero());
                        continue;
                    }
                    row[..lo].fill(T::zero());
                    row[hi..].fill(T::zero());
                    if lo == hi {
                        continue;
                    }
                    let src = &x[c * hw + hin as usize * g.w..][..g.w];
                    let first = lo * g.sw + b - g.pw;
                    if g.sw == 1 {
                        row[lo..hi].copy_from_slice(&src[first..first + hi - lo]);
                    } else {
                        let s = src[first..].iter().step_by(g.sw);
                        row[lo..hi].iter_mut().zip(s).for_each(|(d, &v)| *d = v);
                    }
                }
            });
        let offs = (0..g.c)
            .flat_map(|c| {
                taps.iter()
                    .map(move |&(s, u, v)| s * image + c * plane + u * wq + v)
            })
            .collect();
        Some(Self { buf, offs, wq })
    }
}

/// [`Taps`] read over the output's own columns (`wo` per output row, none dropped): the weight
/// gradient's transposed B, where a dropped column would multiply a zero gradient by whatever
/// input it reads (∞ · 0 is NaN).
struct Compact<'a, T: Gemm> {
    taps: &'a Taps<T>,
    g: &'a ConvGeom,
}

impl<T: Gemm> Compact<'_, T> {
    /// Where output column `c` (`oh * wo + ow`) lies in a row of the layout (`wq` per output row).
    fn at(&self, c: usize) -> usize {
        c / self.g.wo * self.taps.wq + c % self.g.wo
    }

    /// Row `r`'s columns `c0..c0 + n`, which must lie inside one output row (one run of the
    /// layout).
    fn span(&self, r: usize, c0: usize, n: usize) -> &[T] {
        &self.taps.buf[self.taps.offs[r] + self.at(c0)..][..n]
    }
}

impl<T: Gemm> Source<T> for Compact<'_, T> {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        let mut done = 0;
        while done < out.len() {
            let c = c0 + done;
            // To the end of this output row at most.
            let n = (self.g.wo - c % self.g.wo).min(out.len() - done);
            copy_short(&mut out[done..done + n], self.span(r, c, n));
            done += n;
        }
    }

    fn run(&self, r: usize, c0: usize, n: usize) -> Option<&[T]> {
        // Inside one output row, the columns are one run of the layout.
        (c0 % self.g.wo + n <= self.g.wo).then(|| self.span(r, c0, n))
    }

    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        let at = self.at(c);
        for (o, &off) in out.iter_mut().zip(&self.taps.offs[r0..]) {
            *o = self.taps.buf[off + at];
        }
    }

    fn by_rows(&self) -> bool {
        true
    }
}

impl<T: Gemm> Source<T> for Taps<T> {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        out.copy_from_slice(&self.buf[self.offs[r] + c0..][..out.len()]);
    }

    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        for (o, &off) in out.iter_mut().zip(&self.offs[r0..]) {
            *o = self.buf[off + c];
        }
    }

    fn by_rows(&self) -> bool {
        true
    }

    fn run(&self, r: usize, c0: usize, n: usize) -> Option<&[T]> {
        Some(&self.buf[self.offs[r] + c0..][..n])
    }
}

/// A row-major matrix with `cols` columns.
fn rows<T>(data: &[T], cols: usize) -> Strided<'_, T> {
    Strided {
        data,
        rs: cols,
        cs: 1,
    }
}

/// The input gradient's geometry as a forward convolution ([`transposed_as_forward`]: stride 1,
/// `dY` padded by `d·(k-1) - p`, the weight flipped and transposed in channels), where the CPU
/// takes that path: 16 or more input channels (the rows of that convolution's GEMM: fewer leave
/// its tiles mostly empty, and folding `Wᵀ·dY` back is faster there: 3 channels took 2× as long
/// so), and not 1×1 (whose gradient is one GEMM already).
fn as_forward(g: &ConvGeom, o: usize) -> Option<ConvGeom> {
    if is_pointwise(g) || g.c < 16 {
        return None;
    }
    transposed_as_forward(g, o)
}

fn backward_input<T: Gemm>(gy: &[T], w: &[T], g: &ConvGeom, o: usize) -> Vec<T> {
    // A stride-1 input gradient runs as the forward convolution it is (its GEMM reads the
    // padded dY in runs, and nothing is folded back), unless a weight is not finite: the padding
    // would multiply it by zero into a NaN that the true gradient does not have.
    if let Some(t) = as_forward(g, o).filter(|_| w.iter().all(|v| v.is_finite())) {
        let taps = g.kh * g.kw;
        let mut flipped = vec![T::zero(); w.len()];
        for (oc, wo) in w.chunks_exact(g.c * taps).enumerate() {
            for (c, wc) in wo.chunks_exact(taps).enumerate() {
                let dst = &mut flipped[(c * o + oc) * taps..][..taps];
                dst.iter_mut()
                    .zip(wc.iter().rev())
                    .for_each(|(d, &v)| *d = v);
            }
        }
        return forward(gy, &flipped, None, (None, false), &t, g.c);
    }
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
    let kern = T::kernel(o, k);
    // Fixed groups of samples, one accumulator each, summed in order: the result does not depend
    // on how rayon schedules the groups (training runs are reproducible).
    const GROUP: usize = 4;
    let parts: Vec<Vec<T>> = (0..g.n.div_ceil(GROUP))
        .into_par_iter()
        .map(|gi| {
            let mut acc = zero();
            for n in gi * GROUP..((gi + 1) * GROUP).min(g.n) {
                let xn = &x[n * chw..(n + 1) * chw];
                // dY[n] [o, l] · colsᵀ [l, k], accumulated; the columns are packed from the
                // sample's phase layout (or unfolded as they are packed).
                let gyn = rows(&gy[n * o * l..(n + 1) * o * l], l);
                let taps = if is_pointwise(g) {
                    None
                } else {
                    Taps::new(xn, g)
                };
                if let Some(taps) = &taps {
                    let cols = Transposed(Compact { taps, g });
                    gemm_src(o, l, k, &gyn, &cols, T::one(), &mut acc, k, kern);
                } else if is_pointwise(g) {
                    gemm_src(
                        o,
                        l,
                        k,
                        &gyn,
                        &Transposed(rows(xn, l)),
                        T::one(),
                        &mut acc,
                        k,
                        kern,
                    );
                } else {
                    let cols = Transposed(Unfold { x: xn, g });
                    gemm_src(o, l, k, &gyn, &cols, T::one(), &mut acc, k, kern);
                }
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

/// One sample's unfolded input, `[C*kh*kw, Ho*Wo]` (row `(c, ki, kj)`, column `(oh, ow)`), read
/// straight from the sample `[C, H, W]` while the GEMM packs it.
struct Unfold<'a, T> {
    x: &'a [T],
    g: &'a ConvGeom,
}

impl<T: Gemm> Unfold<'_, T> {
    /// The channel plane and kernel offsets of row `r`.
    fn parts(&self, r: usize) -> (&[T], usize, usize) {
        let (g, hw) = (self.g, self.g.h * self.g.w);
        let c = r / (g.kh * g.kw);
        (&self.x[c * hw..(c + 1) * hw], (r / g.kw) % g.kh, r % g.kw)
    }
}

impl<T: Gemm> Source<T> for Unfold<'_, T> {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        let g = self.g;
        let (plane, ki, kj) = self.parts(r);
        // The output columns that read the input (the same for every output row) and the input
        // column of the first of them.
        let (lo, hi) = col_span(g, kj);
        let first = ((lo * g.sw + kj * g.dw) as isize - g.pw as isize).max(0) as usize;
        let mut done = 0;
        while done < out.len() {
            let p = c0 + done;
            let (oh, ow0) = (p / g.wo, p % g.wo);
            let ow1 = g.wo.min(ow0 + out.len() - done);
            let dst = &mut out[done..done + ow1 - ow0];
            done += ow1 - ow0;
            let h = (oh * g.sh + ki * g.dh) as isize - g.ph as isize;
            if h < 0 || h >= g.h as isize {
                dst.fill(T::zero());
                continue;
            }
            // Columns ow0..ow1, of which lo..hi read the input.
            let (a, b) = (lo.clamp(ow0, ow1), hi.clamp(ow0, ow1));
            dst[..a - ow0].fill(T::zero());
            dst[b - ow0..].fill(T::zero());
            if a < b {
                let src = &plane[h as usize * g.w + first + (a - lo) * g.sw..];
                let inside = &mut dst[a - ow0..b - ow0];
                if g.sw == 1 {
                    copy_short(inside, &src[..b - a]);
                } else {
                    for (d, &v) in inside.iter_mut().zip(src.iter().step_by(g.sw)) {
                        *d = v;
                    }
                }
            }
        }
    }

    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        let g = self.g;
        let (oh, ow) = (c / g.wo, c % g.wo);
        for (i, o) in out.iter_mut().enumerate() {
            let (plane, ki, kj) = self.parts(r0 + i);
            *o = match row_span(g, ki, kj, oh) {
                Some((h, lo, hi)) if (lo..hi).contains(&ow) => {
                    plane[h * g.w + ((ow * g.sw + kj * g.dw) as isize - g.pw as isize) as usize]
                }
                _ => T::zero(),
            };
        }
    }

    fn by_rows(&self) -> bool {
        true
    }
}

/// For kernel offset `(ki, kj)`: the range of output columns `ow` whose input column
/// `ow*sw + kj*dw - pw` is inside the input.
fn col_span(g: &ConvGeom, kj: usize) -> (usize, usize) {
    let off = (kj * g.dw) as isize - g.pw as isize;
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
    (lo.min(hi), hi)
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
    let (lo, hi) = col_span(g, kj);
    Some((h as usize, lo, hi))
}

/// Fold `cols` `[C*kh*kw, Ho*Wo]` into one sample `[C, H, W]`, summing overlaps (the unfold's adjoint).
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
