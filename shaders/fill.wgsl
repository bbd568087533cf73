// dst[i] = value. params: FillParams
// bindings: 1 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    st_dst(i, bitcast<{{C}}>(params.bits));
}
