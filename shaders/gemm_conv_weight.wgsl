// GEMM operands of conv2d's weight gradient as an implicit GEMM, transposed so that the window
// arithmetic is shared by the invocations of a row, and split over the batch: split b covers
// samples [b*nb, (b+1)*nb) and computes
// dW_b^T [C*kh*kw, O] = cols(X) [C*kh*kw, nb*Ho*Wo] . dY^T [nb*Ho*Wo, O], stored as dW_b [O, C*kh*kw];
// the splits are summed afterwards. a = input, b = output gradient. Positions as in
// gemm_strided.wgsl.
// params from 3: [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, O, nb]
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
    let kw = params[8];
    let kk = params[7] * kw;
    return RowPos((r / kk) * params[5] * params[6], ((r % kk) / kw) * params[13], (r % kw) * params[14]);
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params[15] * params[16];
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let Wo = params[16];
    let L = params[15] * Wo;
    let p = k % L;
    return KPos(bi * params[18] + k / L, p, p / Wo, p % Wo);
}
fn k_next(q: KPos) -> KPos {
    var r = q;
    r.p = r.p + 1u;
    r.ow = r.ow + 1u;
    if (r.ow == params[16]) {
        r.ow = 0u;
        r.oh = r.oh + 1u;
        if (r.oh == params[15]) {
            r.oh = 0u;
            r.p = 0u;
            r.n = r.n + 1u;
        }
    }
    return r;
}
fn load_a(r: RowPos, q: KPos) -> f32 {
    let h = u32(i32(q.oh * params[9] + r.dh) - i32(params[11]));
    let w = u32(i32(q.ow * params[10] + r.dw) - i32(params[12]));
    if (q.n >= params[3] || h >= params[5] || w >= params[6]) {
        return 0.0;
    }
    return ld_a(q.n * params[4] * params[5] * params[6] + r.plane + h * params[6] + w);
}
fn load_b(q: KPos, c: ColPos) -> f32 {
    if (q.n >= params[3]) {
        return 0.0;
    }
    return ld_b(q.n * params[17] * params[15] * params[16] + c + q.p);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params[17] + c) * params[0] + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v;
}
