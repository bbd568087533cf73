// Batched C[b] = A[b] @ B[b] with arbitrary strides, 4x4 outputs per invocation accumulated in
// registers straight from storage (no workgroup memory or barriers). Chosen on adapters that are
// CPUs (lavapipe, SwiftShader), where barriers are costly and caches make tiling unnecessary.
// params: [M, N, K, off_a, sab, sam, sak, off_b, sbb, sbk, sbn, batch_base]
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32)
{{DECLS}}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params[0];
    let N = params[1];
    let K = params[2];
    let bi = wid.z + params[11];
    let r0 = gid.y * 4u;
    let c0 = gid.x * 4u;
    if (r0 >= M || c0 >= N) {
        return;
    }
    let sam = params[5];
    let sak = params[6];
    let sbk = params[9];
    let sbn = params[10];
    let abase = params[3] + bi * params[4];
    let bbase = params[7] + bi * params[8];
    // Rows and columns past the edge read row/column 0 and are never stored.
    var ra: array<u32, 4>;
    var cb: array<u32, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        ra[i] = abase + select(0u, (r0 + i) * sam, r0 + i < M);
        cb[i] = bbase + select(0u, (c0 + i) * sbn, c0 + i < N);
    }
    var acc: array<vec4<f32>, 4>;
    for (var k = 0u; k < K; k = k + 1u) {
        let bv = vec4<f32>(ld_b(cb[0] + k * sbk), ld_b(cb[1] + k * sbk), ld_b(cb[2] + k * sbk), ld_b(cb[3] + k * sbk));
        for (var i = 0u; i < 4u; i = i + 1u) {
            acc[i] = acc[i] + ld_a(ra[i] + k * sak) * bv;
        }
    }
    let cbase = bi * M * N;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                if (c0 + j < N) {
                    st_c(cbase + r * N + c0 + j, acc[i][j]);
                }
            }
        }
    }
}
