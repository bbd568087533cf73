// The gradient of nll_rows.wgsl's loss with respect to the log-probabilities [rows, n], from the
// loss's gradient g [rows] and the rows' weights wt: -(g * wt), added to 0, at each kept row's
// target (`kept`, which the forward kernel wrote: -1 for a row skipped) and 0 everywhere else,
// which is what the composite's ops give (the product's and the negation's gradients, masked,
// then scattered into zeros).
// params: NllRowsParams
// bindings: 1 kept (i32), 2 wt, 3 g, 4 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.numel) {
        return;
    }
    let row = i / params.n;
    let t = ld_kept(row);
    var v = 0.0;
    if (t >= 0 && u32(t) == i - row * params.n) {
        v = 0.0 + -(ld_g(row) * ld_wt(row));
    }
    st_dst(i, v);
}
