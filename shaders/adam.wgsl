// One fused Adam/AdamW update per element, in place on the parameter and its two moments (f32).
// params: AdamParams
@group(0) @binding(1) var<storage, read_write> p: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let lr = params.lr;
    let b1 = params.beta1;
    let b2 = params.beta2;
    let wd = params.weight_decay;
    var w = p[i];
    var d = g[i];
    if (params.decoupled != 0u) {
        w = w * (1.0 - lr * wd);
    } else {
        d = d + w * wd;
    }
    let mi = m[i] * b1 + d * (1.0 - b1);
    let vi = v[i] * b2 + d * d * (1.0 - b2);
    m[i] = mi;
    v[i] = vi;
    let denom = sqrt(vi) * (1.0 / sqrt(params.bias_correction2)) + params.eps;
    p[i] = w - (mi / denom) * (lr / params.bias_correction1);
}
