// torch.gather along `dim`: out[i] = x[coords(i) with coords[dim] = idx[i]].
// x is contiguous; idx is strided with the output's shape. An out-of-range index is recorded in
// the index-check flag (reported at the next readback) and reads 0.
// params: GatherParams; tail: [xshape[nd], xstrides[nd], oshape[nd], istrides[nd]]
// bindings: 1 x, 2 idx (i32), 3 dst, 4 the index-check flag
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let dim = params.dim;
    let j = ld_idx(params.off_idx + offset_of(i, nd, 2u * nd, 3u * nd));
    if (!index_ok(j, params.tail[dim], dim)) {
        st_dst(i, {{C}}(0));
        return;
    }
    var rem = i;
    var off = 0u;
    for (var d = i32(nd) - 1; d >= 0; d = d - 1) {
        let s = params.tail[2u * nd + u32(d)];
        let q = rem / s;
        var c = rem - q * s;
        rem = q;
        if (u32(d) == dim) {
            c = u32(j);
        }
        off = off + c * params.tail[nd + u32(d)];
    }
    st_dst(i, ld_x(off));
}
