// out[i] = cond[i] ? a[i] : b[i], all strided.
// meta: [n, ndim, off_c, off_a, off_b, shape, strides_c, strides_a, strides_b]
@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let c = cond[params[2] + offset_of(i, nd, 5u, 5u + nd)];
    if (c != 0u) {
        dst[i] = lhs[params[3] + offset_of(i, nd, 5u, 5u + 2u * nd)];
    } else {
        dst[i] = rhs[params[4] + offset_of(i, nd, 5u, 5u + 3u * nd)];
    }
}
