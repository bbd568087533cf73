// torch.scatter_add along `dim`, deterministic and without float atomics: one invocation per
// element of the (contiguous) base sums the sources whose index points at it. The invocations at
// position 0 along `dim` check the indices they read (an out-of-range one is recorded in the
// index-check flag and reported at the next readback; its source is dropped).
// params: ScatterAddParams (len_dim: the index's length along `dim` in this launch);
// tail: [bshape[nd], ishape[nd], istrides[nd], sstrides[nd]]
// bindings: 1 base, 2 idx (i32), 3 src, 4 dst, 5 the index-check flag
{{DECLS}}
{{INDEX_CHECK}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_id(wid, lid);
    if (i >= params.n) {
        return;
    }
    let nd = params.ndim;
    let dim = params.dim;
    let bs = 0u;
    let is = nd;
    let ist = 2u * nd;
    let sst = 3u * nd;
    // Coordinates of i in the base, and whether the index tensor covers them off `dim`.
    var rem = i;
    var ioff = params.off_idx;
    var soff = params.off_src;
    var dst_pos = 0u;
    var covered = true;
    for (var d = i32(nd) - 1; d >= 0; d = d - 1) {
        let ud = u32(d);
        let q = rem / params.tail[bs + ud];
        let c = rem - q * params.tail[bs + ud];
        rem = q;
        if (ud == dim) {
            dst_pos = c;
        } else {
            if (c >= params.tail[is + ud]) {
                covered = false;
            }
            ioff = ioff + c * params.tail[ist + ud];
            soff = soff + c * params.tail[sst + ud];
        }
    }
    var acc = ld_base(i);
    if (covered) {
        let kn = params.len_dim;
        for (var k = 0u; k < kn; k = k + 1u) {
            let j = ld_idx(ioff + k * params.tail[ist + dim]);
            if (j == i32(dst_pos)) {
                acc = acc + ld_src(soff + k * params.tail[sst + dim]);
            } else if (dst_pos == 0u) {
                _ = index_ok(j, params.tail[bs + dim], dim);
            }
        }
    }
    st_dst(i, acc);
}
