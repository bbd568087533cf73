// Shared helpers, prepended to every kernel. `params` is binding 0 of every kernel: its family's
// parameter struct (generated from src/backend/gpu/params.rs as `Params`), whose `tail` holds the
// variable-length words (shapes, strides) and, last, the grid offset.
{{PARAMS}}
@group(0) @binding(0) var<storage, read> params: Params;

// Storage offset of row-major element `i` for a view whose shape starts at params.tail[shape_at]
// and whose strides start at params.tail[strides_at] (ndim words each). One division per
// dimension, the coordinate from the quotient (a CPU adapter divides each lane apart, and
// `rem % s` beside `rem / s` was a second division).
fn offset_of(i: u32, ndim: u32, shape_at: u32, strides_at: u32) -> u32 {
    var rem = i;
    var off = 0u;
    for (var d = i32(ndim) - 1; d >= 0; d = d - 1) {
        let s = params.tail[shape_at + u32(d)];
        let q = rem / s;
        off = off + (rem - q * s) * params.tail[strides_at + u32(d)];
        rem = q;
    }
    return off;
}

// offset_of for two views of one shape (strides at `sa` and `sb`), from one walk over the
// coordinates.
fn offsets2(i: u32, ndim: u32, shape_at: u32, sa: u32, sb: u32) -> vec2<u32> {
    var rem = i;
    var off = vec2<u32>(0u, 0u);
    for (var d = i32(ndim) - 1; d >= 0; d = d - 1) {
        let ud = u32(d);
        let s = params.tail[shape_at + ud];
        let q = rem / s;
        off = off + (rem - q * s) * vec2<u32>(params.tail[sa + ud], params.tail[sb + ud]);
        rem = q;
    }
    return off;
}

// offset_of for three views of one shape (strides at `sa`, `sb` and `sc`).
fn offsets3(i: u32, ndim: u32, shape_at: u32, sa: u32, sb: u32, sc: u32) -> vec3<u32> {
    var rem = i;
    var off = vec3<u32>(0u, 0u, 0u);
    for (var d = i32(ndim) - 1; d >= 0; d = d - 1) {
        let ud = u32(d);
        let s = params.tail[shape_at + ud];
        let q = rem / s;
        let t = vec3<u32>(params.tail[sa + ud], params.tail[sb + ud], params.tail[sc + ud]);
        off = off + (rem - q * s) * t;
        rem = q;
    }
    return off;
}

// The workgroup's position in the whole launch grid. A grid past the adapter's
// max_compute_workgroups_per_dimension is split into several dispatches (GpuContext::dispatch),
// each passing the grid position of its first workgroup in the last three words of params.tail.
fn group_id(wid: vec3<u32>) -> vec3<u32> {
    let n = arrayLength(&params.tail);
    return wid + vec3<u32>(params.tail[n - 3u], params.tail[n - 2u], params.tail[n - 1u]);
}

// Linear invocation index of a 1-D problem over 256-wide workgroups.
fn linear_id(wid: vec3<u32>, lid: vec3<u32>) -> u32 {
    return group_id(wid).x * 256u + lid.x;
}

// Infinity and NaN built at run time: WGSL rejects them as constant expressions (Tint refuses to
// compile `bitcast<f32>(0x7f800000u)`), so each reads the params' length, then masks it away.
fn inf_f32() -> f32 {
    return bitcast<f32>(0x7f800000u | (arrayLength(&params.tail) & 0u));
}
fn nan_f32() -> f32 {
    return bitcast<f32>(0x7fc00000u | (arrayLength(&params.tail) & 0u));
}

// NaN test on the bits: WGSL lets compilers assume floats are never NaN, so `x != x` may fold
// to false (it does on llvmpipe).
fn is_nan_f(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
// max/min that propagate NaN, as PyTorch's do.
fn max_nan(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, is_nan_f(b)), a, is_nan_f(a));
}
fn min_nan(a: f32, b: f32) -> f32 {
    return select(select(min(a, b), b, is_nan_f(b)), a, is_nan_f(a));
}

// tanh that stays finite for large |x| on every driver; below 0.625 the CPU's odd polynomial
// (vmath::tanh), where 1 - e^{-2|x|} would cancel (tanh(1e-30) came out 3e-8).
fn tanh_f(x: f32) -> f32 {
    let e = exp_f(-2.0 * abs(x));
    let s = x * x;
    let p = (((-5.7049887e-3 * s + 2.0639089e-2) * s - 5.3739716e-2) * s + 1.3331442e-1) * s
        - 3.3333282e-1;
    // x itself at ±0, so that tanh(-0) = -0.
    let small = select(p * s * x + x, x, x == 0.0);
    return select(sign(x) * (1.0 - e) / (1.0 + e), small, abs(x) < 0.625);
}

// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit); below 0.5 the CPU's series
// x·P(x²) (vmath::erf's ERF_P), which keeps the relative accuracy near 0 that 1 - erfc loses.
fn erf_f(x: f32) -> f32 {
    let z = abs(x);
    let r = erfc_pos_f(z);
    return select(sign(x) * (1.0 - r), erf_series_f(x), z < 0.5);
}

// erf(x) for |x| < 0.5: x·P(x²) (vmath::erf's ERF_P).
fn erf_series_f(x: f32) -> f32 {
    let s = x * x;
    return x * ((((((8.007011e-5 * s - 8.053787e-4) * s + 5.1929613e-3) * s - 2.6856071e-2) * s
        + 1.1283635e-1) * s - 3.761263e-1) * s + 1.1283792);
}

// erfc(z) for z >= 0 with fractional error < 1.2e-7 (Numerical Recipes' Chebyshev fit) where z
// is small; past z = 3 the exponent's f32 sum loses some: 4e-6 at z = 4.2.
fn erfc_pos_f(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    return t * exp_f(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))));
}

// The standard normal CDF Φ(x) = (1 + erf(x/√2)) / 2, as erfc(-x/√2) / 2 in the left tail, where
// 1 + erf cancels: GELU(-5.5) was -0 (PyTorch's f32 too; -1.04e-7 exactly) and 0.16% off at -4,
// now within 4e-6 of the CPU's (vmath::norm_cdf).
fn norm_cdf_f(x: f32) -> f32 {
    let z = x * 0.70710678118654752;
    let r = 0.5 * erfc_pos_f(abs(z));
    return select(select(1.0 - r, r, z < 0.0), 0.5 * (1.0 + erf_series_f(z)), abs(z) < 0.5);
}

// e^x to about an ulp (Cephes' expf, as the CPU's vmath::exp, which evaluates the polynomial in
// another order, so an ulp may differ): n = round(x / ln 2), r = x - n ln 2 in two parts, a
// polynomial for e^r, scaled by 2^n in two steps (so that subnormal results and overflow come
// out right). WGSL's `exp` may be 3 + 2|x| ulps off, and lavapipe's was 62 at -73.5.
fn exp_f(x: f32) -> f32 {
    if (is_nan_f(x)) {
        return x;
    }
    let xc = clamp(x, -104.0, 89.0);
    let nf = round(xc * 1.442695);
    let r = (xc - nf * 0.6933594) + nf * 2.1219444e-4;
    let p = ((((1.9875691e-4 * r + 1.3982e-3) * r + 8.333452e-3) * r + 4.1665796e-2) * r
        + 1.6666665e-1) * r + 5.0000001e-1;
    let y = p * r * r + r + 1.0;
    let n = i32(nf);
    let h = n >> 1u;
    return y * pow2i_f(h) * pow2i_f(n - h);
}

// 2^n for n in [-126, 127], from the exponent bits.
fn pow2i_f(n: i32) -> f32 {
    return bitcast<f32>(u32(n + 127) << 23u);
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for negative x (no overflow, and subnormal results where
// they belong), as the CPU's.
fn sigmoid_f(x: f32) -> f32 {
    let e = exp_f(-abs(x));
    return select(1.0, e, x < 0.0) / (1.0 + e);
}

// e^x - 1 without the cancellation near 0: Taylor's series to x⁹ below |x| = 0.5 (truncated
// below 1e-9 relative, so f32's rounding dominates), e^x - 1 past it.
fn expm1_f(x: f32) -> f32 {
    let p = x * (1.0 + x * (0.5 + x * (1.6666667e-1 + x * (4.1666668e-2 + x * (8.3333333e-3
        + x * (1.3888889e-3 + x * (1.9841270e-4 + x * (2.4801587e-5 + x * 2.7557319e-6))))))));
    return select(exp_f(x) - 1.0, p, abs(x) < 0.5);
}

// ln(1 + y) for y >= 0 without relying on `log` near 1 (whose error WGSL bounds only absolutely,
// and lavapipe's gave softplus(-16) 6% high): below 0.5, 2 atanh(s) with s = y / (2 + y) by its
// series (s <= 0.2: six terms reach f32's precision); past it log_f(1 + y).
fn log1p_f(y: f32) -> f32 {
    let s = y / (2.0 + y);
    let s2 = s * s;
    let series = 2.0 * s * (1.0 + s2 * (0.33333334 + s2 * (0.2 + s2 * (0.14285715
        + s2 * (0.11111111 + s2 * 0.09090909)))));
    return select(log_f(1.0 + y), series, y < 0.5);
}

// The natural log to within an ulp, at every argument (FreeBSD's logf): x = 2^k·(1 + f) with
// 1 + f in [√2/2, √2), log(1 + f) = f - f²/2 + s·(f²/2 + R(s²)) for s = f / (2 + f), where f is
// exact and the division's error reaches only the small correction. WGSL's `log` bounds only the
// absolute error inside [0.5, 2], and llvmpipe's was 73% off at 0.99999994 (0.3% at 0.99999).
// NaN below 0, -inf at ±0 (subnormals scaled first: a driver that flushes them gives -inf).
fn log_f(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) {
        return -inf_f32();
    }
    if (b >= 0x7f800000u) {
        return select(nan_f32(), x, b == 0x7f800000u);
    }
    var ix = b;
    var k = -127;
    if (ix < 0x00800000u) {
        ix = bitcast<u32>(x * 33554432.0);
        k = k - 25;
        if (ix == 0u) {
            return -inf_f32();
        }
    }
    k = k + i32(ix >> 23u);
    ix = ix & 0x7fffffu;
    // i is 2^23 where the mantissa is past √2: halve it and add one to k.
    let i = (ix + 0x4afb20u) & 0x800000u;
    let f = bitcast<f32>(ix | (i ^ 0x3f800000u)) - 1.0;
    k = k + i32(i >> 23u);
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let r = z * (0.66666663 + w * 0.28498787) + w * (0.40000972 + w * 0.24279079);
    let hfsq = 0.5 * f * f;
    let dk = f32(k);
    // ln 2 = 0.69313812 + 9.0580006e-6, the first part exact times any k.
    return dk * 0.69313812 - ((hfsq - (s * (hfsq + r) + dk * 9.0580006e-6)) - f);
}

// An infinity, tested on the bits (a compiler may assume none reaches a comparison).
fn is_inf_f(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

// `x ** e` for a scalar exponent: PyTorch's forms for 2, 3, -2, 0.5, -0.5 and -1 (products,
// `sqrt`, a division; the CPU's `UnaryOp::cpu`), else `pow_f`.
fn pow_scalar_f(x: f32, e: f32) -> f32 {
    if (e == 2.0) {
        return x * x;
    }
    if (e == 3.0) {
        return x * x * x;
    }
    if (e == -2.0) {
        return 1.0 / (x * x);
    }
    if (e == 0.5) {
        return sqrt(x);
    }
    if (e == -0.5) {
        return 1.0 / sqrt(x);
    }
    if (e == -1.0) {
        return 1.0 / x;
    }
    return pow_f(x, e);
}

// pow with C's (and so PyTorch's) special values, which WGSL's `pow` leaves undefined and
// llvmpipe's gets wrong (pow(NaN, 2) = 0, pow(0, -1) = 0, pow(1, inf) = NaN): pow(x, ±0) = 1
// and pow(1, e) = 1, NaN included; else NaN for a NaN operand; the limits at infinite
// exponents, zero and infinite bases with the sign of an odd integral exponent; NaN for a
// negative base and a non-integral exponent; else `|x|^e` with that sign (`pow_int_f` for an
// integral exponent below 2^31 in magnitude, WGSL's `pow` for the others).
fn pow_f(x: f32, e: f32) -> f32 {
    let nx = is_nan_f(x);
    let ne = is_nan_f(e);
    if (!ne && e == 0.0) {
        return 1.0;
    }
    if (!nx && x == 1.0) {
        return 1.0;
    }
    if (nx || ne) {
        return nan_f32();
    }
    let ax = abs(x);
    if (is_inf_f(e)) {
        if (ax == 1.0) {
            return 1.0;
        }
        return select(inf_f32(), 0.0, (ax < 1.0) == (e > 0.0));
    }
    let integral = floor(e) == e;
    let negative = (bitcast<u32>(x) >> 31u) == 1u;
    let flip = negative && integral && abs(e % 2.0) == 1.0;
    var m: f32;
    if (is_inf_f(x)) {
        m = select(0.0, inf_f32(), e > 0.0);
    } else if (x == 0.0) {
        m = select(inf_f32(), 0.0, e > 0.0);
    } else {
        if (negative && !integral) {
            return nan_f32();
        }
        if (integral && abs(e) < 2147483648.0) {
            m = pow_int_f(ax, e);
        } else {
            m = pow(ax, e);
        }
    }
    return select(m, -m, flip);
}

// `x^e` for a finite x > 0 and an integral |e| < 2^31, by repeated squaring in double-f32 (a
// value is hi + lo, each product's rounding error recovered exactly by `prod_err`): correctly
// rounded but within about 2^-16 of an ulp's half, so exact powers stay exact. WGSL's `pow` is
// exp2(e·log2(x)), and llvmpipe's gave 3^13 = 1594323.8, 10^5 = 99999.984, 7^3 = 343.00003
// (plain f32 squaring would be worse: each squaring doubles the error, 5e-4 at e = 10^4). A
// negative e takes the powers of 1/x (in double-f32), so no partial product overflows or
// underflows where the result does not: each lies between 1 and the result.
fn pow_int_f(x: f32, e: f32) -> f32 {
    var b = vec2<f32>(x, 0.0);
    if (e < 0.0) {
        let q = 1.0 / x;
        let p = keep_f(q * x);
        b = vec2<f32>(q, select(((1.0 - p) - prod_err(q, x, p)) * q, 0.0, is_inf_f(q)));
    }
    var n = u32(abs(e));
    var r = vec2<f32>(1.0, 0.0);
    loop {
        if ((n & 1u) == 1u) {
            r = dd_mul(r, b);
        }
        n = n >> 1u;
        if (n == 0u) {
            break;
        }
        b = dd_mul(b, b);
    }
    return r.x + r.y;
}

// The product of double-f32 values (hi, lo), normalised so that hi is the sum rounded; an
// infinite product stays infinite (its error term would be NaN). `p` is kept apart so that no
// compiler contracts `p + err` into an fma that would count the product's error twice.
fn dd_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let p = keep_f(a.x * b.x);
    if (is_inf_f(p)) {
        return vec2<f32>(p, 0.0);
    }
    let err = prod_err(a.x, b.x, p) + (a.x * b.y + a.y * b.x);
    let s = keep_f(p + err);
    return vec2<f32>(s, err - (s - p));
}

// a·b - p exactly, for p = a·b rounded and finite (and no product of subnormals): by `fma`
// where it rounds once (GPUs with a fused multiply-add), else by Dekker's splitting into 12-bit
// halves, whose products are exact (llvmpipe rounds `fma`'s product first, so its error term
// was 0). 0 past 1e30 in magnitude, where the split's halves could overflow (pow(FLT_MAX, 1)
// came out NaN): a power that large loses its last products' error terms, an ulp or two.
fn prod_err(a: f32, b: f32, p: f32) -> f32 {
    if (max(abs(p), max(abs(a), abs(b))) > 1e30) {
        return 0.0;
    }
    if (fma_fused()) {
        return fma(a, b, -keep_f(p));
    }
    let sa = split_f(a);
    let sb = split_f(b);
    return ((sa.x * sb.x - p) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
}

// True where `fma` rounds once: tested at run time on (1 + 2^-12)², which needs 25 bits (built
// with `keep_f`, so that no compiler folds the test with its own rounding).
fn fma_fused() -> bool {
    let s = keep_f(1.0002441);
    return fma(s, s, -(s * s)) != 0.0;
}

// x, through an integer operation that compilers cannot see through (an OR with the params'
// length past 2^28 words, always 0). It keeps the rounding steps of the error-free
// transformations above, and their products out of contracted fmas: Mesa's compilers simplify
// inexact float algebra (a - (a - b) to b, (a + b) - a to b), which made every error term 0 on
// lavapipe.
fn keep_f(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | (arrayLength(&params.tail) >> 28u));
}

// Veltkamp's split of a (at most 1e30 in magnitude) into hi + lo, 12 significant bits each.
fn split_f(a: f32) -> vec2<f32> {
    let c = keep_f(4097.0 * a);
    let hi = c - keep_f(c - a);
    return vec2<f32>(hi, a - hi);
}

// sin and cos to about an ulp at every finite argument, as the CPU's (and PyTorch's): the
// argument reduced (Cody and Waite below 3000, exactly by `reduce_pio2` past it: 14 times slower
// on lavapipe), then polynomials on [-π/4, π/4] (Cephes' sinf and cosf). WGSL's builtins bound
// only the absolute error inside [-π, π]; llvmpipe's were off by 7e-4 at 1e8 and gave
// sin(1e10) = -1 (PyTorch: -0.4875), and GPUs reduce in f32.
fn sin_f(x: f32) -> f32 {
    return trig_f(x, 0u);
}
fn cos_f(x: f32) -> f32 {
    return trig_f(x, 1u);
}

// sin(x) for `shift` 0, cos(x) (sin of the next quadrant) for 1. NaN for ±inf and NaN; x itself
// below 2^-12 for sin (so -0 stays -0).
fn trig_f(x: f32, shift: u32) -> f32 {
    let ax = abs(x);
    if ((bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u) {
        return nan_f32();
    }
    if (shift == 0u && ax < 2.4414062e-4) {
        return x;
    }
    var r = ax;
    var q = 0u;
    if (ax > 0.78539819 && ax < 3000.0) {
        // Cody and Waite: π/2 in four parts, the first three short enough that j times each is
        // exact (j < 2^11), the rest under 1e-19.
        let j = round(ax * 0.63661975);
        r = (((ax - j * 1.5703125) - j * 4.838109e-4) - j * 1.5890691e-8) - j * 2.563344e-12;
        q = u32(j) & 3u;
    } else if (ax > 0.78539819) {
        let red = reduce_pio2(bitcast<u32>(ax));
        r = red.r;
        q = red.q;
    }
    q = (q + shift) & 3u;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3
        + z * 2.443315711809948e-5));
    var y = select(s, c, (q & 1u) == 1u);
    y = select(y, -y, q >= 2u);
    // sin is odd, cos even.
    return select(y, -y, shift == 0u && x < 0.0);
}

// x = r + (q + 4k)·π/2 for some integer k, |r| <= π/4.
struct Reduced {
    r: f32,
    q: u32,
}

// Payne and Hanek's reduction of a finite x > π/4 (its bits). x = m·2^e with m an integer
// below 2^24; x·2/π mod 4 is m times a 96-bit window of 2/π's bits (the earlier ones add
// multiples of 4, the later ones under 2^-70), exactly, in integers; the fraction's top 64 bits
// give r.
fn reduce_pio2(bits: u32) -> Reduced {
    let m = (bits & 0x7fffffu) | 0x800000u;
    let e = i32(bits >> 23u) - 150;
    // The window starts at 2/π's bit i0 (1-based): i0 = max(1, e - 1).
    let i0 = u32(max(1, e - 1));
    let o = i0 - 1u;
    let w0 = bits_at(o);
    let w1 = bits_at(o + 32u);
    let w2 = bits_at(o + 64u);
    // P = m·(w0 w1 w2), 120 bits in four words, least significant first.
    let a2 = mul_wide(m, w2);
    let a1 = mul_wide(m, w1);
    let a0 = mul_wide(m, w0);
    let p1 = a2.x + a1.y;
    let c1 = select(0u, 1u, p1 < a1.y);
    let t = a1.x + a0.y;
    let p2 = t + c1;
    let c2 = select(0u, 1u, t < a0.y) + select(0u, 1u, p2 < c1);
    let p = vec4<u32>(a2.y, p1, p2, a0.x + c2);
    // x·2/π mod 4 = P·2^-s.
    let s = u32(i32(i0) + 95 - e);
    var q = word_at(p, s) & 3u;
    var hi = word_at(p, s - 32u);
    var lo = word_at(p, s - 64u);
    // A fraction past 1/2 is the next quadrant less (1 - fraction).
    let up = hi >= 0x80000000u;
    if (up) {
        lo = ~lo + 1u;
        hi = ~hi + select(0u, 1u, lo == 0u);
        q = q + 1u;
    }
    if (hi == 0u && lo == 0u) {
        return Reduced(0.0, q & 3u);
    }
    // Normalise the 64-bit fraction (shifted left by lz) and take it as hi24·2^-24 +
    // mid24·2^-48, times 2^-lz.
    var lz = 0u;
    if (hi == 0u) {
        hi = lo;
        lo = 0u;
        lz = 32u;
    }
    let k = countLeadingZeros(hi);
    if (k > 0u) {
        hi = (hi << k) | (lo >> (32u - k));
        lo = lo << k;
    }
    lz = lz + k;
    let f_hi = ldexp(f32(hi >> 8u), -24 - i32(lz));
    let f_lo = ldexp(f32(((hi & 0xffu) << 16u) | (lo >> 16u)), -48 - i32(lz));
    // r = f·π/2, π/2 = 1.5707964 - 4.371139e-8.
    var r = f_hi * 1.5707964 + (f_hi * -4.3711388e-8 + f_lo * 1.5707964);
    return Reduced(select(r, -r, up), q & 3u);
}

// The 32 bits of 2/π from bit `o` (0-based) on: its first 320 bits (0.A2F9836E...), enough for
// any f32.
fn bits_at(o: u32) -> u32 {
    let i = min(o / 32u, 8u);
    let k = o % 32u;
    let a = two_over_pi_word(i);
    if (k == 0u) {
        return a;
    }
    return (a << k) | (two_over_pi_word(i + 1u) >> (32u - k));
}

// Word i of 2/π's bits (by selects: a local array cost lavapipe's sin a third of its time even
// where no lane reduced this way).
fn two_over_pi_word(i: u32) -> u32 {
    var w = select(0x424dd2e0u, 0xb7246e3au, i == 8u);
    w = select(w, 0xdebbc561u, i == 7u);
    w = select(w, 0xfe5163abu, i == 6u);
    w = select(w, 0x3c439041u, i == 5u);
    w = select(w, 0xdb629599u, i == 4u);
    w = select(w, 0xf534ddc0u, i == 3u);
    w = select(w, 0xfc2757d1u, i == 2u);
    w = select(w, 0x4e441529u, i == 1u);
    return select(w, 0xa2f9836eu, i == 0u);
}

// The 32 bits of the 128-bit `p` (least significant word first) from bit `k` < 128 up (0s past
// its top).
fn word_at(p: vec4<u32>, k: u32) -> u32 {
    let i = k / 32u;
    let b = k % 32u;
    let w = p[min(i, 3u)];
    let next = select(0u, p[min(i + 1u, 3u)], i + 1u <= 3u);
    if (b == 0u) {
        return w;
    }
    return (w >> b) | (next << (32u - b));
}

// a·b as 64 bits: (high word, low word), from 16-bit halves.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu;
    let ah = a >> 16u;
    let bl = b & 0xffffu;
    let bh = b >> 16u;
    let ll = al * bl;
    let lh = al * bh;
    let hl = ah * bl;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    let hi = ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
    return vec2<u32>(hi, (ll & 0xffffu) | (mid << 16u));
}

// Exact GELU's derivative: Φ(x) + x φ(x).
fn gelu_grad_f(x: f32) -> f32 {
    return norm_cdf_f(x) + x * 0.39894228040143268 * exp_f(-0.5 * x * x);
}

// C's fmod (a - trunc(a / b) * b, the sign of a), exactly, as the CPU's: long division on the
// significands (musl's fmodf), so no rounding of a / b can move a result by a whole b. NaN for
// b = 0, an infinite a or a NaN; a for an infinite b.
fn fmod_f(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let sa = ua & 0x80000000u;
    let ma = ua & 0x7fffffffu;
    let mb = bitcast<u32>(b) & 0x7fffffffu;
    if (mb == 0u || mb > 0x7f800000u || ma >= 0x7f800000u) {
        return nan_f32();
    }
    // Magnitudes order as their bits.
    if (ma <= mb) {
        return select(a, bitcast<f32>(sa), ma == mb);
    }
    // Significands with the leading bit at bit 23; subnormals normalised (exponent below 1).
    var ea = i32(ma >> 23u);
    var xa = (ma & 0x7fffffu) | 0x800000u;
    if (ea == 0) {
        let s = countLeadingZeros(ma) - 8u;
        xa = ma << s;
        ea = 1 - i32(s);
    }
    var eb = i32(mb >> 23u);
    var xb = (mb & 0x7fffffu) | 0x800000u;
    if (eb == 0) {
        let s = countLeadingZeros(mb) - 8u;
        xb = mb << s;
        eb = 1 - i32(s);
    }
    for (; ea > eb; ea = ea - 1) {
        if (xa >= xb) {
            xa = xa - xb;
            if (xa == 0u) {
                return bitcast<f32>(sa);
            }
        }
        xa = xa << 1u;
    }
    if (xa >= xb) {
        xa = xa - xb;
        if (xa == 0u) {
            return bitcast<f32>(sa);
        }
    }
    let s = countLeadingZeros(xa) - 8u;
    xa = xa << s;
    ea = ea - i32(s);
    if (ea > 0) {
        xa = (xa - 0x800000u) | (u32(ea) << 23u);
    } else {
        xa = xa >> u32(1 - ea);
    }
    return bitcast<f32>(xa | sa);
}

// torch.remainder on floats (PyTorch's formula): fmod, plus b where the signs differ.
fn remainder_f(a: f32, b: f32) -> f32 {
    let m = fmod_f(a, b);
    return select(m, m + b, m != 0.0 && ((b < 0.0) != (m < 0.0)));
}

// C's `%` on integers (truncating, the sign of a), for b != 0 (the kernels check it): a % -1 is
// 0 without i32::MIN / -1's overflow.
fn fmod_i(a: i32, b: i32) -> i32 {
    return a % select(b, 1, b == 0 || b == -1);
}

// torch.remainder on integers: the sign of b.
fn remainder_i(a: i32, b: i32) -> i32 {
    let r = fmod_i(a, b);
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}
