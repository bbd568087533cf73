// Batched C[b] = A[b] @ B[b]: 64x64 output tiles per 256-invocation workgroup, 4x4 outputs per
// invocation held in registers, K stepped 16 at a time through workgroup memory. The operands
// come from load_a(b, row, k) / load_b(b, k, col) (a strided matmul or a convolution's implicit
// GEMM, shaders/gemm_*.wgsl); results go to c_index(b, row, col) through epilogue(row, col, v).
// params: [M, N, K, batch_base, operand parameters...]
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

const TS: u32 = 64u;
const TK: u32 = 16u;
var<workgroup> ta: array<array<f32, 64>, 16>;
var<workgroup> tb: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params[0];
    let N = params[1];
    let K = params[2];
    let bi = wid.z + params[3];
    let row0 = wid.y * TS;
    let col0 = wid.x * TS;
    let tid = lid.y * 16u + lid.x;
    var acc: array<array<f32, 4>, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            acc[i][j] = 0.0;
        }
    }
    for (var k0 = 0u; k0 < K; k0 = k0 + TK) {
        // 256 invocations load a 64x16 tile of A and a 16x64 tile of B, 4 elements each.
        for (var e = 0u; e < 4u; e = e + 1u) {
            let idx = tid + e * 256u;
            let r = idx / TK;
            let kk = idx % TK;
            var va = 0.0;
            if (row0 + r < M && k0 + kk < K) {
                va = load_a(row_pos(bi, row0 + r), k_pos(bi, k0 + kk));
            }
            ta[kk][r] = va;
            let kb = idx / TS;
            let cc = idx % TS;
            var vb = 0.0;
            if (k0 + kb < K && col0 + cc < N) {
                vb = load_b(k_pos(bi, k0 + kb), col_pos(bi, col0 + cc));
            }
            tb[kb][cc] = vb;
        }
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
                st_c(c_index(bi, r, cc), epilogue(r, cc, acc[i][j]));
            }
        }
    }
}
