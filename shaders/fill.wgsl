// dst[i] = value. params: [n, value bits (in the compute type)]
// bindings: 1 dst
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= params[0]) {
        return;
    }
    st_dst(i, bitcast<{{C}}>(params[1]));
}
