// Batched C[b] = A[b] @ B[b]: 64x64 output tiles per 256-invocation workgroup, 4x4 outputs per
// invocation held in registers, K stepped 16 at a time through workgroup memory. The tile fill
// (TILE_FILL) loads the 64x16 tile of A (ta[k][row]) and the 16x64 tile of B (tb[k][col]) for step k0, with
// zeros outside the matrices: four scalar loads per invocation through the operand functions
// (tile_fill.wgsl: a strided matmul or a convolution's implicit GEMM, shaders/gemm_*.wgsl), or one
// vec4 of each operand for aligned f32 layouts. Results go to c_index(b, row, col) through
// epilogue(row, col, v). Each launch sums k in [kstart, K) (the launcher splits K where the
// adapter caps an invocation's loop iterations): the first adds the epilogue, the others add to
// the stored result, and the last applies finish(c index, v) (a fused convolution's residual and
// relu).
// params: MatmulParams or ConvGemmParams (the operands'), both with m, n, k_start, k_end
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

const TS: u32 = 64u;
const TK: u32 = 16u;
var<workgroup> ta: array<array<f32, 64>, 16>;
var<workgroup> tb: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params.m;
    let N = params.n;
    let kstart = params.k_start;
    let K = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let row0 = g.y * TS;
    let col0 = g.x * TS;
    let tid = lid.y * 16u + lid.x;
    var acc: array<array<f32, 4>, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            acc[i][j] = 0.0;
        }
    }
    for (var k0 = kstart; k0 < K; k0 = k0 + TK) {
{{TILE_FILL}}
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk = kk + 1u) {
            var ar: array<f32, 4>;
            var br: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                ar[i] = ta[kk][lid.y * 4u + i];
                br[i] = tb[kk][lid.x * 4u + i];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = acc[i][j] + ar[i] * br[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = row0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let cc = col0 + lid.x * 4u + j;
            if (r < M && cc < N) {
                let ci = c_index(bi, r, cc);
                var v = acc[i][j];
                if (kstart == 0u) {
                    v = epilogue(r, cc, v);
                } else {
                    v = ld_c(ci) + v;
                }
                if (K == params.k) {
                    v = finish(ci, v);
                }
                st_c(ci, v);
            }
        }
    }
}
