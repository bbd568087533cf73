// out[i] = cond[i] ? a[i] : b[i], all strided.
// params: [n, ndim, off_c, off_a, off_b, shape, strides_c, strides_a, strides_b]
// bindings: 1 cond, 2 lhs, 3 rhs, 4 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let c = ld_cond(params[2] + offset_of(i, nd, 5u, 5u + nd));
    if (c != 0u) {
        st_dst(i, ld_lhs(params[3] + offset_of(i, nd, 5u, 5u + 2u * nd)));
    } else {
        st_dst(i, ld_rhs(params[4] + offset_of(i, nd, 5u, 5u + 3u * nd)));
    }
}
