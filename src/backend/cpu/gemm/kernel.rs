//! The GEMM's microkernels: each multiplies one packed `MR×kc` panel of A by one packed `kc×NR`
//! panel of B into an `MR×NR` tile of C held in registers, then adds the tile into C (or
//! overwrites C, for the first `kc` block of a product with `beta = 0`).
//!
//! | kernel | tile | registers |
//! |---|---|---|
//! | f32 AVX-512F | 12×32 or 8×48 | 24 accumulators (two or three 16-lane vectors per row), masked edge stores |
//! | f32 AVX2 + FMA | 6×16 | 12 accumulators (two 8-lane vectors per row) |
//! | f32 wasm SIMD128 | 4×8 | 8 accumulators (two 4-lane vectors per row), multiply then add |
//! | f32 / f64 portable | 4×8 | a plain loop the compiler vectorises for the target's baseline |
//!
//! The kernel follows `vmath::isa()` (`WGTORCH_CPU_ISA=baseline|avx2|avx512` forces one; a set the
//! CPU lacks falls back to the widest it has); where a set has two tiles, each product takes the
//! one that pads C least ([`fitted`]). On wasm the SIMD128 kernel is compiled in when the build
//! enables `simd128` (the workspace's `.cargo/config.toml` does: every browser with WebGPU runs
//! it). [`Gemm::kernels`] hands any path to the tests, which check each against a scalar
//! reference (SIMD128's in the browser test). The x86 SIMD paths fuse multiply and add (one
//! rounding), the portable and SIMD128 ones do not (wasm has no fused multiply-add outside the
//! relaxed-SIMD proposal), so the paths agree to rounding, not to the bit.

use super::Gemm;
use crate::backend::cpu::vmath::Isa;

/// A microkernel and its tile.
#[derive(Clone, Copy)]
pub(crate) struct Kernel<T> {
    /// Rows of the tile (the A panel's height).
    pub mr: usize,
    /// Columns of the tile (the B panel's width).
    pub nr: usize,
    /// The instruction set it was compiled for.
    pub isa: Isa,
    run: RawKernel<T>,
}

/// `(kc, a, [a's row stride, a's k stride], b, c, ldc, rows, cols, accumulate)`: see
/// [`Kernel::tile`].
type RawKernel<T> =
    unsafe fn(usize, *const T, [usize; 2], *const T, *mut T, usize, usize, usize, bool);

impl<T: Gemm> Kernel<T> {
    /// `C[..rows, ..cols] (+)= A·B` for `a`, whose element `(i, p)` is at `i*sa[0] + p*sa[1]`
    /// (a packed panel: `[1, mr]`; rows of a row-major matrix, read in place: `[lda, 1]`), and
    /// the packed panel `b` (`kc` groups of `nr`); `c` is the tile's first element, rows `ldc`
    /// apart. Only A's first `rows` rows are read. With `accumulate` false C is overwritten
    /// (its old contents, NaN included, are not read).
    ///
    /// # Safety
    /// `c` must address `rows` rows of `cols` elements, `ldc` apart, that nothing else reads or
    /// writes during the call.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub unsafe fn tile(
        &self,
        kc: usize,
        a: &[T],
        sa: [usize; 2],
        b: &[T],
        c: *mut T,
        ldc: usize,
        rows: usize,
        cols: usize,
        accumulate: bool,
    ) {
        assert!(
            (kc == 0 || rows == 0 || (rows - 1) * sa[0] + (kc - 1) * sa[1] < a.len())
                && b.len() >= kc * self.nr
                && rows <= self.mr
                && cols <= self.nr
                && (rows <= 1 || cols <= ldc),
            "gemm microkernel: panel or tile out of bounds"
        );
        // SAFETY: the panels hold `kc` groups (asserted), the caller vouches for `c`, and the
        // kernel's instruction set is one the CPU has (`Gemm::kernel` falls back otherwise).
        unsafe {
            (self.run)(
                kc,
                a.as_ptr(),
                sa,
                b.as_ptr(),
                c,
                ldc,
                rows,
                cols,
                accumulate,
            )
        }
    }
}

/// The f32 kernels for `isa`, or for the widest set below it that this CPU runs, widest tile
/// first.
pub(super) fn f32_kernels(isa: Isa) -> Vec<Kernel<f32>> {
    #[cfg(target_arch = "x86_64")]
    {
        let best = crate::backend::cpu::vmath::supported();
        if isa == Isa::Avx512 && best == Isa::Avx512 {
            let k = |mr, nr, run| Kernel {
                mr,
                nr,
                isa: Isa::Avx512,
                run,
            };
            return vec![
                k(12, 32, x86::avx512::<12, 2> as RawKernel<f32>),
                k(8, 48, x86::avx512::<8, 3>),
            ];
        }
        if isa != Isa::Baseline && best != Isa::Baseline {
            return vec![Kernel {
                mr: 6,
                nr: 16,
                isa: Isa::Avx2,
                run: x86::avx2_6x16,
            }];
        }
    }
    let _ = isa;
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let kernel = Kernel {
        mr: 4,
        nr: 8,
        isa: Isa::Baseline,
        run: wasm::simd128::<4, 2>,
    };
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    let kernel = portable_kernel();
    vec![kernel]
}

/// Of `kernels`, the one that computes the fewest padded elements for an `m×n` C (ties go to
/// the first): a 64-row C fits 8-row tiles exactly where 12-row tiles would pad it by an eighth.
pub(super) fn fitted<T: Copy>(kernels: &[Kernel<T>], m: usize, n: usize) -> Kernel<T> {
    let padded = |k: &Kernel<T>| m.div_ceil(k.mr) * k.mr * (n.div_ceil(k.nr) * k.nr);
    let mut best = kernels[0];
    for k in &kernels[1..] {
        if padded(k) < padded(&best) {
            best = *k;
        }
    }
    best
}

/// The portable 4×8 kernel (every dtype, every target).
pub(super) fn portable_kernel<T: Gemm>() -> Kernel<T> {
    Kernel {
        mr: 4,
        nr: 8,
        isa: Isa::Baseline,
        run: portable::<T, 4, 8>,
    }
}

/// The tile in `t` (`MR×NR`, row-major) into C, adding to C when `accumulate`.
///
/// # Safety
/// As [`Kernel::tile`]'s `c`.
#[inline(always)]
unsafe fn store<T: Gemm>(
    t: &[T],
    nr: usize,
    c: *mut T,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    for i in 0..rows {
        // SAFETY: row `i < rows` of the tile, `cols` elements (the caller's contract).
        let row = unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), cols) };
        let src = &t[i * nr..i * nr + cols];
        if accumulate {
            row.iter_mut().zip(src).for_each(|(c, &v)| *c += v);
        } else {
            row.copy_from_slice(src);
        }
    }
}

/// Pointers to A's `MR` rows; rows past `rows` repeat the last one (their results are not
/// stored), so a partial panel read in place never reads past A.
#[inline(always)]
fn rows_of<T, const MR: usize>(a: *const T, rs: usize, rows: usize) -> [*const T; MR] {
    std::array::from_fn(|i| a.wrapping_add(i.min(rows.max(1) - 1) * rs))
}

/// The portable kernel: plain loops over a tile in an array (vectorised by the compiler; no
/// `mul_add`, which is a library call without FMA in the baseline target).
#[allow(clippy::too_many_arguments)]
unsafe fn portable<T: Gemm, const MR: usize, const NR: usize>(
    kc: usize,
    a: *const T,
    sa: [usize; 2],
    b: *const T,
    c: *mut T,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    // SAFETY: `Kernel::tile` checked that B holds `kc` groups.
    let b = unsafe { std::slice::from_raw_parts(b, kc * NR) };
    let rowp = rows_of::<T, MR>(a, sa[0], rows);
    let mut t = [[T::zero(); NR]; MR];
    for (p, bp) in b.chunks_exact(NR).enumerate() {
        for (row, &ap) in t.iter_mut().zip(&rowp) {
            // SAFETY: row `i < rows` (clamped) and `p < kc` are inside A (`Kernel::tile`).
            let av = unsafe { *ap.add(p * sa[1]) };
            for (v, &bv) in row.iter_mut().zip(bp) {
                *v += av * bv;
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { store(t.as_flattened(), NR, c, ldc, rows, cols, accumulate) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// AVX-512F, `MR` rows × `16·NV` columns (12×32 and 8×48: 24 accumulators): per step of k
    /// `NV` vector loads of B, `MR` broadcasts of A and `MR·NV` FMAs. Edge tiles store through
    /// masks.
    ///
    /// # Safety
    /// AVX-512F present; the panels and `c` as [`super::Kernel::tile`] requires.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx512<const MR: usize, const NV: usize>(
        kc: usize,
        a: *const f32,
        sa: [usize; 2],
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        rows: usize,
        cols: usize,
        accumulate: bool,
    ) {
        let rowp = super::rows_of::<f32, MR>(a, sa[0], rows);
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        for p in 0..kc {
            // SAFETY: `p < kc` groups of 16·NV (B); A's rows below `rows` (clamped) at `p`.
            unsafe {
                let bp = b.add(p * 16 * NV);
                let bv: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(bp.add(16 * v)));
                for (r, ap) in acc.iter_mut().zip(&rowp) {
                    let x = _mm512_set1_ps(*ap.add(p * sa[1]));
                    for (r, &b) in r.iter_mut().zip(&bv) {
                        *r = _mm512_fmadd_ps(x, b, *r);
                    }
                }
            }
        }
        let lanes = |v: usize| -> __mmask16 {
            let n = cols.saturating_sub(16 * v);
            if n >= 16 {
                0xffff
            } else {
                ((1u32 << n) - 1) as __mmask16
            }
        };
        let masks: [__mmask16; NV] = std::array::from_fn(lanes);
        for (i, r) in acc.iter().enumerate().take(rows) {
            for (v, (&m, &x)) in masks.iter().zip(r).enumerate() {
                // SAFETY: row `i < rows`, lanes below `cols` only (the masks).
                unsafe {
                    let p = c.add(i * ldc + 16 * v);
                    let x = if accumulate {
                        _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, p))
                    } else {
                        x
                    };
                    _mm512_mask_storeu_ps(p, m, x);
                }
            }
        }
    }

    /// AVX2 + FMA, 6 rows × 16 columns: per step of k two vector loads of B, six broadcasts of A
    /// and 12 FMAs. Edge tiles go through a buffer.
    ///
    /// # Safety
    /// AVX2 and FMA present; the panels and `c` as [`super::Kernel::tile`] requires.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx2_6x16(
        kc: usize,
        a: *const f32,
        sa: [usize; 2],
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        rows: usize,
        cols: usize,
        accumulate: bool,
    ) {
        const MR: usize = 6;
        let rowp = super::rows_of::<f32, MR>(a, sa[0], rows);
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        for p in 0..kc {
            // SAFETY: `p < kc` groups of 16 (B); A's rows below `rows` (clamped) at `p`.
            unsafe {
                let bp = b.add(p * 16);
                let (b0, b1) = (_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8)));
                for (r, ap) in acc.iter_mut().zip(&rowp) {
                    let x = _mm256_broadcast_ss(&*ap.add(p * sa[1]));
                    r[0] = _mm256_fmadd_ps(x, b0, r[0]);
                    r[1] = _mm256_fmadd_ps(x, b1, r[1]);
                }
            }
        }
        if rows == MR && cols == 16 {
            for (i, r) in acc.iter().enumerate() {
                // SAFETY: a full tile: row `i` has 16 elements.
                unsafe {
                    let p = c.add(i * ldc);
                    let (mut v0, mut v1) = (r[0], r[1]);
                    if accumulate {
                        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(p));
                        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(p.add(8)));
                    }
                    _mm256_storeu_ps(p, v0);
                    _mm256_storeu_ps(p.add(8), v1);
                }
            }
        } else {
            let mut t = [0f32; MR * 16];
            for (i, r) in acc.iter().enumerate() {
                // SAFETY: row `i` of the 6×16 buffer.
                unsafe {
                    _mm256_storeu_ps(t.as_mut_ptr().add(i * 16), r[0]);
                    _mm256_storeu_ps(t.as_mut_ptr().add(i * 16 + 8), r[1]);
                }
            }
            // SAFETY: the caller's contract.
            unsafe { super::store(&t, 16, c, ldc, rows, cols, accumulate) }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm {
    use std::arch::wasm32::*;

    /// wasm SIMD128, `MR` rows × `4·NV` columns: per step of k `NV` vector loads of B, `MR`
    /// splatting loads of A and `MR·NV` multiplies and adds. The engine keeps each vector in a
    /// register where it can (x86-64 has 16, of which V8 keeps some for itself). Measured in
    /// Node 20 on a Zen 4 (GFLOP/s at 256³ and 512³, one thread): 4×8 (8 accumulators) ran 35,
    /// where 6×8 ran 25–27, 3×8 31, 2×16 27–35, 3×12 20 and 4×4 25.
    ///
    /// # Safety
    /// The panels and `c` as [`super::Kernel::tile`] requires.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn simd128<const MR: usize, const NV: usize>(
        kc: usize,
        a: *const f32,
        sa: [usize; 2],
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        rows: usize,
        cols: usize,
        accumulate: bool,
    ) {
        let rowp = super::rows_of::<f32, MR>(a, sa[0], rows);
        let mut acc = [[f32x4_splat(0.0); NV]; MR];
        for p in 0..kc {
            // SAFETY: `p < kc` groups of `4·NV` (B); A's rows below `rows` (clamped) at `p`.
            unsafe {
                let bp = b.add(p * 4 * NV);
                let bv: [v128; NV] = std::array::from_fn(|v| v128_load(bp.add(4 * v).cast()));
                for (r, ap) in acc.iter_mut().zip(&rowp) {
                    // One instruction (a broadcasting load on x86-64 with AVX), not a load and a
                    // shuffle.
                    let x = v128_load32_splat(ap.add(p * sa[1]).cast());
                    for (acc, &bv) in r.iter_mut().zip(&bv) {
                        *acc = f32x4_add(*acc, f32x4_mul(x, bv));
                    }
                }
            }
        }
        if rows == MR && cols == 4 * NV {
            for (i, r) in acc.iter().enumerate() {
                for (v, &x) in r.iter().enumerate() {
                    // SAFETY: a full tile: row `i` has `4·NV` elements.
                    unsafe {
                        let q: *mut v128 = c.add(i * ldc + 4 * v).cast();
                        let y = if accumulate {
                            f32x4_add(x, v128_load(q))
                        } else {
                            x
                        };
                        v128_store(q, y);
                    }
                }
            }
        } else {
            // SAFETY: `acc` is `MR` rows of `4·NV` f32 lanes, in lane order in memory.
            let t = unsafe { std::slice::from_raw_parts(acc.as_ptr().cast::<f32>(), MR * 4 * NV) };
            // SAFETY: the caller's contract.
            unsafe { super::store(t, 4 * NV, c, ldc, rows, cols, accumulate) }
        }
    }
}
