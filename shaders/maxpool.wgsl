// 2-D max pooling, one invocation per output element: the window's maximum (NaN wins) and the
// flat index (h * W + w) of its first maximum, which the backward pass routes the gradient to.
// params: WindowParams
// bindings: 1 src, 2 dst, 3 idx (i32)
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_id(wid, lid);
    if (e >= params.total) {
        return;
    }
    let H = params.g.h;
    let W = params.g.w;
    let Ho = params.g.ho;
    let Wo = params.g.wo;
    let plane = e / (Ho * Wo);
    let oh = (e % (Ho * Wo)) / Wo;
    let ow = e % Wo;
    var best = -inf_f32();
    var at = -1;
    for (var ki = 0u; ki < params.g.kh; ki = ki + 1u) {
        let h = i32(oh * params.g.sh + ki * params.g.dh) - i32(params.g.ph);
        if (h < 0 || h >= i32(H)) {
            continue;
        }
        for (var kj = 0u; kj < params.g.kw; kj = kj + 1u) {
            let w = i32(ow * params.g.sw + kj * params.g.dw) - i32(params.g.pw);
            if (w < 0 || w >= i32(W)) {
                continue;
            }
            let v = ld_src(plane * H * W + u32(h) * W + u32(w));
            if (at < 0 || v > best || (is_nan_f(v) && !is_nan_f(best))) {
                best = v;
                at = h * i32(W) + w;
            }
        }
    }
    st_dst(e, best);
    st_idx(e, at);
}
