// im2col: unfold [N, C, H, W] into columns [N, C*kh*kw, Ho*Wo] (conv2d and pooling); padding
// reads pad_bits. Geometry in meta:
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
    let row = e / L;
    let p = e % L;
    let nc = row / kk;
    let ki = (row % kk) / kw;
    let kj = (row % kk) % kw;
    let h = i32((p / Wo) * sh + ki * dh) - i32(ph);
    let w = i32((p % Wo) * sw + kj * dw) - i32(pw);
    if (h < 0 || w < 0 || h >= i32(H) || w >= i32(W)) {
        st_dst(e, bitcast<{{C}}>(params[15]));
    } else {
        st_dst(e, ld_src(nc * H * W + u32(h) * W + u32(w)));
    }
}
