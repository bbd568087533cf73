// One fused Adam/AdamW update per element, in place on the parameter and its two moments (f32).
// params: [n, lr, beta1, beta2, eps, bias_correction1, bias_correction2, weight_decay, decoupled]
@group(0) @binding(1) var<storage, read_write> p: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let lr = fmeta(1u);
    let b1 = fmeta(2u);
    let b2 = fmeta(3u);
    let wd = fmeta(7u);
    var w = p[i];
    var d = g[i];
    if (params[8] != 0u) {
        w = w * (1.0 - lr * wd);
    } else {
        d = d + w * wd;
    }
    let mi = m[i] * b1 + d * (1.0 - b1);
    let vi = v[i] * b2 + d * d * (1.0 - b2);
    m[i] = mi;
    v[i] = vi;
    let denom = sqrt(vi) * (1.0 / sqrt(fmeta(6u))) + fmeta(4u);
    p[i] = w - (mi / denom) * (lr / fmeta(5u));
}
