// Bitonic row sort, stage 2 of 3: one compare-exchange step (k, j) of the network over each row's
// P entries, one invocation per pair. Entries with index >= n are padding, ordered after every
// real entry; equal keys order by index, so the sort is stable.
// params: SortStepParams
// bindings: 1 keys, 2 idx
{{DECLS}}

// Whether entry (ka, ia) comes before (kb, ib) in the sorted row.
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
    let t = linear_id(wid, lid);
    if (t >= params.pairs) {
        return;
    }
    let p = params.p;
    let j = params.j;
    let k = params.k;
    let half = p / 2u;
    let row = t / half;
    let h = t % half;
    let i = (h / j) * 2u * j + h % j;
    let a = row * p + i;
    let b = a + j;
    let ka = ld_keys(a);
    let ia = ld_idx(a);
    let kb = ld_keys(b);
    let ib = ld_idx(b);
    // Ascending blocks put the earlier entry first, descending blocks last.
    let up = (i & k) == 0u;
    if (select(before(ka, ia, kb, ib), before(kb, ib, ka, ia), up)) {
        st_keys(a, kb);
        st_idx(a, ib);
        st_keys(b, ka);
        st_idx(b, ia);
    }
}
