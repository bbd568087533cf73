// Batched C[b] = A[b] @ B[b] through workgroup memory (real GPUs), in a shared-memory tile
// (kernels/shared_tile.rs fills the {{..}} below): a workgroup of WX x WY invocations computes a
// TM x TN block of the output, each invocation an RM x RN block of it held in registers; K steps
// TK at a time through workgroup memory. The tile fill (TILE_FILL) loads the TM x TK block of A
// (ta[k][row]) and the TK x TN block of B (tb[k][col]) for step k0, with zeros outside the
// matrices: through the operand functions (a strided matmul or a convolution's implicit GEMM,
// shaders/gemm_*.wgsl), or as vec4 for aligned f32 layouts. Each output sums k in ascending order
// in every tile. Results go to c_index(b, row, col) through epilogue(row, col, v). Each launch
// sums k in [kstart, K) (the launcher splits K where the adapter caps an invocation's loop
// iterations): the first adds the epilogue, the others add to the stored result, and the last
// applies finish(c index, v) (a fused convolution's residual and relu).
// params: MatmulParams or ConvGemmParams (the operands'), both with m, n, k_start, k_end
// bindings: 1 a, 2 b, 3 c (any float storage; accumulation in f32), then the operands' own
{{DECLS}}
{{OPERANDS}}

const TM: u32 = {{TM}}u;
const TN: u32 = {{TN}}u;
const TK: u32 = {{TK}}u;
const NT: u32 = {{NT}}u;
// The staged blocks: f32, or f16 in a half tile (native f16 GEMMs: exact).
alias ST = {{ST}};
var<workgroup> ta: array<array<ST, {{TM}}>, {{TK}}>;
var<workgroup> tb: array<array<ST, {{TN}}>, {{TK}}>;

@compute @workgroup_size({{WX}}, {{WY}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params.m;
    let N = params.n;
    let kstart = params.k_start;
    let K = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let row0 = g.y * TM;
    let col0 = g.x * TN;
    let tid = lid.y * {{WX}}u + lid.x;
    // Zeros (a var without an initializer).
    var acc: array<array<f32, {{RN}}>, {{RM}}>;
    for (var k0 = kstart; k0 < K; k0 = k0 + TK) {
{{TILE_FILL}}
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk = kk + 1u) {
            var ar: array<f32, {{RM}}>;
            var br: array<f32, {{RN}}>;
            for (var i = 0u; i < {{RM}}u; i = i + 1u) {
                ar[i] = f32(ta[kk][lid.y * {{RM}}u + i]);
            }
            for (var j = 0u; j < {{RN}}u; j = j + 1u) {
                br[j] = f32(tb[kk][lid.x * {{RN}}u + j]);
            }
            for (var i = 0u; i < {{RM}}u; i = i + 1u) {
                for (var j = 0u; j < {{RN}}u; j = j + 1u) {
                    acc[i][j] = acc[i][j] + ar[i] * br[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < {{RM}}u; i = i + 1u) {
        let r = row0 + lid.y * {{RM}}u + i;
        for (var j = 0u; j < {{RN}}u; j = j + 1u) {
            let cc = col0 + lid.x * {{RN}}u + j;
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
