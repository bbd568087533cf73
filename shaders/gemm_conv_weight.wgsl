// GEMM operands of conv2d's weight gradient as an implicit GEMM, transposed so that the window
// arithmetic is shared by the invocations of a row, and split over the batch: split b covers
// samples [b*nb, (b+1)*nb) and computes
// dW_b^T [C*kh*kw, O] = cols(X) [C*kh*kw, nb*Ho*Wo] . dY^T [nb*Ho*Wo, O], stored as dW_b [O, C*kh*kw];
// the splits are summed afterwards. a = input, b = output gradient. Positions as in
// gemm_strided.wgsl.
// params: ConvGemmParams
// Row = (ci, ki, kj): the input plane's offset and the tap's dilated offsets.
struct RowPos {
    plane: u32,
    dh: u32,
    dw: u32,
}
// Output channel: its plane's offset in a dY sample.
alias ColPos = u32;
// k = (n, oh, ow): the sample and the output pixel.
struct KPos {
    n: u32,
    p: u32,
    oh: u32,
    ow: u32,
}
fn row_pos(bi: u32, r: u32) -> RowPos {
    let kw = params.g.kw;
    let kk = params.g.kh * kw;
    return RowPos((r / kk) * params.g.h * params.g.w, ((r % kk) / kw) * params.g.dh, (r % kw) * params.g.dw);
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params.g.ho * params.g.wo;
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let Wo = params.g.wo;
    let L = params.g.ho * Wo;
    let p = k % L;
    return KPos(bi * params.nb + k / L, p, p / Wo, p % Wo);
}
fn k_next(q: KPos) -> KPos {
    var r = q;
    r.p = r.p + 1u;
    r.ow = r.ow + 1u;
    if (r.ow == params.g.wo) {
        r.ow = 0u;
        r.oh = r.oh + 1u;
        if (r.oh == params.g.ho) {
            r.oh = 0u;
            r.p = 0u;
            r.n = r.n + 1u;
        }
    }
    return r;
}
fn load_a(r: RowPos, q: KPos) -> f32 {
    let h = u32(i32(q.oh * params.g.sh + r.dh) - i32(params.g.ph));
    let w = u32(i32(q.ow * params.g.sw + r.dw) - i32(params.g.pw));
    if (q.n >= params.g.n || h >= params.g.h || w >= params.g.w) {
        return 0.0;
    }
    return ld_a(q.n * params.g.c * params.g.h * params.g.w + r.plane + h * params.g.w + w);
}
fn load_b(q: KPos, c: ColPos) -> f32 {
    if (q.n >= params.g.n) {
        return 0.0;
    }
    return ld_b(q.n * params.o * params.g.ho * params.g.wo + c + q.p);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params.o + c) * params.m + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v;
}
fn finish(i: u32, v: f32) -> f32 {
    return v;
}
