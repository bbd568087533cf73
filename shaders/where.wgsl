// out[i] = cond[i] ? a[i] : b[i], all strided.
// params: WhereParams; tail: [shape, strides_c, strides_a, strides_b]
// bindings: 1 cond, 2 lhs, 3 rhs, 4 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let o = offsets3(i, nd, 0u, nd, 2u * nd, 3u * nd);
    let c = ld_cond(params.off_c + o.x);
    if (c != 0u) {
        st_dst(i, ld_lhs(params.off_a + o.y));
    } else {
        st_dst(i, ld_rhs(params.off_b + o.z));
    }
}
