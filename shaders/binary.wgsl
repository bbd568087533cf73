// out[i] = EXPR(a, b) for two strided (broadcast) inputs, in their compute type {{C}}.
// params: [n, ndim, off_a, off_b, shape[ndim], strides_a[ndim], strides_b[ndim]], then for the
// integer division ops (which check their divisor) [op id, slot, token] of the index check
// bindings: 1 lhs, 2 rhs, 3 dst, 4 the index-check flag (integer division ops only)
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let a = ld_lhs(params[2] + offset_of(i, nd, 4u, 4u + nd));
    let b = ld_rhs(params[3] + offset_of(i, nd, 4u, 4u + 2u * nd));
    st_dst(i, {{EXPR}});
}
