// Batched C[b] = A[b] @ B[b], 4x4 outputs per invocation accumulated in registers straight from
// storage (no workgroup memory or barriers). Chosen on adapters that are CPUs (lavapipe,
// SwiftShader), where barriers are costly and caches make tiling unnecessary. Operands and
// epilogue as in matmul.wgsl. Each launch sums k in [k0, k1) (the launcher splits K where the
// adapter caps an invocation's loop iterations): the first adds the epilogue, the others add
// to the stored result, and the last applies finish(c index, v) (as matmul.wgsl).
// params: MatmulParams or ConvGemmParams (the operands'), both with m, n, k_start, k_end
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

@compute @workgroup_size(8, 8)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params.m;
    let N = params.n;
    let k0 = params.k_start;
    let k1 = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let r0 = (g.y * 8u + lid.y) * 4u;
    let c0 = (g.x * 8u + lid.x) * 4u;
    if (r0 >= M || c0 >= N) {
        return;
    }
    // Rows and columns past the edge read row/column 0 and are never stored. Written out by
    // hand (no private arrays indexed in loops: a CPU adapter may keep those in memory).
    let ra0 = row_pos(bi, r0);
    let ra1 = row_pos(bi, select(0u, r0 + 1u, r0 + 1u < M));
    let ra2 = row_pos(bi, select(0u, r0 + 2u, r0 + 2u < M));
    let ra3 = row_pos(bi, select(0u, r0 + 3u, r0 + 3u < M));
    let cb0 = col_pos(bi, c0);
    let cb1 = col_pos(bi, select(0u, c0 + 1u, c0 + 1u < N));
    let cb2 = col_pos(bi, select(0u, c0 + 2u, c0 + 2u < N));
    let cb3 = col_pos(bi, select(0u, c0 + 3u, c0 + 3u < N));
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
    var kp = k_pos(bi, k0);
    for (var k = k0; k < k1; k = k + 1u) {
        let bv = vec4<f32>(load_b(kp, cb0), load_b(kp, cb1), load_b(kp, cb2), load_b(kp, cb3));
        acc0 = acc0 + load_a(ra0, kp) * bv;
        acc1 = acc1 + load_a(ra1, kp) * bv;
        acc2 = acc2 + load_a(ra2, kp) * bv;
        acc3 = acc3 + load_a(ra3, kp) * bv;
        kp = k_next(kp);
    }
    let acc = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                if (c0 + j < N) {
                    let ci = c_index(bi, r, c0 + j);
                    var v = acc[i][j];
                    if (k0 == 0u) {
                        v = epilogue(r, c0 + j, v);
                    } else {
                        v = ld_c(ci) + v;
                    }
                    if (k1 == params.k) {
                        v = finish(ci, v);
                    }
                    st_c(ci, v);
                }
            }
        }
    }
}
