// out[i] = EXPR(a, b) for two strided (broadcast) inputs, in their compute type {{C}}.
// params: BinaryParams (its check words used by the integer division ops, which check their
// divisor); tail: [shape[ndim], strides_a[ndim], strides_b[ndim]]
// bindings: 1 lhs, 2 rhs, 3 dst, 4 the index-check flag (integer division ops only)
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let o = offsets2(i, nd, 0u, nd, 2u * nd);
    let a = ld_lhs(params.off_a + o.x);
    let b = ld_rhs(params.off_b + o.y);
    st_dst(i, {{EXPR}});
}
