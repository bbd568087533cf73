// out[i] = EXPR(x) for a strided float input.
// meta: [n, ndim, p0, p1, offset, shape[ndim], strides[ndim]]
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    let p0 = fmeta(2u);
    let p1 = fmeta(3u);
    let x = src[params[4] + offset_of(i, nd, 5u, 5u + nd)];
    dst[i] = {{EXPR}};
}
