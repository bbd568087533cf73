// GEMM operands of a plain batched matmul: A[b] and B[b] with arbitrary strides (transposed and
// broadcast operands need no copy). The GEMM bodies address operands through positions: a row
// position, a column position (both fixed per invocation) and a k position (stepped with
// k_next in the inner loop, so no division is done per step). Results go to c_index(b, r, c)
// through epilogue(r, c, v).
// params: MatmulParams
alias RowPos = u32;
alias ColPos = u32;
alias KPos = u32;
fn row_pos(bi: u32, r: u32) -> RowPos {
    return params.off_a + bi * params.sab + r * params.sam;
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return params.off_b + bi * params.sbb + c * params.sbn;
}
fn k_pos(bi: u32, k: u32) -> KPos {
    return k;
}
fn k_next(k: KPos) -> KPos {
    return k + 1u;
}
fn load_a(r: RowPos, k: KPos) -> f32 {
    return ld_a(r + k * params.sak);
}
fn load_b(k: KPos, c: ColPos) -> f32 {
    return ld_b(c + k * params.sbk);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params.m + r) * params.n + c;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v;
}
fn finish(i: u32, v: f32) -> f32 {
    return v;
}
