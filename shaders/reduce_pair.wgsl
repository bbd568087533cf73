// What every reduction folds (reduce.wgsl, reduce_small.wgsl, reduce_subgroup.wgsl): a value and
// the index it came from (arg ops; NONE before any), and the op's rule for merging two (MERGE:
// arg ops keep the first extreme, as PyTorch does, so any merge order gives the same pair).
struct Pair {
    v: {{C}},
    i: u32,
}

const NONE: u32 = 0xffffffffu;

fn merge(a: {{C}}, ia: u32, b: {{C}}, ib: u32) -> Pair {
    {{MERGE}}
}
