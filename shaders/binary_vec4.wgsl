// out[i] = EXPR(a, b) for two contiguous f32 inputs, four elements per invocation as vec4 (no
// index arithmetic). The output buffer is padded to 16 bytes by the pool, so the last vec4 may
// run past n. params: BinaryVec4Params
@group(0) @binding(1) var<storage, read> lhs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> rhs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec4<{{OUT}}>>;

fn f(a: f32, b: f32) -> {{OUT}} {
    return {{EXPR}};
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n4) {
        return;
    }
    let a = lhs[params.off_a4 + i];
    let b = rhs[params.off_b4 + i];
    dst[i] = vec4<{{OUT}}>(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
}
