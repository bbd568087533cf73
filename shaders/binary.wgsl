// out[i] = EXPR(a, b) for two strided (broadcast) inputs of type T.
// meta: [n, ndim, off_a, off_b, shape[ndim], strides_a[ndim], strides_b[ndim]]
@group(0) @binding(1) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> dst: array<{{OUT}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let a = lhs[params[2] + offset_of(i, nd, 4u, 4u + nd)];
    let b = rhs[params[3] + offset_of(i, nd, 4u, 4u + 2u * nd)];
    dst[i] = {{EXPR}};
}
