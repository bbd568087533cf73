// out[i] = EXPR(x) for a strided float input, computed in f32 whatever the storage type.
// params: UnaryParams; tail: [shape[ndim], strides[ndim]]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let p0 = params.p0;
    let p1 = params.p1;
    let x = ld_src(params.offset + offset_of(i, nd, 0u, nd));
    st_dst(i, {{EXPR}});
}
