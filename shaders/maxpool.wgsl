// 2-D max pooling, one invocation per output element: the window's maximum (NaN wins) and the
// flat index (h * W + w) of its first maximum, which the backward pass routes the gradient to.
// params: [n_out, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo]
// bindings: 1 src, 2 dst, 3 idx (i32)
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_id(wid, lid);
    if (e >= params[0]) {
        return;
    }
    let H = params[3];
    let W = params[4];
    let Ho = params[13];
    let Wo = params[14];
    let plane = e / (Ho * Wo);
    let oh = (e % (Ho * Wo)) / Wo;
    let ow = e % Wo;
    var best = -inf_f32();
    var at = -1;
    for (var ki = 0u; ki < params[5]; ki = ki + 1u) {
        let h = i32(oh * params[7] + ki * params[11]) - i32(params[9]);
        if (h < 0 || h >= i32(H)) {
            continue;
        }
        for (var kj = 0u; kj < params[6]; kj = kj + 1u) {
            let w = i32(ow * params[8] + kj * params[12]) - i32(params[10]);
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
