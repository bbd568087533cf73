// Batched f32 C[b] = A[b] @ B[b] for CPU adapters when A's rows and B's rows are contiguous and
// 16-byte aligned and K is a multiple of 4: both operands are read as vec4 (four k of a row of A,
// four columns of a row of B), 4x4 outputs per invocation in registers, K stepped by 4. Each
// scalar load is a gather on a CPU adapter; this kernel does a quarter of them.
// params: [M, N, K, batch_base, off_a, sab, sam, sak, off_b, sbb, sbk, sbn] (offsets and strides
// in floats, all multiples of 4 except sak = sbn = 1)
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params[0];
    let N = params[1];
    let K = params[2];
    let bi = wid.z + params[3];
    let r0 = gid.y * 4u;
    let c0 = gid.x * 4u;
    if (r0 >= M || c0 >= N) {
        return;
    }
    // Rows past the edge read the last row and are never stored.
    var ra: array<u32, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        ra[i] = (params[4] + bi * params[5] + min(r0 + i, M - 1u) * params[6]) >> 2u;
    }
    let sbk = params[10] >> 2u;
    var cb = (params[8] + bi * params[9] + c0) >> 2u;
    var acc: array<vec4<f32>, 4>;
    for (var k = 0u; k < K; k = k + 4u) {
        let b0 = b[cb];
        let b1 = b[cb + sbk];
        let b2 = b[cb + 2u * sbk];
        let b3 = b[cb + 3u * sbk];
        cb = cb + 4u * sbk;
        for (var i = 0u; i < 4u; i = i + 1u) {
            let av = a[ra[i] + (k >> 2u)];
            acc[i] = acc[i] + av.x * b0 + av.y * b1 + av.z * b2 + av.w * b3;
        }
    }
    let cbase = bi * M * N;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                c[cbase + r * N + c0 + j] = acc[i][j];
            }
        }
    }
}
