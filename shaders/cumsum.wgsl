// Inclusive prefix sum along each row of a contiguous [rows, n] input, one invocation per row.
// meta: [rows, n]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = linear_id(wid, lid);
    if (r >= params[0]) {
        return;
    }
    let n = params[1];
    var acc: {{C}} = {{C}}(0);
    for (var j = 0u; j < n; j = j + 1u) {
        acc = acc + ld_src(r * n + j);
        st_dst(r * n + j, acc);
    }
}
