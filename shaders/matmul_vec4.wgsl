// Batched f32 C[b] = A[b] @ B[b] for CPU adapters when both operands can be read as aligned vec4:
// A by rows (four k of a row) or, transposed, by columns (four rows of a column); B by rows (four
// columns of a row) or, transposed, by columns (four k of a column). Each invocation owns a 4x4
// block of C and steps K by 4, multiplying 4x4 blocks as mat4x4: a quarter of the loads of the
// scalar kernel, where each load is a gather. {{A_LOAD}} / {{B_LOAD}} pick the layouts.
// Each launch sums k in [kstart, K) (the launcher splits K where the adapter caps an
// invocation's loop iterations); launches after the first add to the stored result.
// params: MatmulParams (offsets and strides in floats)

@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(8, 8)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let M = params.m;
    let N = params.n;
    let kstart = params.k_start;
    let K = params.k_end;
    let g = group_id(wid);
    let bi = g.z;
    let r0 = (g.y * 8u + lid.y) * 4u;
    let c0 = (g.x * 8u + lid.x) * 4u;
    if (r0 >= M || c0 >= N) {
        return;
    }
    let abase = params.off_a + bi * params.sab;
    let bbase = params.off_b + bi * params.sbb;
    let sam = params.sam;
    let sak = params.sak;
    let sbk = params.sbk;
    let sbn = params.sbn;
    // Rows and columns past the edge read the last one and are never stored.
    let ra = vec4<u32>(r0, min(r0 + 1u, M - 1u), min(r0 + 2u, M - 1u), min(r0 + 3u, M - 1u));
    let cb = vec4<u32>(c0, min(c0 + 1u, N - 1u), min(c0 + 2u, N - 1u), min(c0 + 3u, N - 1u));
    // acc[j] = column c0 + j of the block (rows r0..r0+3).
    var acc = mat4x4<f32>();
    for (var k = kstart; k < K; k = k + 4u) {
        // am[t] = A[r0..r0+4, k+t]; bm[j] = B[k..k+4, c0+j].
{{A_LOAD}}
{{B_LOAD}}
        acc = acc + am * bm;
    }
    let cbase = bi * M * N;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = r0 + i;
        if (r < M) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                if (c0 + j < N) {
                    let ci = cbase + r * N + c0 + j;
                    if (kstart == 0u) {
                        c[ci] = acc[j][i];
                    } else {
                        c[ci] = c[ci] + acc[j][i];
                    }
                }
            }
        }
    }
}
