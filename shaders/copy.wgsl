// Strided copy with conversion: dst[off_d + strided_d(i)] = CONVERT(src[off_s + strided_s(i)]).
// Serves contiguous(), casts, and writes into views (cat, in-place ops).
// params: CopyParams; tail: [shape, strides_s, strides_d]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let o = offsets2(i, nd, 0u, nd, 2u * nd);
    let x = ld_src(params.off_src + o.x);
    st_dst(params.off_dst + o.y, {{CONVERT}});
}
