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
    let g = params.g;
    let kk = g.kh * g.kw;
    let L = g.ho * g.wo;
    let row = e / L;
    let p = e % L;
    let nc = row / kk;
    let ki = (row % kk) / g.kw;
    let kj = (row % kk) % g.kw;
    let h = i32((p / g.wo) * g.sh + ki * g.dh) - i32(g.ph);
    let w = i32((p % g.wo) * g.sw + kj * g.dw) - i32(g.pw);
    if (h < 0 || w < 0 || h >= i32(g.h) || w >= i32(g.w)) {
        st_dst(e, bitcast<{{C}}>(params.pad));
    } else {
        st_dst(e, ld_src(nc * g.h * g.w + u32(h) * g.w + u32(w)));
    }
}
