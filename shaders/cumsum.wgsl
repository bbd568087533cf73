// Inclusive prefix sum along each row of a contiguous [rows, n] input, one invocation per row,
// over columns [j0, j1): past column 0 the sum continues from the stored dst[j0 - 1] (the
// launcher splits long rows where the adapter caps an invocation's loop iterations).
// params: CumsumParams
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = linear_id(wid, lid);
    if (r >= params.rows) {
        return;
    }
    let n = params.n;
    let j0 = params.j0;
    var acc: {{C}} = {{C}}(0);
    if (j0 > 0u) {
        acc = ld_dst(r * n + j0 - 1u);
    }
    for (var j = j0; j < params.j1; j = j + 1u) {
        acc = acc + ld_src(r * n + j);
        st_dst(r * n + j, acc);
    }
}
