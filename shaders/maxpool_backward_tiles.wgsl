// Gradient of 2-D max pooling when the windows tile the planes exactly (stride = kernel, no
// padding or dilation, H = Ho * kh, W = Wo * kw; the host checks): one invocation per window
// writes its kh * kw input gradients, the output gradient at the window's argmax and 0 elsewhere.
// Every input element lies in exactly one window, so this writes each once, with a quarter of
// the per-element kernel's index arithmetic for 2x2 windows.
// params: WindowParams
// bindings: 1 grad (output gradient), 2 idx (i32), 3 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let o = linear_id(wid, lid);
    if (o >= params.total) {
        return;
    }
    let W = params.g.w;
    let Ho = params.g.ho;
    let Wo = params.g.wo;
    let kh = params.g.kh;
    let kw = params.g.kw;
    let plane = o / (Ho * Wo);
    let r = o - plane * Ho * Wo;
    let oh = r / Wo;
    let ow = r - oh * Wo;
    let at = ld_idx(o);
    let g = ld_grad(o);
    let h0 = oh * kh;
    let w0 = ow * kw;
    let base = plane * params.g.h * W;
    for (var ki = 0u; ki < kh; ki = ki + 1u) {
        let row = (h0 + ki) * W;
        for (var kj = 0u; kj < kw; kj = kj + 1u) {
            let me = row + w0 + kj;
            st_dst(base + me, select(0.0, g, i32(me) == at));
        }
    }
}
