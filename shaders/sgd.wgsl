// One fused SGD update per element, in place on the parameter and, in the momentum variant, its
// momentum buffer (f32): PyTorch's formulas in the order the tensor ops of `optim/sgd.rs` apply them.
// params: SgdParams
{{DECLS}}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let w = p[i];
    var d = g[i];
    if (params.weight_decay != 0.0) {
        d = d + w * params.weight_decay;
    }
{{MOMENTUM}}
    p[i] = w - d * params.lr;
}
