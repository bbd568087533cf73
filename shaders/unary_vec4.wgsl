// out[i] = EXPR(x) for a contiguous f32 input, four elements per invocation as vec4 (no index
// arithmetic; one 16-byte load and store). The output buffer is padded to 16 bytes by the pool,
// so the last vec4 may run past n. params: UnaryVec4Params
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

fn f(x: f32, p0: f32, p1: f32) -> f32 {
    return {{EXPR}};
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n4) {
        return;
    }
    let p0 = params.p0;
    let p1 = params.p1;
    let v = src[params.offset4 + i];
    dst[i] = vec4<f32>(f(v.x, p0, p1), f(v.y, p0, p1), f(v.z, p0, p1), f(v.w, p0, p1));
}
