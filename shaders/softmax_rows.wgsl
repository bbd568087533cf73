// Softmax or log-softmax of each row of a contiguous f32 [rows, n] input (n >= 1), one invocation
// per row (the rows reduce_small.wgsl takes: short ones, or any on a CPU adapter). The formula is
// the composite's, operation for operation: m = max (NaN wins, as in PyTorch), then
// exp(x - m) / sum or (x - m) - log(sum).
// params: ReduceSmallParams
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = linear_id(wid, lid);
    if (row >= params.rows) {
        return;
    }
    let n = params.n;
    let base = row * n;
    var m = ld_src(base);
    for (var j = 1u; j < n; j = j + 1u) {
        m = max_nan(m, ld_src(base + j));
    }
    var s = 0.0;
    for (var j = 0u; j < n; j = j + 1u) {
        s = s + exp_f(ld_src(base + j) - m);
    }
    {{STORE}}
}
