//! The shapes the GEMM kernels of CPU adapters can take ([`Tile`]): how many outputs each
//! invocation accumulates in registers and how invocations group, and the WGSL each shape
//! generates, written out without private arrays in the loop (a CPU adapter may keep those in
//! memory). The tuner (`gpu/tune.rs`) times them per adapter and shape.

/// The register block and workgroup of a CPU adapter's GEMM kernel (`MatmulDirect`,
/// `MatmulVec4`): each invocation computes a `rows × cols` block of the output, a workgroup is
/// `wx × wy` invocations (x along the columns). The block is 4x4, 8x4 or 4x8 (larger ones
/// compile for tens of seconds on llvmpipe and were not faster), a workgroup has at most 256
/// invocations.
///
/// ```
/// use wgtorch::backend::gpu::kernels::Tile;
/// let t: Tile = "8x4/16x4".parse().unwrap();
/// assert_eq!((t.rows, t.cols, t.wx, t.wy), (8, 4, 16, 4));
/// assert_eq!(t.to_string(), "8x4/16x4");
/// assert_eq!(Tile::DEFAULT.to_string(), "4x4/8x8");
/// assert!("3x4/8x8".parse::<Tile>().is_err());
/// assert!("8x8/8x8".parse::<Tile>().is_err());
/// assert!("4x4/32x16".parse::<Tile>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Output rows per invocation.
    pub rows: u32,
    /// Output columns per invocation.
    pub cols: u32,
    /// Invocations per workgroup along the columns.
    pub wx: u32,
    /// Invocations per workgroup along the rows.
    pub wy: u32,
}

impl Tile {
    /// The shape used until the tuner has measured another: 4×4 outputs, 8×8 invocations.
    pub const DEFAULT: Tile = Tile {
        rows: 4,
        cols: 4,
        wx: 8,
        wy: 8,
    };

    /// The shapes the tuner times, [`Tile::DEFAULT`] first: those that won a GEMM of the
    /// SimpleCNN step or a square matmul on lavapipe among 16 measured, less those whose shaders
    /// take llvmpipe seconds to compile (4x8 blocks: 3 s per vec4 kernel; 8x8: 8 s).
    pub const CANDIDATES: [Tile; 4] = [
        Tile::DEFAULT,
        Tile {
            rows: 8,
            cols: 4,
            wx: 8,
            wy: 8,
        },
        Tile {
            rows: 4,
            cols: 4,
            wx: 16,
            wy: 4,
        },
        Tile {
            rows: 8,
            cols: 4,
            wx: 16,
            wy: 4,
        },
    ];

    /// The grid covering `[m, n]` outputs in `batches`: (column groups, row groups, batches).
    pub(crate) fn groups(self, m: usize, n: usize, batches: usize) -> [usize; 3] {
        let per = |d: usize, w: u32, r: u32| d.div_ceil((w * r) as usize);
        [
            per(n, self.wx, self.cols),
            per(m, self.wy, self.rows),
            batches,
        ]
    }

    /// `template` (`matmul_direct.wgsl` or `matmul_vec4.wgsl`) with this shape's workgroup, the
    /// origin of each invocation's block, and the generated `{{SETUP}}`, `{{STEP}}`, `{{ACC}}` (the accumulators, `{{NACC}}` of them).
    fn fill(self, template: &str, setup: &str, step: &str, acc: &str) -> String {
        let nacc = acc.split(", ").count();
        template
            .replace("{{NACC}}", &nacc.to_string())
            .replace("{{WX}}", &self.wx.to_string())
            .replace("{{WY}}", &self.wy.to_string())
            .replace("{{RM}}", &self.rows.to_string())
            .replace("{{RN}}", &self.cols.to_string())
            .replace("{{RN4}}", &(self.cols / 4).to_string())
            .replace("{{SETUP}}", setup)
            .replace("{{STEP}}", step)
            .replace("{{ACC}}", acc)
    }

    /// The body of `matmul_direct.wgsl` (scalar operand reads through the GEMM's operand
    /// functions, one vec4 accumulator per row and four columns).
    pub(crate) fn direct(self, template: &str) -> String {
        let (rm, rn4) = (self.rows, self.cols / 4);
        let mut setup = String::new();
        // Rows and columns past the edge read row / column 0 and are never stored.
        let pos = |name: &str, f: &str, v: &str, bound: &str, i: u32| {
            if i == 0 {
                format!("    let {name}{i} = {f}(bi, {v});\n")
            } else {
                format!(
                    "    let {name}{i} = {f}(bi, select(0u, {v} + {i}u, {v} + {i}u < {bound}));\n"
                )
            }
        };
        for i in 0..rm {
            setup += &pos("ra", "row_pos", "r0", "M", i);
        }
        for j in 0..self.cols {
            setup += &pos("cb", "col_pos", "c0", "N", j);
        }
        let mut step = String::new();
        for i in 0..rm {
            for j in 0..rn4 {
                line(&mut setup, format!("    var acc{i}_{j} = vec4<f32>();"));
            }
        }
        for j in 0..rn4 {
            let c = |t: u32| format!("load_b(kp, cb{})", 4 * j + t);
            let (c0, c1, c2, c3) = (c(0), c(1), c(2), c(3));
            line(
                &mut step,
                format!("        let bv{j} = vec4<f32>({c0}, {c1}, {c2}, {c3});"),
            );
        }
        for i in 0..rm {
            line(&mut step, format!("        let av{i} = load_a(ra{i}, kp);"));
            for j in 0..rn4 {
                line(
                    &mut step,
                    format!("        acc{i}_{j} = acc{i}_{j} + av{i} * bv{j};"),
                );
            }
        }
        let acc = (0..rm)
            .flat_map(|i| (0..rn4).map(move |j| format!("acc{i}_{j}")))
            .collect::<Vec<_>>()
            .join(", ");
        self.fill(template, &setup, &step, &acc)
    }

    /// The body of `matmul_vec4.wgsl`: 4×4 blocks of A and B read as aligned vec4 and
    /// multiplied as `mat4x4`, one accumulator per block of the output. `a_t` / `b_t`: the
    /// operand is stored transposed (column-major).
    pub(crate) fn vec4(self, template: &str, a_t: bool, b_t: bool) -> String {
        let (bm, bn) = (self.rows / 4, self.cols / 4);
        let mut setup = String::new();
        let mut step = String::new();
        // Rows and columns past the edge read the last ones and are never stored. A vec4 read
        // along the rows (A transposed) or the columns (B by rows) starts at most 4 before the
        // end, which the layout check makes a multiple of 4.
        for i in 0..bm {
            let r = 4 * i;
            if a_t {
                line(
                    &mut setup,
                    format!("    let rs{i} = min(r0 + {r}u, M - 4u);"),
                );
                let v = |t: u32| format!("a[(abase + (k + {t}u) * sak + rs{i}) >> 2u]");
                let (v0, v1, v2, v3) = (v(0), v(1), v(2), v(3));
                line(
                    &mut step,
                    format!("        let am{i} = mat4x4<f32>({v0}, {v1}, {v2}, {v3});"),
                );
            } else {
                let rows = (0..4)
                    .map(|t| format!("min(r0 + {}u, M - 1u)", r + t))
                    .collect::<Vec<_>>()
                    .join(", ");
                line(&mut setup, format!("    let ra{i} = vec4<u32>({rows});"));
                let v = |c: &str| format!("a[(abase + ra{i}.{c} * sam + k) >> 2u]");
                let (v0, v1, v2, v3) = (v("x"), v("y"), v("z"), v("w"));
                line(
                    &mut step,
                    format!("        let am{i} = transpose(mat4x4<f32>({v0}, {v1}, {v2}, {v3}));"),
                );
            }
        }
        for j in 0..bn {
            let c = 4 * j;
            if b_t {
                let cols = (0..4)
                    .map(|t| format!("min(c0 + {}u, N - 1u)", c + t))
                    .collect::<Vec<_>>()
                    .join(", ");
                line(&mut setup, format!("    let cb{j} = vec4<u32>({cols});"));
                let v = |x: &str| format!("b[(bbase + cb{j}.{x} * sbn + k) >> 2u]");
                let (v0, v1, v2, v3) = (v("x"), v("y"), v("z"), v("w"));
                line(
                    &mut step,
                    format!("        let bm{j} = mat4x4<f32>({v0}, {v1}, {v2}, {v3});"),
                );
            } else {
                line(
                    &mut setup,
                    format!("    let cs{j} = min(c0 + {c}u, N - 4u);"),
                );
                let v = |t: u32| format!("b[(bbase + (k + {t}u) * sbk + cs{j}) >> 2u]");
                let (v0, v1, v2, v3) = (v(0), v(1), v(2), v(3));
                line(
                    &mut step,
                    format!("        let bm{j} = transpose(mat4x4<f32>({v0}, {v1}, {v2}, {v3}));"),
                );
            }
        }
        for i in 0..bm {
            for j in 0..bn {
                line(&mut setup, format!("    var acc{i}_{j} = mat4x4<f32>();"));
                line(
                    &mut step,
                    format!("        acc{i}_{j} = acc{i}_{j} + am{i} * bm{j};"),
                );
            }
        }
        let acc = (0..bm)
            .flat_map(|i| (0..bn).map(move |j| format!("acc{i}_{j}")))
            .collect::<Vec<_>>()
            .join(", ");
        self.fill(template, &setup, &step, &acc)
    }
}

impl std::fmt::Display for Tile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}/{}x{}", self.rows, self.cols, self.wx, self.wy)
    }
}

impl std::str::FromStr for Tile {
    type Err = String;
    /// `ROWSxCOLS/WXxWY`, as [`Tile`]'s `Display` writes it.
    fn from_str(s: &str) -> Result<Tile, String> {
        let bad = || {
            format!(
                "a GEMM tile is ROWSxCOLS/WXxWY (a block of 4x4, 8x4 or 4x8 outputs, at most 256 \
                 invocations), e.g. {}; got {s:?}",
                Tile::DEFAULT
            )
        };
        let pair = |p: &str| -> Option<(u32, u32)> {
            let (a, b) = p.split_once('x')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        };
        let (block, wg) = s.split_once('/').ok_or_else(bad)?;
        let ((rows, cols), (wx, wy)) = (pair(block).ok_or_else(bad)?, pair(wg).ok_or_else(bad)?);
        let block_ok = matches!((rows, cols), (4, 4) | (8, 4) | (4, 8));
        if !block_ok || wx == 0 || wy == 0 || wx.checked_mul(wy).is_none_or(|p| p > 256) {
            return Err(bad());
        }
        Ok(Tile { rows, cols, wx, wy })
    }
}

/// Append `l` and a newline to the generated WGSL.
fn line(s: &mut String, l: String) {
    s.push_str(&l);
    s.push('\n');
}
