// nll_loss's term of each row of contiguous f32 log-probabilities [rows, n]: loss = -logp[t] * w
// and the row's weight w (the class weight w[t] when weighted, else 1), both 0 for a row whose
// target is the ignore index (PyTorch skips such rows, whatever their scores), and the target
// the gradient reads (-1 for a row skipped; a copy, so that the caller may change its targets in
// place after the forward pass, as the composite allows). A target outside
// [0, n) is recorded in the index-check flag, reported at the next readback as the op's (dim 1,
// as the composite's gather reports it). The arithmetic is the composite's in `ops/loss.rs`,
// operation for operation.
// params: NllRowsParams
// bindings: 1 logp, 2 tgt (targets, i32), 3 weight (f32 [n], read only when weighted), 4 loss, 5 wt,
// 6 kept (i32), 7 the index-check flag
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = linear_id(wid, lid);
    if (row >= params.rows) {
        return;
    }
    let t = ld_tgt(row);
    let ignored = params.ignores != 0u && t == params.ignore_index;
    if (ignored || !index_ok(t, params.n, 1u)) {
        st_loss(row, 0.0);
        st_wt(row, 0.0);
        st_kept(row, -1);
        return;
    }
    var w = 1.0;
    if (params.weighted != 0u) {
        w = ld_weight(u32(t));
    }
    st_loss(row, -ld_logp(row * params.n + u32(t)) * w);
    st_wt(row, w);
    st_kept(row, t);
}
