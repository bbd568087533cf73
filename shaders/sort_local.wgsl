// Bitonic row sort, the steps with j <= 256 in workgroup memory: each workgroup holds one aligned
// block of 512 entries (256 pairs; rows shorter than 512 lie whole inside it) and runs, for
// every k in [k0, k1], the steps j = min(k / 2, 256) ... 1 (j0 for the first k), with a barrier
// between steps: the same network as sort_step.wgsl, a few dispatches instead of one per step.
// params: SortLocalParams
// bindings: 1 keys, 2 idx
{{DECLS}}

var<workgroup> sk: array<u32, 512>;
var<workgroup> si: array<u32, 512>;

fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    let n = params.n;
    if (ia >= n || ib >= n) {
        return ia < ib;
    }
    if (ka != kb) {
        return select((ka < kb), (ka > kb), params.descending == 1u);
    }
    return ia < ib;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let total = params.pairs * 2u;
    let base = group_id(wid).x * 512u;
    let l = lid.x;
    for (var e = l; e < 512u; e = e + 256u) {
        if (base + e < total) {
            sk[e] = ld_keys(base + e);
            si[e] = ld_idx(base + e);
        }
    }
    workgroupBarrier();
    let p = params.p;
    var k = params.k0;
    var j = params.j0;
    loop {
        if (k > params.k1) {
            break;
        }
        loop {
            if (j == 0u) {
                break;
            }
            let i = (l / j) * 2u * j + l % j;
            if (base + i + j < total) {
                let up = ((base + i) & (p - 1u) & k) == 0u;
                let ka = sk[i];
                let ia = si[i];
                let kb = sk[i + j];
                let ib = si[i + j];
                if (select(before(ka, ia, kb, ib), before(kb, ib, ka, ia), up)) {
                    sk[i] = kb;
                    si[i] = ib;
                    sk[i + j] = ka;
                    si[i + j] = ia;
                }
            }
            workgroupBarrier();
            j = j / 2u;
        }
        k = k * 2u;
        j = min(k / 2u, 256u);
    }
    for (var e = l; e < 512u; e = e + 256u) {
        if (base + e < total) {
            st_keys(base + e, sk[e]);
            st_idx(base + e, si[e]);
        }
    }
}
