// GEMM operands of conv2d's input gradient as an implicit GEMM, transposed so that the window
// arithmetic is shared by the invocations of a row: for sample b,
// dX[b]^T [H*W, C] = windows(dY[b]) [H*W, O*kh*kw] . W' [O*kh*kw, C], where the element for input
// pixel (h, w) and tap (o, ki, kj) is dY[b, o, oh, ow] with oh*sh = h + ph - ki*dh (zero where no
// output reads that pixel through that tap). a = output gradient, b = weight; stored as
// dX[b] [C, H*W]. Positions as in gemm_strided.wgsl.
// params: ConvGemmParams
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
    let W = params.g.w;
    return RowPos(bi * params.o * params.g.ho * params.g.wo, i32(r / W + params.g.ph), i32(r % W + params.g.pw));
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params.g.kh * params.g.kw;
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let kw = params.g.kw;
    let kk = params.g.kh * kw;
    let o = k / kk;
    let kij = k % kk;
    return KPos(o * params.g.c * kk + kij, o * params.g.ho * params.g.wo, kij / kw, kij % kw);
}
fn k_next(p: KPos) -> KPos {
    var q = p;
    q.b = q.b + 1u;
    q.kj = q.kj + 1u;
    if (q.kj == params.g.kw) {
        q.kj = 0u;
        q.ki = q.ki + 1u;
        if (q.ki == params.g.kh) {
            q.ki = 0u;
            q.b = q.b + (params.g.c - 1u) * params.g.kh * params.g.kw;
            q.plane = q.plane + params.g.ho * params.g.wo;
        }
    }
    return q;
}
fn load_a(r: RowPos, p: KPos) -> f32 {
    let hh = r.h - i32(p.ki * params.g.dh);
    let ww = r.w - i32(p.kj * params.g.dw);
    if (hh < 0 || ww < 0) {
        return 0.0;
    }
    var oh = u32(hh);
    var ow = u32(ww);
    let sh = params.g.sh;
    let sw = params.g.sw;
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
    if (oh >= params.g.ho || ow >= params.g.wo) {
        return 0.0;
    }
    return ld_a(r.base + p.plane + oh * params.g.wo + ow);
}
fn load_b(p: KPos, c: ColPos) -> f32 {
    return ld_b(p.b + c);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params.g.c + c) * params.g.h * params.g.w + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v;
}
fn finish(i: u32, v: f32) -> f32 {
    return v;
}
