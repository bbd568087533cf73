// Gradient of 2-D max pooling, one invocation per input element: the sum of the output gradients
// whose window picked this element. Deterministic, no atomics.
// params: [n_in, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo]
// bindings: 1 grad (output gradient), 2 idx (i32), 3 dst
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
    let plane = e / (H * W);
    let h = (e % (H * W)) / W;
    let w = e % W;
    let me = i32(h * W + w);
    var acc = 0.0;
    let sh = params[7];
    let sw = params[8];
    if (params[11] == 1u && params[12] == 1u) {
        // Undilated: the windows holding padded row h + ph are oh in
        // [ceil((h + ph - kh + 1) / sh), (h + ph) / sh]: a range, found with two divisions
        // instead of a test per tap.
        let hp = h + params[9];
        let wp = w + params[10];
        let oh0 = select(0u, (hp + 1u - params[5] + sh - 1u) / sh, hp + 1u >= params[5]);
        let ow0 = select(0u, (wp + 1u - params[6] + sw - 1u) / sw, wp + 1u >= params[6]);
        let oh1 = min(hp / sh + 1u, Ho);
        let ow1 = min(wp / sw + 1u, Wo);
        for (var oh = oh0; oh < oh1; oh = oh + 1u) {
            for (var ow = ow0; ow < ow1; ow = ow + 1u) {
                let o = plane * Ho * Wo + oh * Wo + ow;
                if (ld_idx(o) == me) {
                    acc = acc + ld_grad(o);
                }
            }
        }
        st_dst(e, acc);
        return;
    }
    for (var ki = 0u; ki < params[5]; ki = ki + 1u) {
        let hh = i32(h + params[9]) - i32(ki * params[11]);
        if (hh < 0 || u32(hh) % sh != 0u || u32(hh) / sh >= Ho) {
            continue;
        }
        let oh = u32(hh) / sh;
        for (var kj = 0u; kj < params[6]; kj = kj + 1u) {
            let ww = i32(w + params[10]) - i32(kj * params[12]);
            if (ww < 0 || u32(ww) % sw != 0u || u32(ww) / sw >= Wo) {
                continue;
            }
            let o = plane * Ho * Wo + oh * Wo + u32(ww) / sw;
            if (ld_idx(o) == me) {
                acc = acc + ld_grad(o);
            }
        }
    }
    st_dst(e, acc);
}
