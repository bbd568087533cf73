// The input gradient of softmax or log-softmax along each row of contiguous f32 [rows, n] outputs
// `y` and output gradients `g`, one invocation per row (the rows softmax_rows.wgsl takes). The
// formula is the composite's: g - exp(y) * sum(g) for log-softmax, y * (g - sum(g * y)) for
// softmax.
// params: ReduceSmallParams
// bindings: 1 y, 2 g, 3 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = linear_id(wid, lid);
    if (row >= params.rows) {
        return;
    }
    let n = params.n;
    let base = row * n;
    var s = 0.0;
    for (var j = 0u; j < n; j = j + 1u) {
        s = s + {{TERM}};
    }
    for (var j = 0u; j < n; j = j + 1u) {
        st_dst(base + j, {{GRAD}});
    }
}
