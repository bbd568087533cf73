// Strided copy with conversion: dst[off_d + strided_d(i)] = CONVERT(src[off_s + strided_s(i)]).
// Serves contiguous(), casts, and writes into views (cat, in-place ops).
// params: [n, ndim, off_s, off_d, shape, strides_s, strides_d]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let x = ld_src(params[2] + offset_of(i, nd, 4u, 4u + nd));
    st_dst(params[3] + offset_of(i, nd, 4u, 4u + 2u * nd), {{CONVERT}});
}
