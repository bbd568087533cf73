// One workgroup per row of a contiguous [rows, n] input: each invocation folds a strided slice
// of the row, then a shared-memory tree merges the 256 partials. Arg ops carry the index and keep
// the first extreme, as PyTorch does.
// meta: [rows, n, groups_x]
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{OUT}}>;

struct Pair {
    v: {{T}},
    i: u32,
}

const NONE: u32 = 0xffffffffu;

var<workgroup> part: array<Pair, 256>;

fn merge(a: {{T}}, ia: u32, b: {{T}}, ib: u32) -> Pair {
    {{MERGE}}
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x + wid.y * params[2];
    let n = params[1];
    let t = lid.x;
    var acc = Pair({{INIT}}, NONE);
    if (row < params[0]) {
        for (var j = t; j < n; j = j + 256u) {
            acc = merge(acc.v, acc.i, src[row * n + j], j);
        }
    }
    part[t] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) {
            let a = part[t];
            let b = part[t + s];
            part[t] = merge(a.v, a.i, b.v, b.i);
        }
        workgroupBarrier();
    }
    if (t == 0u && row < params[0]) {
        let p = part[0];
        dst[row] = {{STORE}};
    }
}
