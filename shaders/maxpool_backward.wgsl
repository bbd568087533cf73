// Gradient of 2-D max pooling, one invocation per input element: the sum of the output gradients
// whose window picked this element. Deterministic, no atomics.
// params: WindowParams
// bindings: 1 grad (output gradient), 2 idx (i32), 3 dst
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
    let plane = e / (H * W);
    let h = (e % (H * W)) / W;
    let w = e % W;
    let me = i32(h * W + w);
    var acc = 0.0;
    let sh = params.g.sh;
    let sw = params.g.sw;
    if (params.g.dh == 1u && params.g.dw == 1u) {
        // Undilated: the windows holding padded row h + ph are oh in
        // [ceil((h + ph - kh + 1) / sh), (h + ph) / sh]: a range, found with two divisions
        // instead of a test per tap.
        let hp = h + params.g.ph;
        let wp = w + params.g.pw;
        let oh0 = select(0u, (hp + 1u - params.g.kh + sh - 1u) / sh, hp + 1u >= params.g.kh);
        let ow0 = select(0u, (wp + 1u - params.g.kw + sw - 1u) / sw, wp + 1u >= params.g.kw);
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
    for (var ki = 0u; ki < params.g.kh; ki = ki + 1u) {
        let hh = i32(h + params.g.ph) - i32(ki * params.g.dh);
        if (hh < 0 || u32(hh) % sh != 0u || u32(hh) / sh >= Ho) {
            continue;
        }
        let oh = u32(hh) / sh;
        for (var kj = 0u; kj < params.g.kw; kj = kj + 1u) {
            let ww = i32(w + params.g.pw) - i32(kj * params.g.dw);
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
