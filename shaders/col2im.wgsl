// col2im: fold columns [N, C*kh*kw, Ho*Wo] back to [N, C, H, W], summing overlaps (the adjoint of
// im2col), one invocation per output element: deterministic, no atomics. params: WindowParams
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_id(wid, lid);
    if (e >= params.total) {
        return;
    }
    let H = params.g.h;
    let W = params.g.w;
    let kh = params.g.kh;
    let kw = params.g.kw;
    let sh = params.g.sh;
    let sw = params.g.sw;
    let ph = params.g.ph;
    let pw = params.g.pw;
    let dh = params.g.dh;
    let dw = params.g.dw;
    let Ho = params.g.ho;
    let Wo = params.g.wo;
    let kk = kh * kw;
    let L = Ho * Wo;
    let nc = e / (H * W);
    let h = (e % (H * W)) / W;
    let w = (e % (H * W)) % W;
    var acc = {{C}}(0);
    for (var ki = 0u; ki < kh; ki = ki + 1u) {
        let hh = i32(h + ph) - i32(ki * dh);
        if (hh < 0 || u32(hh) % sh != 0u || u32(hh) / sh >= Ho) {
            continue;
        }
        let oh = u32(hh) / sh;
        for (var kj = 0u; kj < kw; kj = kj + 1u) {
            let ww = i32(w + pw) - i32(kj * dw);
            if (ww < 0 || u32(ww) % sw != 0u || u32(ww) / sw >= Wo) {
                continue;
            }
            let ow = u32(ww) / sw;
            acc = acc + ld_src((nc * kk + ki * kw + kj) * L + oh * Wo + ow);
        }
    }
    st_dst(e, acc);
}
