// out[i] = EXPR(x) for a strided float input, computed in f32 whatever the storage type.
// params: [n, ndim, p0, p1, offset, shape[ndim], strides[ndim]]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let p0 = fmeta(2u);
    let p1 = fmeta(3u);
    let x = ld_src(params[4] + offset_of(i, nd, 5u, 5u + nd));
    st_dst(i, {{EXPR}});
}
