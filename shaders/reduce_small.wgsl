// One invocation per row of a contiguous [rows, n] input, for short rows (pooling windows, class
// scores) where a workgroup per row would leave most invocations idle. Same MERGE/INIT/STORE as
// reduce.wgsl.
// params: ReduceSmallParams
// bindings: 1 src, 2 dst
{{DECLS}}

{{PAIR}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = linear_id(wid, lid);
    if (row >= params.rows) {
        return;
    }
    let n = params.n;
    var p = Pair({{INIT}}, NONE);
    for (var j = 0u; j < n; j = j + 1u) {
        p = merge(p.v, p.i, ld_src(row * n + j), j);
    }
    st_dst(row, {{STORE}});
}
