// GEMM operands of conv2d as an implicit GEMM (no column buffer), transposed so that the window
// arithmetic is shared by the invocations of a row: for sample b,
// Y[b]^T [Ho*Wo, O] = cols(X[b])^T [Ho*Wo, C*kh*kw] . W^T [C*kh*kw, O], with the columns read
// straight from the input. a = input, b = weight; the result is stored as Y[b] [O, Ho*Wo] and
// the bias is added in the epilogue. Positions as in gemm_strided.wgsl.
// params: ConvGemmParams
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
    let Wo = params.g.wo;
    return RowPos(bi * params.g.c * params.g.h * params.g.w, i32((r / Wo) * params.g.sh) - i32(params.g.ph), i32((r % Wo) * params.g.sw) - i32(params.g.pw));
}
fn col_pos(bi: u32, c: u32) -> ColPos {
    return c * params.k;
}
fn k_pos(bi: u32, k: u32) -> KPos {
    let kw = params.g.kw;
    let kk = params.g.kh * kw;
    return KPos(k, (k / kk) * params.g.h * params.g.w, (k % kk) / kw, k % kw);
}
fn k_next(p: KPos) -> KPos {
    var q = p;
    q.k = q.k + 1u;
    q.kj = q.kj + 1u;
    if (q.kj == params.g.kw) {
        q.kj = 0u;
        q.ki = q.ki + 1u;
        if (q.ki == params.g.kh) {
            q.ki = 0u;
            q.plane = q.plane + params.g.h * params.g.w;
        }
    }
    return q;
}
fn load_a(r: RowPos, p: KPos) -> f32 {
    // Negative coordinates wrap to large u32 values, so one comparison per axis bounds them.
    let h = u32(r.h0 + i32(p.ki * params.g.dh));
    let w = u32(r.w0 + i32(p.kj * params.g.dw));
    if (h >= params.g.h || w >= params.g.w) {
        return 0.0;
    }
    return ld_a(r.base + p.plane + h * params.g.w + w);
}
fn load_b(p: KPos, c: ColPos) -> f32 {
    return ld_b(c + p.k);
}
fn c_index(bi: u32, r: u32, c: u32) -> u32 {
    return (bi * params.o + c) * params.g.ho * params.g.wo + r;
}
fn epilogue(r: u32, c: u32, v: f32) -> f32 {
    return v + ld_bias(c);
}
// The fused epilogue (conv2d_fused), applied by the launch that sums the last k: the residual
// ld_res(i) (binding 5) added when the kernel has one, then act (relu's own expression, or x).
fn act(x: f32) -> f32 {
    return {{ACT}};
}
fn finish(i: u32, v: f32) -> f32 {
    return act({{FINISH}});
}
