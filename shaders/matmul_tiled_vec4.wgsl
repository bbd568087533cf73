// Batched f32 C[b] = A[b] @ B[b] for GPUs when both operands can be read as aligned vec4 (as in
// matmul_vec4.wgsl: A by rows or transposed by columns, B likewise; K % 4 == 0). 64x64 output
// tiles per 256-invocation workgroup, K stepped 16 at a time through workgroup memory: each
// invocation fetches one vec4 of A and one of B per step (vectorised global loads), then computes
// a 4x4 block from registers. {{A_LOAD}} / {{B_LOAD}} pick the layouts.
// params: [M, N, K, batch_base, off_a, sab, sam, sak, off_b, sbb, sbk, sbn] (in floats)

@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

var<workgroup> ta: array<array<f32, 64>, 16>;
var<workgroup> tb: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params[0];
    let N = params[1];
    let K = params[2];
    let bi = wid.z + params[3];
    let abase = params[4] + bi * params[5];
    let bbase = params[8] + bi * params[9];
    let sam = params[6];
    let sak = params[7];
    let sbk = params[10];
    let sbn = params[11];
    let row0 = wid.y * 64u;
    let col0 = wid.x * 64u;
    let tid = lid.y * 16u + lid.x;
    var acc: array<array<f32, 4>, 4>;
    for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
        // One vec4 of each operand per invocation; outside the matrix it reads zeros.
{{A_LOAD}}
{{B_LOAD}}
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk = kk + 1u) {
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
    let cbase = bi * M * N;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = row0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let cc = col0 + lid.x * 4u + j;
            if (r < M && cc < N) {
                c[cbase + r * N + cc] = acc[i][j];
            }
        }
    }
}
