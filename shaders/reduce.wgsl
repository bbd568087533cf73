// One workgroup per (row, chunk) of a contiguous [rows, n] input: each invocation folds a strided
// slice of the chunk, then a shared-memory tree merges the 256 partials. Long rows are split into
// `k` chunks whose partials a second pass combines. Arg ops carry the index and keep the first
// extreme, as PyTorch does.
// params: ReduceParams
// bindings: 1 src, 2 dst
{{DECLS}}

{{PAIR}}

{{CHUNK}}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = group_id(wid).x;
    let t = lid.x;
    part[t] = chunk_partial(row, t);
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) {
            let a = part[t];
            let b = part[t + s];
            part[t] = merge(a.v, a.i, b.v, b.i);
        }
        workgroupBarrier();
    }
    if (t == 0u && row < params.total) {
        let p = part[0];
        st_dst(row, {{STORE}});
    }
}
