// dst[i] = value. meta: [n, value bits]
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= params[0]) {
        return;
    }
    dst[i] = bitcast<{{T}}>(params[1]);
}
