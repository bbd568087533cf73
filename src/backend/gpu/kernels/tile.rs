//! The shapes the GEMM kernels can take ([`Tile`]): how many outputs each invocation
//! accumulates in registers, how invocations group, and (real GPUs) how much of K a workgroup
//! stages in workgroup memory per step; and the WGSL each shape generates. The tuner
//! (`gpu/tune.rs`) times them per adapter and shape.
//!
//! CPU adapters run register tiles, written out without private arrays in the loop (a CPU
//! adapter may keep those in memory) and without workgroup memory or barriers. Where the
//! adapter's subgroups are 8 invocations wide (lavapipe on AVX2), both of their kernels also
//! have subgroup tiles: the eight lanes of a subgroup share the 8 rows (or columns) of their
//! blocks, each loads one of them (the vec4 kernel: one row's four k, or four rows of one k), and
//! `subgroupBroadcast` hands it to the others. llvmpipe loads from storage one lane at a time
//! (a loop over the SIMD lanes), so this turns eight loads per step into one; a broadcast is a
//! register shuffle. On lavapipe this doubles the GEMMs of the SimpleCNN step and sgemm.
//!
//! Real GPUs run shared-memory tiles (`shared_tile.rs`): a workgroup loads a block of A and
//! one of B into workgroup memory per step of K, then each invocation multiplies its register
//! block out of them.

/// The shape of a GEMM kernel: each invocation computes a `rows × cols` block of the output,
/// a workgroup is `wx × wy` invocations (x along the columns, at most 256).
///
/// - **Register tiles** (`k == 0`; CPU adapters: `Kernel::Matmul`'s and `Kernel::MatmulVec4`'s without
///   workgroup memory): the block is 4x4, 8x4 or 4x8 (larger ones compile for tens of seconds
///   on llvmpipe and were not faster). A subgroup tile (`subgroup`, written with a trailing `s`)
///   shares its 8 rows (an 8x4 block, `wx` a multiple of 8) or 8 columns (4x8, `wy` a multiple
///   of 8) across the lanes of a subgroup of 8, which the tuner offers where the adapter's
///   subgroups are 8 wide.
/// - **Shared-memory tiles** (`k > 0`, written with a trailing `kK`; real GPUs): a workgroup
///   computes a `wy·rows × wx·cols` block of the output, stepping K by `k` through workgroup
///   memory (8, 16 or 32; the two staged blocks fit WebGPU's 16 KiB); blocks up to 8x8.
///
/// Every shape sums each output over k in the same order, in f32, so they agree to the rounding
/// of a contracted multiply-add. None accumulates in f16, as PyTorch's f16 GEMMs do not: over
/// K = 64 to 4096 (standard normal f16 operands, 128x64 outputs) f16 accumulation's median
/// relative error is 6 to 46 times that of f32 accumulation rounded to f16, and 12% to 81% of
/// its outputs miss the tuner's agreement test, which would refuse it on any GEMM.
///
/// ```
/// use wgtorch::backend::gpu::kernels::Tile;
/// let t: Tile = "8x4/16x4".parse().unwrap();
/// assert_eq!((t.rows, t.cols, t.wx, t.wy), (8, 4, 16, 4));
/// assert_eq!(t.to_string(), "8x4/16x4");
/// let s: Tile = "8x4/16x4s".parse().unwrap();
/// assert!(s.subgroup && s.to_string() == "8x4/16x4s");
/// assert!("4x4/8x8s".parse::<Tile>().is_err()); // no side of 8 to share
/// assert!("8x4/4x16s".parse::<Tile>().is_err()); // a subgroup's 8 lanes would span rows
/// assert_eq!(Tile::DEFAULT.to_string(), "4x4/8x8");
/// assert!("3x4/8x8".parse::<Tile>().is_err());
/// assert!("8x8/8x8".parse::<Tile>().is_err());
/// assert!("4x4/32x16".parse::<Tile>().is_err());
/// // Shared-memory tiles: 64x64 outputs per workgroup, K staged 16 at a time.
/// let g: Tile = "4x4/16x16k16".parse().unwrap();
/// assert_eq!((g, g.output_block()), (Tile::SHARED_DEFAULT, (64, 64)));
/// assert!("8x8/16x16k8".parse::<Tile>().is_ok());
/// assert!("8x8/16x16k32".parse::<Tile>().is_err()); // 32 KiB of workgroup memory
/// assert!("8x4/16x4k16s".parse::<Tile>().is_err()); // no subgroups in shared tiles
/// // Staging f16: 128x128 outputs, K by 16, in 8 KiB.
/// let h: Tile = "8x8/16x16k16h".parse().unwrap();
/// assert!(h.half && h.workgroup_bytes() == 8192 && h.to_string() == "8x8/16x16k16h");
/// assert!("4x4/8x8h".parse::<Tile>().is_err()); // register tiles stage nothing
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
    /// The 8 rows (8x4) or columns (4x8) of a block are loaded once per subgroup and broadcast.
    pub subgroup: bool,
    /// K per step through workgroup memory; 0 for a register tile.
    pub k: u32,
    /// A shared tile staging its blocks in f16 (written with a trailing `h`), for native f16
    /// GEMMs: exact (the operands are f16), in half the workgroup memory; the products still
    /// accumulate in f32.
    pub half: bool,
}

impl Tile {
    /// A register tile.
    const fn reg(rows: u32, cols: u32, wx: u32, wy: u32, subgroup: bool) -> Tile {
        Tile {
            rows,
            cols,
            wx,
            wy,
            subgroup,
            k: 0,
            half: false,
        }
    }

    /// A shared-memory tile.
    const fn shared(rows: u32, cols: u32, wx: u32, wy: u32, k: u32) -> Tile {
        Tile {
            rows,
            cols,
            wx,
            wy,
            subgroup: false,
            k,
            half: false,
        }
    }

    /// A native CPU adapter's shape (lavapipe) until the tuner has measured another: 4×4
    /// outputs, 8×8 invocations. In the browser a CPU adapter runs
    /// [`Tile::BROWSER_CPU_DEFAULT`].
    pub const DEFAULT: Tile = Tile::reg(4, 4, 8, 8, false);

    /// The shapes the tuner times on CPU adapters, [`Tile::DEFAULT`] first: those that won a
    /// GEMM of the SimpleCNN step or a square matmul on lavapipe among 16 measured, less those
    /// whose shaders take llvmpipe seconds to compile (portable 4x8 blocks: 3 s per vec4 kernel;
    /// 8x8: 8 s; a 4x8 subgroup tile loads a column per lane, and compiles like the 8x4 ones).
    pub const CANDIDATES: [Tile; 4] = [
        Tile::DEFAULT,
        Tile::reg(8, 4, 8, 8, false),
        Tile::reg(4, 4, 16, 4, false),
        Tile::reg(8, 4, 16, 4, false),
    ];

    /// A CPU adapter's shape in the browser (Chromium's SwiftShader behind WebGPU), where nothing
    /// is tuned: 4×8 outputs, 8×8 invocations, the portable form of the subgroup candidate
    /// `4x8/8x8s` (so the native tests check it against the CPU on every layout). Measured in
    /// headless Chromium 156 on an AMD EPYC (Zen 3, 2 vCPUs, idle), the SimpleCNN training
    /// step (batch 64, Adam) took 2.57–2.62 s in it (three runs) against 3.60–3.71 s in
    /// [`Tile::DEFAULT`] (two runs), with 4x8/16x4 and 4x8/4x16 within 1% of it, 8x4/8x8 at
    /// 3.03–3.12 s and 4x4/16x4 at 4.02 s, and its first step 3.65–3.82 s against 4.71–4.91 s. llvmpipe compiles the 4×8 kernels for seconds
    /// each (the SimpleCNN's took 12 s more than the default's), which is why lavapipe does not
    /// offer it.
    ///
    /// ```
    /// use wgtorch::backend::gpu::kernels::Tile;
    /// assert_eq!(Tile::BROWSER_CPU_DEFAULT.to_string(), "4x8/8x8");
    /// // The portable form of a subgroup candidate, which the native tests force.
    /// let sg = Tile::SUBGROUP_CANDIDATES.map(Tile::portable);
    /// assert!(sg.contains(&Tile::BROWSER_CPU_DEFAULT));
    /// ```
    pub const BROWSER_CPU_DEFAULT: Tile = Tile::reg(4, 8, 8, 8, false);

    /// The subgroup tiles (after [`Tile::CANDIDATES`] where the adapter's subgroups are 8
    /// wide): each shares the 8 rows or columns of its blocks across a subgroup.
    pub const SUBGROUP_CANDIDATES: [Tile; 3] = [
        Tile::reg(8, 4, 8, 8, true),
        Tile::reg(8, 4, 16, 4, true),
        Tile::reg(4, 8, 8, 8, true),
    ];

    /// [`Tile::CANDIDATES`], then [`Tile::SUBGROUP_CANDIDATES`].
    pub const WITH_SUBGROUPS: [Tile; 7] = {
        let mut all = [Tile::DEFAULT; 7];
        let mut i = 0;
        while i < 7 {
            all[i] = match i < 4 {
                true => Tile::CANDIDATES[i],
                false => Tile::SUBGROUP_CANDIDATES[i - 4],
            };
            i += 1;
        }
        all
    };

    /// A real GPU's shape until the tuner has measured another (the kernel of before the
    /// tuner): 64×64 outputs per workgroup of 16×16 invocations, 4×4 each, K staged 16 at a
    /// time.
    pub const SHARED_DEFAULT: Tile = Tile::shared(4, 4, 16, 16, 16);

    /// The shapes the tuner times on real GPUs, [`Tile::SHARED_DEFAULT`] first: the classic
    /// shapes of shared-memory SGEMM (as in CUTLASS's SIMT and TVM's schedules, sized for
    /// WebGPU's 256 invocations and 16 KiB): 128×128 outputs with 8×8 per invocation for large
    /// GEMMs (64 accumulators: a register file's worth, 4 flops per shared-memory load), 128×64
    /// and 64×128 for tall and wide ones, and 32×32 in 64 invocations for GEMMs too small to
    /// fill the GPU with 64×64 tiles (a convolution's weight gradient, a batch of one).
    pub const SHARED_CANDIDATES: [Tile; 5] = [
        Tile::SHARED_DEFAULT,
        Tile::shared(8, 8, 16, 16, 8),
        Tile::shared(8, 4, 16, 16, 16),
        Tile::shared(4, 8, 16, 16, 16),
        Tile::shared(4, 4, 8, 8, 16),
    ];

    /// Every tile any adapter runs by default or the tuner may pick: [`Tile::WITH_SUBGROUPS`],
    /// then [`Tile::SHARED_CANDIDATES`], [`Tile::SHARED_HALF_CANDIDATES`] and
    /// [`Tile::BROWSER_CPU_DEFAULT`] (the kernels the tests validate).
    pub const ALL: [Tile; 18] = {
        let mut all = [Tile::DEFAULT; 18];
        let mut i = 0;
        while i < 18 {
            all[i] = match i {
                0..7 => Tile::WITH_SUBGROUPS[i],
                7..12 => Tile::SHARED_CANDIDATES[i - 7],
                12..17 => Tile::SHARED_HALF_CANDIDATES[i - 12],
                _ => Tile::BROWSER_CPU_DEFAULT,
            };
            i += 1;
        }
        all
    };

    /// [`Tile::SHARED_CANDIDATES`] staging f16 (the tuner's other candidates for native f16
    /// GEMMs on adapters with `SHADER_F16`).
    pub const SHARED_HALF_CANDIDATES: [Tile; 5] = {
        let mut all = Tile::SHARED_CANDIDATES;
        let mut i = 0;
        while i < 5 {
            all[i].half = true;
            i += 1;
        }
        all
    };

    /// Whether the kernel stages K through workgroup memory (a real GPU's tile).
    pub fn is_shared(self) -> bool {
        self.k > 0
    }

    /// The workgroup memory the kernel stages its blocks of A and B in, in bytes.
    pub fn workgroup_bytes(self) -> u32 {
        let (bm, bn) = self.output_block();
        (bm + bn) * self.k * if self.half { 2 } else { 4 }
    }

    /// The outputs one workgroup computes: (rows, columns).
    pub fn output_block(self) -> (u32, u32) {
        (self.wy * self.rows, self.wx * self.cols)
    }

    /// How many k one launch may sum where an invocation may run `budget` loop iterations
    /// (llvmpipe's cap, which every loop's iterations count toward, the pass that leaves a loop
    /// included): `vec4` for the kernels that read aligned vec4 operands (4 k per iteration in a
    /// register tile). A shared tile runs per step of K its tile fill and, per k, the reads of
    /// its block's rows and columns from workgroup memory and its products, and once per launch
    /// its stores: whole steps that fit, each loop counted with its leaving pass.
    pub(crate) fn k_per_launch(self, budget: usize, vec4: bool) -> usize {
        if !self.is_shared() {
            return if vec4 { budget * 4 } else { budget };
        }
        let (bm, bn) = self.output_block();
        let (k, t) = (self.k as usize, (self.wx * self.wy) as usize);
        let (rm, rn) = (self.rows as usize, self.cols as usize);
        // Per k: its own pass, the row and column reads, the products' rows and columns.
        let per_k = 1 + (rm + 1) + (rn + 1) + (rm + 1) + rm * (rn + 1);
        let fill = (bm as usize * k).div_ceil(t) + 1 + (bn as usize * k).div_ceil(t) + 1;
        let per_step = 1 + fill + k * per_k + 1;
        let stores = (rm + 1) + rm * (rn + 1) + 1;
        (budget.saturating_sub(stores) / per_step).max(1) * k
    }

    /// The same shape without subgroup operations.
    pub fn portable(self) -> Tile {
        Tile {
            subgroup: false,
            ..self
        }
    }

    /// The same shape staging f32.
    pub fn staging_f32(self) -> Tile {
        Tile {
            half: false,
            ..self
        }
    }

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
        let (wx, wy) = (self.wx, self.wy);
        let (entry, exit) = if !self.subgroup {
            (
                format!("@compute @workgroup_size({wx}, {wy})\nfn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{"),
                "    if (r0 >= M || c0 >= N) {\n        return;\n    }".to_string(),
            )
        } else {
            // The invocation's place from its subgroup and lane, not from its local index (the
            // API leaves the order of lanes open): the 8 lanes of a subgroup lie along one row
            // of the workgroup (an 8x4 block: they share its rows) or one column (4x8). This
            // assumes full subgroups of 8 (the tuner offers these tiles only where the
            // adapter's are 8 wide, no more and no fewer; Vulkan promises full ones only on
            // request, which wgpu does not make; lavapipe's are its SIMD width). A tuned tile
            // is also checked against the default on the tuning GEMM, where a missing output
            // would show as the scratch buffer's NaN.
            let lid = if self.rows == 8 {
                format!("vec2<u32>((sg % {0}u) * 8u + sl, sg / {0}u)", wx / 8)
            } else {
                format!("vec2<u32>(sg / {0}u, (sg % {0}u) * 8u + sl)", wy / 8)
            };
            (
                format!("@compute @workgroup_size({})\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) sl: u32) {{\n    let lid = {lid};", wx * wy),
                "    // No early exit: the subgroup's lanes all load what they broadcast.".to_string(),
            )
        };
        template
            .replace("{{ENTRY}}", &entry)
            .replace("{{EXIT}}", &exit)
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
        // Rows and columns past the edge read row / column 0 and are never stored (a subgroup
        // tile's lanes all run the loop, so its first row and column are checked too).
        let sg = self.subgroup;
        let (share_rows, share_cols) = (sg && rm == 8, sg && rm != 8);
        let pos = |name: &str, f: &str, v: &str, bound: &str, i: u32| {
            if i == 0 && !sg {
                format!("    let {name}{i} = {f}(bi, {v});\n")
            } else {
                format!(
                    "    let {name}{i} = {f}(bi, select(0u, {v} + {i}u, {v} + {i}u < {bound}));\n"
                )
            }
        };
        // A shared side's positions: lane `sl`'s row (column) of the block.
        let lane = |name: &str, f: &str, v: &str, bound: &str| {
            format!("    let {name} = {f}(bi, select(0u, {v} + sl, {v} + sl < {bound}));\n")
        };
        if share_rows {
            setup += &lane("ral", "row_pos", "r0", "M");
        } else {
            for i in 0..rm {
                setup += &pos("ra", "row_pos", "r0", "M", i);
            }
        }
        if share_cols {
            setup += &lane("cbl", "col_pos", "c0", "N");
        } else {
            for j in 0..self.cols {
                setup += &pos("cb", "col_pos", "c0", "N", j);
            }
        }
        let mut step = String::new();
        for i in 0..rm {
            for j in 0..rn4 {
                line(&mut setup, format!("    var acc{i}_{j} = vec4<f32>();"));
            }
        }
        if share_cols {
            line(&mut step, "        let bl = load_b(kp, cbl);".into());
        }
        if share_rows {
            line(&mut step, "        let al = load_a(ral, kp);".into());
        }
        for j in 0..rn4 {
            let c = |t: u32| match share_cols {
                true => format!("subgroupBroadcast(bl, {}u)", 4 * j + t),
                false => format!("load_b(kp, cb{})", 4 * j + t),
            };
            let (c0, c1, c2, c3) = (c(0), c(1), c(2), c(3));
            line(
                &mut step,
                format!("        let bv{j} = vec4<f32>({c0}, {c1}, {c2}, {c3});"),
            );
        }
        for i in 0..rm {
            let a = match share_rows {
                true => format!("subgroupBroadcast(al, {i}u)"),
                false => format!("load_a(ra{i}, kp)"),
            };
            line(&mut step, format!("        let av{i} = {a};"));
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
        let (share_rows, share_cols) = (self.subgroup && bm == 2, self.subgroup && bn == 2);
        let mat = |v: [String; 4], transposed: bool| {
            let m = format!("mat4x4<f32>({}, {}, {}, {})", v[0], v[1], v[2], v[3]);
            match transposed {
                true => format!("transpose({m})"),
                false => m,
            }
        };
        // A shared side's 8 rows (columns) by 4 k come from one vec4 load per lane: along k (A
        // by rows, B transposed) lane `sl` loads its own row's (column's) four; across (A
        // transposed, B by rows) lane `sl` loads k + sl / 2 of rows (columns)
        // 4 * (sl % 2) .. + 3. `bc(v, l)` is lane l's `v`.
        let bc = |v: &str, l: u32| format!("subgroupBroadcast({v}, {l}u)");
        // Rows and columns past the edge read the last ones and are never stored. A vec4 read
        // along the rows (A transposed) or the columns (B by rows) starts at most 4 before the
        // end, which the layout check makes a multiple of 4.
        let shared = [
            (
                share_rows && a_t,
                "    let rsl = min(r0 + 4u * (sl % 2u), M - 4u);",
                "        let al = a[(abase + (k + sl / 2u) * sak + rsl) >> 2u];",
            ),
            (
                share_rows && !a_t,
                "    let ral = min(r0 + sl, M - 1u);",
                "        let al = a[(abase + ral * sam + k) >> 2u];",
            ),
            (
                share_cols && b_t,
                "    let cbl = min(c0 + sl, N - 1u);",
                "        let bl = b[(bbase + cbl * sbn + k) >> 2u];",
            ),
            (
                share_cols && !b_t,
                "    let csl = min(c0 + 4u * (sl % 2u), N - 4u);",
                "        let bl = b[(bbase + (k + sl / 2u) * sbk + csl) >> 2u];",
            ),
        ];
        for (on, pos, load) in shared {
            if on {
                line(&mut setup, pos.into());
                line(&mut step, load.into());
            }
        }
        for i in 0..bm {
            let r = 4 * i;
            let m = match (share_rows, a_t) {
                (true, true) => mat([i, 2 + i, 4 + i, 6 + i].map(|l| bc("al", l)), false),
                (true, false) => mat([r, r + 1, r + 2, r + 3].map(|l| bc("al", l)), true),
                (false, true) => {
                    line(
                        &mut setup,
                        format!("    let rs{i} = min(r0 + {r}u, M - 4u);"),
                    );
                    let v = |t: u32| format!("a[(abase + (k + {t}u) * sak + rs{i}) >> 2u]");
                    mat([0, 1, 2, 3].map(v), false)
                }
                (false, false) => {
                    let rows = clamped4("r0", r, "M");
                    line(&mut setup, format!("    let ra{i} = vec4<u32>({rows});"));
                    let v = |c: &str| format!("a[(abase + ra{i}.{c} * sam + k) >> 2u]");
                    mat(["x", "y", "z", "w"].map(v), true)
                }
            };
            line(&mut step, format!("        let am{i} = {m};"));
        }
        for j in 0..bn {
            let c = 4 * j;
            let m = match (share_cols, b_t) {
                (true, true) => mat([c, c + 1, c + 2, c + 3].map(|l| bc("bl", l)), false),
                (true, false) => mat([j, 2 + j, 4 + j, 6 + j].map(|l| bc("bl", l)), true),
                (false, true) => {
                    let cols = clamped4("c0", c, "N");
                    line(&mut setup, format!("    let cb{j} = vec4<u32>({cols});"));
                    let v = |x: &str| format!("b[(bbase + cb{j}.{x} * sbn + k) >> 2u]");
                    mat(["x", "y", "z", "w"].map(v), false)
                }
                (false, false) => {
                    line(
                        &mut setup,
                        format!("    let cs{j} = min(c0 + {c}u, N - 4u);"),
                    );
                    let v = |t: u32| format!("b[(bbase + (k + {t}u) * sbk + cs{j}) >> 2u]");
                    mat([0, 1, 2, 3].map(v), true)
                }
            };
            line(&mut step, format!("        let bm{j} = {m};"));
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
        let s = if self.subgroup { "s" } else { "" };
        write!(f, "{}x{}/{}x{}", self.rows, self.cols, self.wx, self.wy)?;
        let h = if self.half { "h" } else { "" };
        match self.k {
            0 => write!(f, "{s}"),
            k => write!(f, "k{k}{h}"),
        }
    }
}

impl std::str::FromStr for Tile {
    type Err = String;
    /// `ROWSxCOLS/WXxWY`, with a trailing `s` for a subgroup tile or `kK` for a shared-memory
    /// tile (`kKh` staging f16), as [`Tile`]'s `Display` writes it.
    fn from_str(s: &str) -> Result<Tile, String> {
        let bad = || {
            format!(
                "a GEMM tile is ROWSxCOLS/WXxWY[s|kK[h]]: a register tile (a block of 4x4, 8x4 or \
                 4x8 outputs, at most 256 invocations; `s` shares an 8x4 block's rows across 8 \
                 lanes of a row of invocations, or a 4x8 block's columns along a column), e.g. \
                 {}, or a shared-memory tile staging K by 8, 16 or 32 (blocks up to 8x8, the \
                 workgroup's blocks of A and B within 16 KiB; `h` stages f16), e.g. {}; got \
                 {s:?}",
                Tile::DEFAULT,
                Tile::SHARED_DEFAULT
            )
        };
        let pair = |p: &str| -> Option<(u32, u32)> {
            let (a, b) = p.split_once('x')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        };
        let (block, wg) = s.split_once('/').ok_or_else(bad)?;
        let (wg, subgroup, k) = match (wg.strip_suffix('s'), wg.split_once('k')) {
            (Some(w), _) => (w, true, ""),
            (None, Some((w, k))) => (w, false, k),
            (None, None) => (wg, false, ""),
        };
        let (k, half) = match k.strip_suffix('h') {
            Some(k) => (k, true),
            None => (k, false),
        };
        let k = match k {
            "" if !half => 0,
            k => k.parse::<u32>().map_err(|_| bad())?,
        };
        let ((rows, cols), (wx, wy)) = (pair(block).ok_or_else(bad)?, pair(wg).ok_or_else(bad)?);
        let block_ok = match k {
            0 => matches!((rows, cols), (4, 4) | (8, 4) | (4, 8)),
            _ => matches!((rows, cols), (4, 4) | (8, 4) | (4, 8) | (8, 8)),
        };
        if !block_ok || wx == 0 || wy == 0 || wx.checked_mul(wy).is_none_or(|p| p > 256) {
            return Err(bad());
        }
        if k > 0 {
            // Both staged blocks within WebGPU's default 16 KiB of workgroup memory (f32 ones
            // for a half tile in a GEMM that stages f32 are checked at launch).
            let t = Tile {
                half,
                ..Tile::shared(rows, cols, wx, wy, k)
            };
            if ![8, 16, 32].contains(&k) || t.workgroup_bytes() > 16384 {
                return Err(bad());
            }
            return Ok(t);
        }
        // A subgroup of 8 lanes shares the 8 rows along a row of invocations, or the 8
        // columns along a column.
        let shares = match (rows, cols) {
            (8, 4) => wx % 8 == 0,
            (4, 8) => wy % 8 == 0,
            _ => false,
        };
        if subgroup && !shares {
            return Err(bad());
        }
        Ok(Tile::reg(rows, cols, wx, wy, subgroup))
    }
}

/// The four positions `origin + first` .. `+ 3`, each clamped below `bound` (WGSL, comma-separated).
fn clamped4(origin: &str, first: u32, bound: &str) -> String {
    (0..4)
        .map(|t| format!("min({origin} + {}u, {bound} - 1u)", first + t))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Append `l` and a newline to the generated WGSL.
fn line(s: &mut String, l: String) {
    s.push_str(&l);
    s.push('\n');
}
