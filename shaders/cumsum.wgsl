// Inclusive prefix sum along each row of a contiguous [rows, n] input, one invocation per row.
// meta: [rows, n]
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = linear_id(gid, nwg);
    if (r >= params[0]) {
        return;
    }
    let n = params[1];
    var acc: {{T}} = {{T}}(0);
    for (var j = 0u; j < n; j = j + 1u) {
        acc = acc + src[r * n + j];
        dst[r * n + j] = acc;
    }
}
