//! The WGSL of shared-memory tiles ([`Tile`] with `k > 0`, what real GPUs run):
//! `shaders/matmul.wgsl` sized for the tile, with the tile fill that stages its blocks of A and
//! B in workgroup memory.

use super::Tile;

/// The fill through the operand functions.
const TILE_FILL: &str = include_str!("../../../../shaders/tile_fill.wgsl");

/// How a shared tile's workgroup loads its blocks of A and B into workgroup memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TileFill {
    /// Element by element through the operand functions (`shaders/tile_fill.wgsl`): any
    /// storage, any strides, a convolution's windows.
    Operands,
    /// Aligned f32 layouts, one vec4 per load; the flags say A / B are stored transposed
    /// (column-major). The layout check makes K (and M for a transposed A, N for B by rows) a
    /// multiple of 4, so a vec4 that starts inside its matrix ends inside it.
    Vec4 {
        /// A is stored transposed.
        a_t: bool,
        /// B is stored transposed.
        b_t: bool,
    },
}

impl Tile {
    /// `template` (`shaders/matmul.wgsl`) for this shared tile, loading through `fill`.
    pub(crate) fn shared_body(self, template: &str, fill: TileFill) -> String {
        debug_assert!(self.is_shared(), "{self} is a register tile");
        let (tm, tn) = self.output_block();
        let fill = match fill {
            TileFill::Operands => TILE_FILL.to_string(),
            TileFill::Vec4 { a_t, b_t } => vec4_fill(a_t, b_t),
        };
        let subs = [
            ("TILE_FILL", fill),
            ("TM", tm.to_string()),
            ("TN", tn.to_string()),
            ("TK", self.k.to_string()),
            ("NT", (self.wx * self.wy).to_string()),
            ("WX", self.wx.to_string()),
            ("WY", self.wy.to_string()),
            ("RM", self.rows.to_string()),
            ("RN", self.cols.to_string()),
            ("ST", if self.half { "f16" } else { "f32" }.to_string()),
        ];
        subs.iter().fold(template.to_string(), |s, (k, v)| {
            s.replace(&format!("{{{{{k}}}}}"), v)
        })
    }
}

/// The vec4 tile fill: each of the workgroup's invocations loads vec4s of A (four k of a row, or
/// four rows of a k when A is transposed) and of B (four columns of a k, or four k of a column
/// when B is transposed) in turn, zeros outside the matrices.
fn vec4_fill(a_t: bool, b_t: bool) -> String {
    let locals = "        let abase = params.off_a + bi * params.sab;
        let bbase = params.off_b + bi * params.sbb;
        let sam = params.sam;
        let sak = params.sak;
        let sbk = params.sbk;
        let sbn = params.sbn;
";
    // (count of vec4s, their positions, the load's condition and index, the four stores).
    let a = match a_t {
        true => (
            "TK * TM / 4u",
            "let kk = e / (TM / 4u); let r = (e % (TM / 4u)) * 4u;",
            "k0 + kk < K && row0 + r < M",
            "a[(abase + (k0 + kk) * sak + row0 + r) >> 2u]",
            "ta[kk][r] = ST(v.x); ta[kk][r + 1u] = ST(v.y); ta[kk][r + 2u] = ST(v.z); ta[kk][r + 3u] = ST(v.w);",
        ),
        false => (
            "TM * TK / 4u",
            "let r = e / (TK / 4u); let kk = (e % (TK / 4u)) * 4u;",
            "row0 + r < M && k0 + kk < K",
            "a[(abase + (row0 + r) * sam + k0 + kk) >> 2u]",
            "ta[kk][r] = ST(v.x); ta[kk + 1u][r] = ST(v.y); ta[kk + 2u][r] = ST(v.z); ta[kk + 3u][r] = ST(v.w);",
        ),
    };
    let b = match b_t {
        true => (
            "TN * TK / 4u",
            "let cc = e / (TK / 4u); let kk = (e % (TK / 4u)) * 4u;",
            "col0 + cc < N && k0 + kk < K",
            "b[(bbase + (col0 + cc) * sbn + k0 + kk) >> 2u]",
            "tb[kk][cc] = ST(v.x); tb[kk + 1u][cc] = ST(v.y); tb[kk + 2u][cc] = ST(v.z); tb[kk + 3u][cc] = ST(v.w);",
        ),
        false => (
            "TK * TN / 4u",
            "let kk = e / (TN / 4u); let cc = (e % (TN / 4u)) * 4u;",
            "k0 + kk < K && col0 + cc < N",
            "b[(bbase + (k0 + kk) * sbk + col0 + cc) >> 2u]",
            "tb[kk][cc] = ST(v.x); tb[kk][cc + 1u] = ST(v.y); tb[kk][cc + 2u] = ST(v.z); tb[kk][cc + 3u] = ST(v.w);",
        ),
    };
    let mut s = locals.to_string();
    for (count, pos, cond, load, store) in [a, b] {
        s += &format!(
            "        for (var e = tid; e < {count}; e = e + NT) {{
            {pos}
            var v = vec4<f32>();
            if ({cond}) {{
                v = {load};
            }}
            {store}
        }}
"
        );
    }
    s
}
