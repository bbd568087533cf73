// Shared helpers, prepended to every kernel. `params` is binding 0 of every kernel: sizes, shapes,
// strides and scalar parameters as u32 words (floats bit-cast).
@group(0) @binding(0) var<storage, read> params: array<u32>;

// Storage offset of row-major element `i` for a view whose shape starts at params[shape_at] and whose
// strides start at params[strides_at] (ndim words each).
fn offset_of(i: u32, ndim: u32, shape_at: u32, strides_at: u32) -> u32 {
    var rem = i;
    var off = 0u;
    for (var d = i32(ndim) - 1; d >= 0; d = d - 1) {
        let s = params[shape_at + u32(d)];
        off = off + (rem % s) * params[strides_at + u32(d)];
        rem = rem / s;
    }
    return off;
}

// The workgroup's position in the whole launch grid. A grid past the adapter's
// max_compute_workgroups_per_dimension is split into several dispatches (GpuContext::dispatch),
// each passing the grid position of its first workgroup in the last three params words.
fn group_id(wid: vec3<u32>) -> vec3<u32> {
    let n = arrayLength(&params);
    return wid + vec3<u32>(params[n - 3u], params[n - 2u], params[n - 1u]);
}

// Linear invocation index of a 1-D problem over 256-wide workgroups.
fn linear_id(wid: vec3<u32>, lid: vec3<u32>) -> u32 {
    return group_id(wid).x * 256u + lid.x;
}

fn fmeta(i: u32) -> f32 {
    return bitcast<f32>(params[i]);
}

// Infinity and NaN built at run time: WGSL rejects them as constant expressions (Tint refuses to
// compile `bitcast<f32>(0x7f800000u)`), so each reads a `params` word it then masks away.
fn inf_f32() -> f32 {
    return bitcast<f32>(0x7f800000u | (params[0] & 0u));
}
fn nan_f32() -> f32 {
    return bitcast<f32>(0x7fc00000u | (params[0] & 0u));
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

// tanh that stays finite for large |x| on every driver.
fn tanh_f(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit).
fn erf_f(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))));
    return sign(x) * (1.0 - r);
}

// pow with PyTorch's results for negative bases and integral exponents, and pow(x, 0) = 1.
fn pow_f(x: f32, e: f32) -> f32 {
    if (e == 0.0) {
        return 1.0;
    }
    if (x >= 0.0) {
        return pow(x, e);
    }
    if (floor(e) != e) {
        return nan_f32();
    }
    let m = pow(-x, e);
    if (abs(e % 2.0) == 1.0) {
        return -m;
    }
    return m;
}

// Exact GELU's derivative: Φ(x) + x φ(x).
fn gelu_grad_f(x: f32) -> f32 {
    return 0.5 * (1.0 + erf_f(x * 0.70710678118654752)) + x * 0.39894228040143268 * exp(-0.5 * x * x);
}
