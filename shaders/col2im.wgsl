// col2im: fold columns [N, C*kh*kw, Ho*Wo] back to [N, C, H, W], summing overlaps (the adjoint of
// im2col), one invocation per output element: deterministic, no atomics. Geometry in meta:
// [n_out, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, pad_bits]
// bindings: 1 src, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_id(wid, lid);
    if (e >= params[0]) {
        return;
    }
    let H = params[3];
    let W = params[4];
    let kh = params[5];
    let kw = params[6];
    let sh = params[7];
    let sw = params[8];
    let ph = params[9];
    let pw = params[10];
    let dh = params[11];
    let dw = params[12];
    let Ho = params[13];
    let Wo = params[14];
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
