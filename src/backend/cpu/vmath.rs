//! Vectorisable f32 math for the CPU kernels: `exp`, `tanh`, `sigmoid`, `erf` and the normal CDF
//! written without branches or library calls, so a loop over them compiles to SIMD (libm's are
//! scalar calls, which made `sigmoid` over 16,000 elements ten times slower than PyTorch's), and
//! [`vectorized`], which runs a kernel compiled for the widest vector ISA the CPU has.
//!
//! There is no `mul_add` here: without FMA in the baseline target it is a library call.
//!
//! Accuracy, checked against f64 references over dense sweeps in `tests/cpu_kernels.rs`: `exp`
//! within 1 ulp over its whole range (subnormal results included, overflow to infinity, NaN
//! propagated), `tanh` 2, `sigmoid` and `erf` 3, the normal CDF and density 6 (the CDF keeps
//! its relative accuracy in the left tail). Every ISA gives the same bits (nothing is
//! contracted into FMAs). The coefficients come
//! from Cephes (`exp`, `tanh`) and from `tools/vmath/fit_erf.py` (`erf`, `norm_cdf`).
//!
//! ```
//! use wgtorch::backend::cpu::vmath;
//! let xs: Vec<f32> = (0..64).map(|i| i as f32 / 8.0 - 4.0).collect();
//! let mut ys = vec![0.0f32; xs.len()];
//! vmath::vectorized(|| {
//!     for (y, &x) in ys.iter_mut().zip(&xs) {
//!         *y = vmath::tanh(x);
//!     }
//! });
//! for (&x, &y) in xs.iter().zip(&ys) {
//!     assert!((y as f64 - (x as f64).tanh()).abs() <= 2.0 * f32::EPSILON as f64);
//! }
//! println!("running on {:?}", vmath::isa()); // WGTORCH_CPU_ISA=baseline|avx2|avx512 forces one
//! ```

// Coefficients are written as the fits print them (rounded to f32 on compilation); the leading
// ERF_P term is a fitted value near 2/√π, not the constant.
#![allow(clippy::excessive_precision, clippy::approx_constant)]

use std::sync::atomic::{AtomicU8, Ordering};

/// `x * P(x^2)` approximates `erf(x)` for `|x| < 1` (highest power first).
const ERF_P: [f32; 7] = [
    8.007_011e-5,
    -8.053_787e-4,
    5.192_961_3e-3,
    -2.685_607_1e-2,
    1.128_363_5e-1,
    -3.761_263e-1,
    1.128_379_2,
];
/// `Q(x - 2.25)` approximates `erfc(x) exp(x^2)` for `0.5 <= x < 4` (highest power first).
const ERFC_Q: [f32; 15] = [
    1.591_165_7e-8,
    -7.343_046e-8,
    1.266_186_8e-7,
    -4.076_333e-7,
    2.226_060_3e-6,
    -8.548_044e-6,
    2.937_928_4e-5,
    -1.022_473_1e-4,
    3.484_651_6e-4,
    -1.144_011_2e-3,
    3.619_042_5e-3,
    -1.100_198_8e-2,
    3.199_261_7e-2,
    -8.848_651e-2,
    2.310_872_6e-1,
];
/// `R(1 / x^2) / x` approximates `erfc(x) exp(x^2)` for `4 <= x < 10.5` (highest power first).
const ERFC_R: [f32; 7] = [
    -1.347_1,
    -6.294_595_6,
    3.036_072,
    -1.033_806_9,
    4.226_677_2e-1,
    -2.820_901e-1,
    5.641_895_7e-1,
];

/// The polynomial with coefficients `c` (highest power first) at `x`, by Horner's scheme: the
/// most accurate order where the low terms dominate (`erf` near 0), and the slowest ([`poly`]).
#[inline(always)]
fn horner<const N: usize>(c: &[f32; N], x: f32) -> f32 {
    let mut y = c[0];
    for &k in &c[1..] {
        y = y * x + k;
    }
    y
}

/// The polynomial with coefficients `c` (highest power first) at `x`, by Estrin's scheme: pairs
/// `c[i] + c[i+1] x` combined with `x²`, `x⁴`, ... so that its dependency chain is `log2 N` steps
/// deep instead of Horner's `N` (a loop over these functions is bound by that latency, not by its
/// arithmetic). The order of operations is fixed, so every ISA rounds alike.
#[inline(always)]
fn poly<const N: usize>(c: &[f32; N], x: f32) -> f32 {
    // Lowest power first.
    let mut a = [0.0f32; N];
    for (i, &k) in c.iter().rev().enumerate() {
        a[i] = k;
    }
    let (mut n, mut p) = (N, x);
    while n > 1 {
        let m = n.div_ceil(2);
        for i in 0..m {
            a[i] = if 2 * i + 1 < n {
                a[2 * i] + a[2 * i + 1] * p
            } else {
                a[2 * i]
            };
        }
        n = m;
        p = p * p;
    }
    a[0]
}

/// `2^n` for `n` in `[-126, 127]`, from the exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `e^x`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Clamp where the result is already 0 or infinite (`clamp` keeps NaN).
    let xc = x.clamp(-104.0, 89.0);
    // n = round(x / ln 2) by the 1.5 * 2^23 trick: adding MAGIC leaves n in the low mantissa bits
    // (no `round` call, and no float-to-int cast, which would not vectorise); r = x - n ln 2 in
    // two parts.
    const MAGIC: f32 = 12_582_912.0;
    let shifted = xc * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    let nf = shifted - MAGIC;
    let r = xc - nf * 0.693_359_4;
    let r = r + nf * 2.121_944_4e-4;
    let p = poly(
        &[
            1.987_569_1e-4,
            1.398_2e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            5.000_000_1e-1,
        ],
        r,
    );
    let y = p * r * r + r + 1.0;
    // Scale by 2^n in two steps so that subnormal results and overflow come out right.
    let h = n >> 1;
    y * pow2i(h) * pow2i(n - h)
}

/// `tanh(x)`.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x.abs();
    // |x| >= 0.625: 1 - 2 / (e^{2|x|} + 1), with the sign of x.
    let big = 1.0 - 2.0 / (exp(z + z) + 1.0);
    let big = big.copysign(x);
    // Otherwise an odd polynomial.
    let s = x * x;
    let p = poly(
        &[
            -5.704_988_7e-3,
            2.063_908_9e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328_2e-1,
        ],
        s,
    );
    // x itself at ±0, so that tanh(-0) = -0.
    let small = if x == 0.0 { x } else { p * s * x + x };
    if z < 0.625 {
        small
    } else {
        big
    }
}

/// `1 / (1 + e^{-x})`, as `e^x / (1 + e^x)` for negative `x` (no overflow, and subnormal
/// results where they belong).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

/// `e^{-s x²}` for `s` = 1 or 1/2 with `x²` carried exactly (Dekker's split, no FMA needed):
/// rounding `x²` first would cost `x²` ulps of relative accuracy in the normal tails.
#[inline(always)]
fn exp_neg_sq(x: f32, s: f32) -> f32 {
    let p = x * x;
    let hi = f32::from_bits(x.to_bits() & 0xFFFF_F000);
    let lo = x - hi;
    let err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo; // x² = p + err
    exp(-s * p) * (1.0 - s * err)
}

/// `erfc(z) e^{z²}` for `z >= 0.5` (used up to 10.5; past it the normal CDF is below f32's
/// range).
#[inline(always)]
fn erfcx_tail(z: f32) -> f32 {
    let near = poly(&ERFC_Q, z.min(4.0) - 2.25);
    let zf = z.max(4.0);
    let far = poly(&ERFC_R, 1.0 / (zf * zf)) / zf;
    if z < 4.0 {
        near
    } else {
        far
    }
}

/// The error function.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let z = x.abs();
    let small = x * horner(&ERF_P, x * x);
    // Past 4, erfc is below half an ulp of 1.
    let zc = z.min(4.0);
    let large = (1.0 - exp_neg_sq(zc, 1.0) * erfcx_tail(zc)).copysign(x);
    if z < 1.0 {
        small
    } else if x.is_nan() {
        x
    } else {
        large
    }
}

/// The standard normal CDF `Φ(x) = (1 + erf(x / √2)) / 2`, computed without the cancellation
/// of `1 + erf` for negative `x`: the left tail keeps its relative accuracy down to the
/// smallest subnormal.
#[inline(always)]
pub fn norm_cdf(x: f32) -> f32 {
    norm_cdf_pdf(x).0
}

/// The standard normal density `φ(x) = e^{-x²/2} / √(2π)`: 0 past `|x| = 14.5`, where it is
/// below f32's smallest subnormal (and `x²` would overflow from `|x| ≈ 1.8e19`).
#[inline(always)]
pub fn norm_pdf(x: f32) -> f32 {
    let ax = x.abs();
    let e = exp_neg_sq(ax.clamp(0.0, 15.0), 0.5);
    if ax > 14.5 {
        0.0
    } else {
        e * 0.398_942_3
    }
}

/// `(Φ(x), φ(x))` with one exponential for both (exact GELU's gradient needs the two):
/// [`norm_cdf`] and [`norm_pdf`], the same bits.
#[inline(always)]
pub fn norm_cdf_pdf(x: f32) -> (f32, f32) {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    let z = u.abs();
    let small = 0.5 * (u * poly(&ERF_P, u * u)) + 0.5;
    // `clamp` keeps NaN (`min` would not): a NaN density, and a NaN CDF from the selects below.
    let ax = x.abs();
    let e = exp_neg_sq(ax.clamp(0.0, 15.0), 0.5);
    let half_tail = 0.5 * e * erfcx_tail(z.clamp(0.5, 10.5));
    // Below 0.5 the series; past it the tail form, where 1 + erf(u) would start to cancel.
    let cdf = if z < 0.5 {
        small
    } else if u < 0.0 {
        half_tail
    } else if u.is_nan() {
        u
    } else {
        1.0 - half_tail
    };
    let pdf = if ax > 14.5 { 0.0 } else { e * 0.398_942_3 };
    (cdf, pdf)
}

/// Vector instruction sets [`vectorized`] can compile for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64).
    Baseline = 1,
    /// AVX2 with FMA.
    Avx2 = 2,
    /// AVX-512F (with AVX2 and FMA).
    Avx512 = 3,
}

static ISA: AtomicU8 = AtomicU8::new(0);

/// The instruction set [`vectorized`] uses: the widest this CPU has, or the one named by
/// `WGTORCH_CPU_ISA` (`baseline`, `avx2`, `avx512`; a set the CPU lacks falls back to the widest
/// it has), so that tests can run every path.
pub fn isa() -> Isa {
    match ISA.load(Ordering::Relaxed) {
        1 => Isa::Baseline,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        _ => {
            let isa = detect();
            ISA.store(isa as u8, Ordering::Relaxed);
            isa
        }
    }
}

/// The widest instruction set this CPU has (cached).
#[inline(always)]
fn detect_hw() -> Isa {
    static HW: AtomicU8 = AtomicU8::new(0);
    match HW.load(Ordering::Relaxed) {
        1 => Isa::Baseline,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        _ => {
            #[allow(unused_mut)]
            let mut best = Isa::Baseline;
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    best = Isa::Avx2;
                    if is_x86_feature_detected!("avx512f") {
                        best = Isa::Avx512;
                    }
                }
            }
            HW.store(best as u8, Ordering::Relaxed);
            best
        }
    }
}

/// The widest instruction set this CPU has, whatever `WGTORCH_CPU_ISA` asks for.
#[cfg(target_arch = "x86_64")]
pub(crate) fn supported() -> Isa {
    detect_hw()
}

/// `fn $name(args)`: `$body(args)` (an `#[inline(always)]` function) compiled for the instruction
/// set [`isa`] says, and `fn $on(isa, args)` for a given one (a set the CPU lacks runs the
/// widest copy it has below that set), so that tests check every copy in one process. For
/// workers too large for [`vectorized`]'s closure to be inlined into its wider copies (the
/// Winograd transforms, max pooling's plane, the matrix-vector products' dot products).
macro_rules! widest {
    ($name:ident, $on:ident => $body:ident <$t:ident: $bound:path> ($($arg:ident: $ty:ty),*)) => {
        fn $name<$t: $bound>($($arg: $ty),*) {
            $on($crate::backend::cpu::vmath::isa(), $($arg),*)
        }
        fn $on<$t: $bound>(isa: $crate::backend::cpu::vmath::Isa, $($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::backend::cpu::vmath::{supported, Isa};
                /// # Safety
                /// The CPU has AVX-512F, AVX2 and FMA.
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512<$t: $bound>($($arg: $ty),*) {
                    $body($($arg),*)
                }
                /// # Safety
                /// The CPU has AVX2 and FMA.
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2<$t: $bound>($($arg: $ty),*) {
                    $body($($arg),*)
                }
                match (isa, supported()) {
                    // SAFETY: `supported` reports a set only when the CPU has it.
                    (Isa::Avx512, Isa::Avx512) => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above (AVX-512 implies AVX2 here).
                    (Isa::Avx512 | Isa::Avx2, Isa::Avx512 | Isa::Avx2) => {
                        return unsafe { avx2($($arg),*) }
                    }
                    _ => {}
                }
            }
            let _ = isa;
            $body($($arg),*)
        }
    };
}
pub(crate) use widest;

fn detect() -> Isa {
    let best = detect_hw();
    match std::env::var("WGTORCH_CPU_ISA").as_deref() {
        Ok("baseline") => Isa::Baseline,
        Ok("avx2") if best != Isa::Baseline => Isa::Avx2,
        _ => best,
    }
}

/// Run `f` compiled for the CPU's widest vector ISA (see [`isa`]): `f` is inlined into a copy
/// of this function built with those target features, so its loops vectorise at that width.
/// `f` must be a closure that the compiler can inline (`#[inline(always)]` helpers only).
///
/// ```
/// use wgtorch::backend::cpu::vmath;
/// let x = [0.0f32, 1.0, -2.0];
/// let mut y = [0.0f32; 3];
/// vmath::vectorized(|| {
///     for (y, &x) in y.iter_mut().zip(&x) {
///         *y = vmath::exp(x);
///     }
/// });
/// assert!((y[1] - std::f32::consts::E).abs() < 1e-6);
/// ```
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    vectorized_on(isa(), f)
}

/// [`vectorized`] on a given instruction set (one the CPU lacks runs the widest below it), so that
/// tests can check every path in one process.
#[inline(always)]
pub fn vectorized_on<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        let best = detect_hw();
        // SAFETY: each path runs only when the CPU reports its features.
        if isa == Isa::Avx512 && best == Isa::Avx512 {
            return unsafe { with_avx512(f) };
        }
        if isa != Isa::Baseline && best != Isa::Baseline {
            return unsafe { with_avx2(f) };
        }
    }
    let _ = isa;
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
