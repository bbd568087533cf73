// GEMM operands of conv2d's input gradient as an implicit GEMM, transposed so that the window
// arithmetic is shared by the invocations of a row: for sample b,
// dX[b]^T [H*W, C] = windows(dY[b]) [H*W, O*kh*kw] . W' [O*kh*kw, C], where the element for input
// pixel (h, w) and tap (o, ki, kj) is dY[b, o, oh, ow] with oh*sh = h + ph - ki*dh (zero where no
// output reads that pixel through that tap). a = output gradient, b = weight; stored as
// dX[b] [C, H*W]. Positions as in gemm_strided.wgsl.
// params from 3: [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, O, nb]
// Input pixel (padded coordinates) and the sample's dY offset.
struct RowPos {
    base: u32,
    h: i32,
    w: i32,
}
// Input channel: its offset in a weight row.
alias ColPos = u32;
// k = (o, ki, kj): the weight offset without the channel, dY's plane offset, the tap.
struct KPos {
    b: u32,
    plane: u32,
    ki: u32,
    kj: u32,
}
fn row_pos(bi: u32, r: u32) -> RowPos {
    let W = params[6];
    return RowPos(bi * params[17] * params[15] * params[16], i32(r / W + params[11]), i32(r % W + params[12]));
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params[7] * params[8];
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let kw = params[8];
    let kk = params[7] * kw;
    let o = k / kk;
    let kij = k % kk;
    return KPos(o * params[4] * kk + kij, o * params[15] * params[16], kij / kw, kij % kw);
}
fn k_next(p: KPos) -> KPos {
    var q = p;
    q.b = q.b + 1u;
    q.kj = q.kj + 1u;
    if (q.kj == params[8]) {
        q.kj = 0u;
        q.ki = q.ki + 1u;
        if (q.ki == params[7]) {
            q.ki = 0u;
            q.b = q.b + (params[4] - 1u) * params[7] * params[8];
            q.plane = q.plane + params[15] * params[16];
        }
    }
    return q;
}
fn load_a(r: RowPos, p: KPos) -> f32 {
    let hh = r.h - i32(p.ki * params[13]);
    let ww = r.w - i32(p.kj * params[14]);
    if (hh < 0 || ww < 0) {
        return 0.0;
    }
    var oh = u32(hh);
    var ow = u32(ww);
    let sh = params[9];
    let sw = params[10];
    if (sh != 1u) {
        if (oh % sh != 0u) {
            return 0.0;
        }
        oh = oh / sh;
    }
    if (sw != 1u) {
        if (ow % sw != 0u) {
            return 0.0;
        }
        ow = ow / sw;
    }
    if (oh >= params[15] || ow >= params[16]) {
        return 0.0;
    }
    return ld_a(r.base + p.plane + oh * params[16] + ow);
}
fn load_b(p: KPos, c: ColPos) -> f32 {
    return ld_b(p.b + c);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params[4] + c) * params[5] * params[6] + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v;
}
