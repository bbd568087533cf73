// GEMM operands of conv2d as an implicit GEMM (no column buffer), transposed so that the window
// arithmetic is shared by the invocations of a row: for sample b,
// Y[b]^T [Ho*Wo, O] = cols(X[b])^T [Ho*Wo, C*kh*kw] . W^T [C*kh*kw, O], with the columns read
// straight from the input. a = input, b = weight; the result is stored as Y[b] [O, Ho*Wo] and
// the bias is added in the epilogue. Positions as in gemm_strided.wgsl.
// params from 3: [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, O, nb]
// Output pixel: the sample's input offset and the window's top-left corner (may be negative).
struct RowPos {
    base: u32,
    h0: i32,
    w0: i32,
}
// Output channel: the weight row's offset.
alias ColPos = u32;
// k = (ci, ki, kj): the input plane's offset and the tap.
struct KPos {
    k: u32,
    plane: u32,
    ki: u32,
    kj: u32,
}
fn row_pos(bi: u32, r: u32) -> RowPos {
    let Wo = params[16];
    return RowPos(bi * params[4] * params[5] * params[6], i32((r / Wo) * params[9]) - i32(params[11]), i32((r % Wo) * params[10]) - i32(params[12]));
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params[2];
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let kw = params[8];
    let kk = params[7] * kw;
    return KPos(k, (k / kk) * params[5] * params[6], (k % kk) / kw, k % kw);
}
fn k_next(p: KPos) -> KPos {
    var q = p;
    q.k = q.k + 1u;
    q.kj = q.kj + 1u;
    if (q.kj == params[8]) {
        q.kj = 0u;
        q.ki = q.ki + 1u;
        if (q.ki == params[7]) {
            q.ki = 0u;
            q.plane = q.plane + params[5] * params[6];
        }
    }
    return q;
}
fn load_a(r: RowPos, p: KPos) -> f32 {
    // Negative coordinates wrap to large u32 values, so one comparison per axis bounds them.
    let h = u32(r.h0 + i32(p.ki * params[13]));
    let w = u32(r.w0 + i32(p.kj * params[14]));
    if (h >= params[5] || w >= params[6]) {
        return 0.0;
    }
    return ld_a(r.base + p.plane + h * params[6] + w);
}
fn load_b(p: KPos, c: ColPos) -> f32 {
    return ld_b(c + p.k);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params[17] + c) * params[15] * params[16] + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v + ld_bias(c);
}
