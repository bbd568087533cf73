// Batched C[b] = A[b] @ B[b], a block of outputs per invocation (its Tile) accumulated in registers straight from
// storage (no workgroup memory or barriers). Chosen on adapters that are CPUs (lavapipe,
// SwiftShader), where barriers are costly and caches make tiling unnecessary. Operands and
// epilogue as in matmul.wgsl. Each launch sums k in [k0, k1) (the launcher splits K where the
// adapter caps an invocation's loop iterations): the first adds the epilogue, the others add
// to the stored result, and the last applies finish(c index, v) (as matmul.wgsl).
// params: MatmulParams or ConvGemmParams (the operands'), both with m, n, k_start, k_end
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

{{ENTRY}}
    let M = params.m;
    let N = params.n;
    let k0 = params.k_start;
    let k1 = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let r0 = (g.y * {{WY}}u + lid.y) * {{RM}}u;
    let c0 = (g.x * {{WX}}u + lid.x) * {{RN}}u;
{{EXIT}}
    // Generated for the tile (kernels/tile.rs): raI / cbJ, the positions of row r0 + I and
    // column c0 + J (row / column 0 past the edge, never stored; a subgroup tile has ral or cbl
    // instead, the position of its lane's row or column of the shared side), and the
    // accumulators accI_J of row r0 + I, columns c0 + 4J .. c0 + 4J + 3.
{{SETUP}}
    var kp = k_pos(bi, k0);
    for (var k = k0; k < k1; k = k + 1u) {
{{STEP}}
        kp = k_next(kp);
    }
    let acc = array<vec4<f32>, {{NACC}}>({{ACC}});
    for (var i = 0u; i < {{RM}}u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < {{RN}}u; j = j + 1u) {
                if (c0 + j < N) {
                    let ci = c_index(bi, r, c0 + j);
                    var v = acc[i * {{RN4}}u + j / 4u][j % 4u];
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
