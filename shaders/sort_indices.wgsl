// Bitonic row sort, stage 3 of 3: the first n indices of each sorted padded row, as int32.
// params: [rows * n, n, P]
// bindings: 1 idx, 2 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = linear_id(wid, lid);
    if (t >= params[0]) {
        return;
    }
    let n = params[1];
    st_dst(t, i32(ld_idx((t / n) * params[2] + t % n)));
}
