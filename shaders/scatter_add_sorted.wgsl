// torch.scatter_add along `dim` where every line off `dim` reads the same 1-D index (an index
// broadcast off `dim`: the gradients of embedding, index_select and index_add): one invocation
// per element of the (contiguous) base finds, by binary search, the run of its position in the
// index's stable sort (`perm`: the index's positions ordered by value, ties in position order)
// and sums the sources of that run in position order: the sum scatter_add.wgsl forms, visiting
// log2(len) + the run's length entries instead of every entry along `dim`. A launch covers the
// sorted entries `t0..t1` (a chunk within llvmpipe's loop cap); its invocation 0 checks the
// chunk's smallest and largest index, so any out-of-range one is caught (recorded in the
// index-check flag, reported at the next readback: the smallest if negative, else the largest;
// its sources match no position and are dropped).
// params: ScatterAddSortedParams; tail: [bshape[nd], ishape[nd], sstrides[nd]]
// bindings: 1 base, 2 idx (i32), 3 perm (i32), 4 src, 5 dst, 6 the index-check flag
{{DECLS}}
{{INDEX_CHECK}}

// The index at position k along `dim`.
fn key(k: u32) -> i32 {
    return ld_idx(params.off_idx + k * params.idx_stride);
}

// The index's position of sorted entry t.
fn entry(t: u32) -> u32 {
    return u32(ld_perm(t));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let dim = params.dim;
    let t0 = params.t0;
    let t1 = params.t1;
    if (i == 0u && t1 > t0) {
        _ = index_ok(key(entry(t0)), params.tail[dim], dim);
        _ = index_ok(key(entry(t1 - 1u)), params.tail[dim], dim);
    }
    // Coordinates of i in the base, and whether the index covers them off `dim`.
    var rem = i;
    var soff = params.off_src;
    var pos = 0;
    var covered = true;
    for (var d = i32(nd) - 1; d >= 0; d = d - 1) {
        let ud = u32(d);
        let q = rem / params.tail[ud];
        let c = rem - q * params.tail[ud];
        rem = q;
        if (ud == dim) {
            pos = i32(c);
        } else {
            if (c >= params.tail[nd + ud]) {
                covered = false;
            }
            soff = soff + c * params.tail[2u * nd + ud];
        }
    }
    var acc = ld_base(i);
    if (covered) {
        // The first sorted entry of the chunk whose index is not below `pos`.
        var lo = t0;
        var hi = t1;
        loop {
            if (lo >= hi) {
                break;
            }
            let mid = lo + (hi - lo) / 2u;
            if (key(entry(mid)) < pos) {
                lo = mid + 1u;
            } else {
                hi = mid;
            }
        }
        let sst = params.tail[2u * nd + dim];
        for (var t = lo; t < t1; t = t + 1u) {
            let k = entry(t);
            if (key(k) != pos) {
                break;
            }
            acc = acc + ld_src(soff + k * sst);
        }
    }
    st_dst(i, acc);
}
