// reduce.wgsl with subgroup operations, where the adapter has them: each subgroup folds its
// invocations' partials into its first invocation by shuffles, and the first subgroup folds
// those the same way: one workgroup barrier instead of the shared-memory tree's eight. Same
// INIT/MERGE/STORE and the same chunks as reduce.wgsl.
// params: ReduceParams
// bindings: 1 src, 2 dst
{{DECLS}}

{{PAIR}}

{{CHUNK}}

// The fold of `p` over the subgroup, in its first invocation (subgroup sizes are powers of two;
// what the others end with is not used).
fn fold(p: Pair, size: u32) -> Pair {
    var q = p;
    for (var off = size >> 1u; off > 0u; off = off >> 1u) {
        let v = subgroupShuffleDown(q.v, off);
        let i = subgroupShuffleDown(q.i, off);
        q = merge(q.v, q.i, v, i);
    }
    return q;
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) size: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) groups: u32,
) {
    let row = group_id(wid).x;
    let t = lid.x;
    let p = fold(chunk_partial(row, t), size);
    if (lane == 0u) {
        part[sg] = p;
    }
    workgroupBarrier();
    if (sg == 0u) {
        var q = Pair({{INIT}}, NONE);
        for (var j = lane; j < groups; j = j + size) {
            let r = part[j];
            q = merge(q.v, q.i, r.v, r.i);
        }
        q = fold(q, size);
        if (lane == 0u && row < params.total) {
            let p = q;
            st_dst(row, {{STORE}});
        }
    }
}
