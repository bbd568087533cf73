// im2col: unfold [N, C, H, W] into columns [N, C*kh*kw, Ho*Wo] (conv2d and pooling); padding
// reads params.pad. params: WindowParams
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
    let row = e / L;
    let p = e % L;
    let nc = row / kk;
    let ki = (row % kk) / kw;
    let kj = (row % kk) % kw;
    let h = i32((p / Wo) * sh + ki * dh) - i32(ph);
    let w = i32((p % Wo) * sw + kj * dw) - i32(pw);
    if (h < 0 || w < 0 || h >= i32(H) || w >= i32(W)) {
        st_dst(e, bitcast<{{C}}>(params.pad));
    } else {
        st_dst(e, ld_src(nc * H * W + u32(h) * W + u32(w)));
    }
}
