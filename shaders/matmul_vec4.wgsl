// Batched f32 C[b] = A[b] @ B[b] for CPU adapters when both operands can be read as aligned vec4:
// A by rows (four k of a row) or, transposed, by columns (four rows of a column); B by rows (four
// columns of a row) or, transposed, by columns (four k of a column). Each invocation owns a block of
// C (its Tile, in 4x4 blocks) and steps K by 4, multiplying 4x4 blocks as mat4x4: a quarter of
// the loads of the scalar kernel, where each load is a gather.
// Each launch sums k in [kstart, K) (the launcher splits K where the adapter caps an
// invocation's loop iterations); launches after the first add to the stored result.
// params: MatmulParams (offsets and strides in floats)

@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

{{ENTRY}}
    let M = params.m;
    let N = params.n;
    let kstart = params.k_start;
    let K = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let r0 = (g.y * {{WY}}u + lid.y) * {{RM}}u;
    let c0 = (g.x * {{WX}}u + lid.x) * {{RN}}u;
{{EXIT}}
    let abase = params.off_a + bi * params.sab;
    let bbase = params.off_b + bi * params.sbb;
    let sam = params.sam;
    let sak = params.sak;
    let sbk = params.sbk;
    let sbn = params.sbn;
    // Generated for the tile (kernels/tile.rs): the rows and columns each 4x4 block reads, and
    // accI_J, the block of rows r0 + 4I .. + 3 and columns c0 + 4J .. + 3, whose column j is
    // accI_J[j]. Each step reads amI (amI[t] = A[rows of block I, k + t]) and bmJ
    // (bmJ[j] = B[k .. k + 3, column j of block J]).
{{SETUP}}
    for (var k = kstart; k < K; k = k + 4u) {
{{STEP}}
    }
    let acc = array<mat4x4<f32>, {{NACC}}>({{ACC}});
    let cbase = bi * M * N;
    for (var i = 0u; i < {{RM}}u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < {{RN}}u; j = j + 1u) {
                if (c0 + j < N) {
                    let ci = cbase + r * N + c0 + j;
                    let v = acc[i / 4u * {{RN4}}u + j / 4u][j % 4u][i % 4u];
                    if (kstart == 0u) {
                        c[ci] = v;
                    } else {
                        c[ci] = c[ci] + v;
                    }
                }
            }
        }
    }
}
