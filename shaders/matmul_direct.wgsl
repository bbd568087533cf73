// Batched C[b] = A[b] @ B[b], 4x4 outputs per invocation accumulated in registers straight from
// storage (no workgroup memory or barriers). Chosen on adapters that are CPUs (lavapipe,
// SwiftShader), where barriers are costly and caches make tiling unnecessary. Operands and
// epilogue as in matmul.wgsl.
// params: [M, N, K, batch_base, operand parameters...]
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

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
    // Rows and columns past the edge read row/column 0 and are never stored.
    var ra: array<RowPos, 4>;
    var cb: array<ColPos, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        ra[i] = row_pos(bi, select(0u, r0 + i, r0 + i < M));
        cb[i] = col_pos(bi, select(0u, c0 + i, c0 + i < N));
    }
    var acc: array<vec4<f32>, 4>;
    var kp = k_pos(bi, 0u);
    for (var k = 0u; k < K; k = k + 1u) {
        let bv = vec4<f32>(load_b(kp, cb[0]), load_b(kp, cb[1]), load_b(kp, cb[2]), load_b(kp, cb[3]));
        for (var i = 0u; i < 4u; i = i + 1u) {
            acc[i] = acc[i] + load_a(ra[i], kp) * bv;
        }
        kp = k_next(kp);
    }
    let cbase = bi * M * N;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                if (c0 + j < N) {
                    st_c(cbase + r * N + c0 + j, epilogue(r, acc[i][j]));
                }
            }
        }
    }
}
