// Bitonic row sort, stage 3 of 3: the first n indices of each sorted padded row, as int32.
// params: SortIndicesParams
// bindings: 1 idx, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = linear_id(wid, lid);
    if (t >= params.total) {
        return;
    }
    let n = params.n;
    st_dst(t, i32(ld_idx((t / n) * params.p + t % n)));
}
