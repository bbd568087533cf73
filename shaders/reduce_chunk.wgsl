// The workgroup-per-(row, chunk) reductions' common part (reduce.wgsl, reduce_subgroup.wgsl):
// the workgroup's partials, and what invocation `t` folds before the workgroup combines them,
// the strided slice t, t + 256, ... of chunk `row % k` of row `row / k` (chunks of `chunk`
// elements of rows of `n`); INIT past the last row.
var<workgroup> part: array<Pair, 256>;

fn chunk_partial(row: u32, t: u32) -> Pair {
    var acc = Pair({{INIT}}, NONE);
    if (row < params.total) {
        let chunk = params.chunk;
        let k = params.k;
        let first = (row % k) * chunk;
        let start = (row / k) * params.n + first;
        let len = min(chunk, params.n - first);
        for (var j = t; j < len; j = j + 256u) {
            acc = merge(acc.v, acc.i, ld_src(start + j), first + j);
        }
    }
    return acc;
}
