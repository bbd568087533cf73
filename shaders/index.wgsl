// torch.gather along `dim`: out[i] = x[coords(i) with coords[dim] = idx[i]].
// x is contiguous; idx is strided with the output's shape. An out-of-range index is recorded in
// the index-check flag (reported at the next readback) and reads 0.
// meta: [n, ndim, dim, off_idx, op id, slot, token, xshape[nd], xstrides[nd], oshape[nd],
//        istrides[nd]]
// bindings: 1 x, 2 idx (i32), 3 dst, 4 the index-check flag
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let dim = params[2];
    let j = ld_idx(params[3] + offset_of(i, nd, 7u + 2u * nd, 7u + 3u * nd));
    if (!index_ok(j, params[7u + dim], dim, 4u)) {
        st_dst(i, {{C}}(0));
        return;
    }
    var rem = i;
    var off = 0u;
    for (var d = i32(nd) - 1; d >= 0; d = d - 1) {
        let s = params[7u + 2u * nd + u32(d)];
        var c = rem % s;
        rem = rem / s;
        if (u32(d) == dim) {
            c = u32(j);
        }
        off = off + c * params[7u + nd + u32(d)];
    }
    st_dst(i, ld_x(off));
}
