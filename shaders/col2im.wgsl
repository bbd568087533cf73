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
    let g = params.g;
    let kk = g.kh * g.kw;
    let L = g.ho * g.wo;
    let nc = e / (g.h * g.w);
    let h = (e % (g.h * g.w)) / g.w;
    let w = (e % (g.h * g.w)) % g.w;
    var acc = {{C}}(0);
    for (var ki = 0u; ki < g.kh; ki = ki + 1u) {
        let hh = i32(h + g.ph) - i32(ki * g.dh);
        if (hh < 0 || u32(hh) % g.sh != 0u || u32(hh) / g.sh >= g.ho) {
            continue;
        }
        let oh = u32(hh) / g.sh;
        for (var kj = 0u; kj < g.kw; kj = kj + 1u) {
            let ww = i32(w + g.pw) - i32(kj * g.dw);
            if (ww < 0 || u32(ww) % g.sw != 0u || u32(ww) / g.sw >= g.wo) {
                continue;
            }
            let ow = u32(ww) / g.sw;
            acc = acc + ld_src((nc * kk + ki * g.kw + kj) * L + oh * g.wo + ow);
        }
    }
    st_dst(e, acc);
}
