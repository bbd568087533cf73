//! bf16 products on Intel AMX tiles: `C (f32) = A·B` for bf16 `A` and `B`, with `tdpbf16ps`
//! (16×16 f32 sums of 16×32 by 32×16 bf16 products per instruction, 16× the multiply-adds of
//! an AVX-512 FMA).
//!
//! Used for bf16 matmuls (autocast's linear layers and their gradients) where the CPU has
//! AMX-TILE and AMX-BF16 and Linux grants the process the tile state (`arch_prctl`
//! `ARCH_REQ_XCOMP_PERM`, Linux 5.16+), and the instruction set in use is AVX-512
//! (`WGTORCH_CPU_ISA=avx2|baseline` turns it off with the wider kernels, `WGTORCH_CPU_AMX=0`
//! alone); elsewhere bf16 products widen to f32 and run the f32 kernels (`matmul.rs`).
//! [`enabled`] says which.
//!
//! What the sums are: each bf16 product is exact in f32; the instruction adds the products of
//! one pair along `k` and then the running f32 sum, rounding to nearest even, in a fixed order
//! (depth ascending, 32 at a time) whatever the thread count. It treats subnormal inputs as zero
//! and flushes subnormal sums to zero (whatever MXCSR says), as oneDNN's AMX products in
//! PyTorch do. So results agree with the f32 path to f32 rounding (before the bf16 rounding of
//! the output), not to the bit.
//!
//! Layout: A is packed in 16-row slabs, B in 16-column slabs, both zero-padded to a multiple of
//! 32 along `k`, so that each tile load reads 1 KiB of consecutive memory: A's slab as
//! `[k/32][16 rows][32]`, B's as `[k/2][16 columns][2]` (the pairs along `k` that the
//! instruction multiplies together). Each task computes 32×32 blocks of C in four accumulator
//! tiles (`tmm0..3`) from two A tiles (`tmm4, 5`) and two B tiles (`tmm6, 7`).

use half::bf16;
use rayon::prelude::*;

/// Rows (and columns) of one tile.
const T: usize = 16;
/// bf16 elements along `k` in one tile row.
const KS: usize = 32;
/// Depth of a slice (bf16 elements; a multiple of `KS`): a row block's A tiles (64 KiB) stay
/// close while it runs against a chunk of column blocks. On an Emerald Rapids Xeon, slices of
/// 512 ran 1024³ and 2048³ at 1.48 and 1.71 TFLOP/s, of 1024 at 1.60 and 1.95; 2048 gained
/// nothing more.
const KCA: usize = 1024;
/// Column blocks (32 wide) in a chunk: B's chunk of one slice, 1 MiB, stays in L2.
const NCB: usize = 16;
const _: () = assert!(KCA.is_multiple_of(KS));
/// A task's share of a split product: at least this many multiply-adds (AMX runs ~1 Gmac in
/// a few ms, so smaller pieces would spend more on the task than on the product).
const MIN_TASK_MACS: usize = 1 << 22;

/// Whether bf16 products run on AMX tiles here (see the module's doc): AMX is [`available`],
/// the instruction set in use is AVX-512, and `WGTORCH_CPU_AMX` is not `0` (which turns AMX off
/// alone, to compare the paths).
pub(crate) fn enabled() -> bool {
    use crate::backend::cpu::vmath::{isa, Isa};
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        isa() == Isa::Avx512
            && std::env::var("WGTORCH_CPU_AMX").as_deref() != Ok("0")
            && available()
    })
}

/// Whether this CPU has AMX-TILE and AMX-BF16 and the OS let this process use the tile data
/// (asked once).
pub(crate) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(ask)
}

#[cfg(target_os = "linux")]
fn ask() -> bool {
    // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
    // SAFETY: CPUID exists on every x86-64 CPU (an `unsafe fn` before Rust 1.94).
    #[allow(unused_unsafe)]
    let edx = unsafe {
        use std::arch::x86_64::__cpuid_count;
        if __cpuid_count(0, 0).eax >= 7 {
            __cpuid_count(7, 0).edx
        } else {
            0
        }
    };
    if edx & (1 << 22) == 0 || edx & (1 << 24) == 0 {
        return false;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with these arguments only asks for permission; it returns -1 (and
    // sets errno) where the kernel or the hypervisor does not grant it.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn ask() -> bool {
    false
}

/// `c[i*ldc + j] = Σ_p a[i, p]·b[p, j]` for an `m×k` `a` and a `k×n` `b` of bf16 with (row,
/// column) strides `sa` and `sb`; `c` is `m` rows of `n` f32, `ldc` apart (overwritten).
///
/// # Panics
/// If AMX is not [`available`], or an operand or C is out of bounds.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_bf16(
    m: usize,
    k: usize,
    n: usize,
    a: &[bf16],
    sa: [usize; 2],
    b: &[bf16],
    sb: [usize; 2],
    c: &mut [f32],
    ldc: usize,
) {
    assert!(available(), "gemm_bf16: AMX is not available");
    if m == 0 || n == 0 {
        return;
    }
    super::check_operands(m, k, n, a.len(), sa, b.len(), sb);
    super::check_c(m, n, c.len(), ldc);
    if k == 0 {
        for r in 0..m {
            c[r * ldc..r * ldc + n].fill(0.0);
        }
        return;
    }
    let kp = k.div_ceil(KS) * KS;
    let (mb, nb) = (m.div_ceil(2 * T), n.div_ceil(2 * T));
    let pa = pack_a(m, k, kp, mb * 2, a, sa);
    let pb = pack_b(k, n, kp, nb * 2, b, sb);
    // Split the longer side of C into whole 32-wide blocks, one task each, when each keeps
    // enough work.
    let macs = m.saturating_mul(n).saturating_mul(k);
    let by_rows = mb >= nb;
    let blocks = if by_rows { mb } else { nb };
    let pieces = (rayon::current_num_threads() * 2)
        .min(macs / MIN_TASK_MACS)
        .min(blocks)
        .max(1);
    let per = blocks.div_ceil(pieces);
    let cp = CPtr(c.as_mut_ptr());
    let task = |t: usize| {
        let r = t * per..((t + 1) * per).min(blocks);
        let (rows, cols) = if by_rows { (r, 0..nb) } else { (0..mb, r) };
        // SAFETY: each task writes the C blocks of its own rows or columns (disjoint), within
        // the bounds asserted above; the panels hold `mb`/`nb` pairs of zero-padded slabs.
        unsafe { blocks_of(m, n, kp, &pa, &pb, rows, cols, cp, ldc) }
    };
    if pieces == 1 {
        task(0);
    } else {
        (0..pieces).into_par_iter().for_each(task);
    }
    crate::backend::cpu::pool::give_back(pa);
    crate::backend::cpu::pool::give_back(pb);
}

/// A's `slabs` 16-row slabs, each `[kp/32][16][32]`, zero past `m` rows and `k` columns.
fn pack_a(m: usize, k: usize, kp: usize, slabs: usize, a: &[bf16], sa: [usize; 2]) -> Vec<bf16> {
    let mut out: Vec<bf16> = crate::backend::cpu::pool::any(slabs * T * kp);
    out.par_chunks_mut(T * kp)
        .enumerate()
        .for_each(|(s, slab)| {
            let rows = T.min(m.saturating_sub(s * T));
            if rows == 0 {
                // A padding slab (A's rows end in the block's first half).
                slab.fill(bf16::ZERO);
            } else if sa[0] == 1 && sa[1] != 1 {
                // Columns contiguous (a transposed operand, as a weight gradient's `dYᵀ`): each
                // column's run of the slab's rows is read once and spread over the tile's rows.
                slab.fill(bf16::ZERO);
                for p in 0..k {
                    let col = &a[p * sa[1] + s * T..][..rows];
                    let tile = &mut slab[(p / KS) * T * KS + p % KS..];
                    for (r, v) in col.iter().enumerate() {
                        tile[r * KS] = *v;
                    }
                }
            } else {
                pack_a_rows(slab, s, rows, k, a, sa);
            }
        });
    out
}

/// One slab of A read row by row (rows `s·16..s·16 + rows`): whole tiles of 32 columns.
fn pack_a_rows(slab: &mut [bf16], s: usize, rows: usize, k: usize, a: &[bf16], sa: [usize; 2]) {
    for (q, tile) in slab.chunks_exact_mut(T * KS).enumerate() {
        let p0 = q * KS;
        let w = KS.min(k.saturating_sub(p0));
        for (r, dst) in tile.chunks_exact_mut(KS).enumerate() {
            if r >= rows || w == 0 {
                dst.fill(bf16::ZERO);
                continue;
            }
            let first = (s * T + r) * sa[0] + p0 * sa[1];
            if sa[1] == 1 {
                dst[..w].copy_from_slice(&a[first..first + w]);
            } else {
                for (d, p) in dst[..w].iter_mut().zip(0..) {
                    *d = a[first + p * sa[1]];
                }
            }
            dst[w..].fill(bf16::ZERO);
        }
    }
}

/// B's `slabs` 16-column slabs, each `[kp/2][16][2]`, zero past `k` rows and `n` columns.
fn pack_b(k: usize, n: usize, kp: usize, slabs: usize, b: &[bf16], sb: [usize; 2]) -> Vec<bf16> {
    let mut out: Vec<bf16> = crate::backend::cpu::pool::any(slabs * T * kp);
    out.par_chunks_mut(T * kp)
        .enumerate()
        .for_each(|(s, slab)| {
            let cols = T.min(n.saturating_sub(s * T));
            slab.fill(bf16::ZERO);
            if cols == 0 {
                // A padding slab (C's columns end in the block's first half).
            } else if sb[0] == 1 {
                // Columns contiguous along k (a linear layer's transposed weight): column by column.
                for jj in 0..cols {
                    let col = &b[(s * T + jj) * sb[1]..][..k];
                    for (pair, dst) in col.chunks(2).zip(slab.chunks_exact_mut(2 * T)) {
                        dst[2 * jj..2 * jj + pair.len()].copy_from_slice(pair);
                    }
                }
            } else {
                // Rows along n: two rows at a time, interleaved.
                let row = |p: usize| &b[p * sb[0] + s * T * sb[1]..];
                for (q, dst) in slab.chunks_exact_mut(2 * T).enumerate().take(k.div_ceil(2)) {
                    let (r0, r1) = (row(2 * q), (2 * q + 1 < k).then(|| row(2 * q + 1)));
                    if let (Some(r1), true) = (r1, cols == T && sb[1] == 1) {
                        interleave(&r0[..T], &r1[..T], dst);
                        continue;
                    }
                    for jj in 0..cols {
                        dst[2 * jj] = r0[jj * sb[1]];
                        if let Some(r1) = r1 {
                            dst[2 * jj + 1] = r1[jj * sb[1]];
                        }
                    }
                }
            }
        });
    out
}

/// `dst = [x0, y0, x1, y1, …]` for two rows of 16 (a pair of B's rows along `k`).
fn interleave(x: &[bf16], y: &[bf16], dst: &mut [bf16]) {
    assert!(x.len() == T && y.len() == T && dst.len() == 2 * T);
    // SAFETY: AMX CPUs have AVX2 (this module runs only where `available`); the lengths are
    // asserted, and the loads and stores are unaligned.
    unsafe { interleave_avx2(x, y, dst) }
}

#[target_feature(enable = "avx2")]
unsafe fn interleave_avx2(x: &[bf16], y: &[bf16], dst: &mut [bf16]) {
    use std::arch::x86_64::*;
    // SAFETY: 16 elements in `x` and `y`, 32 in `dst` (the caller's assertion).
    unsafe {
        let a = _mm256_loadu_si256(x.as_ptr().cast());
        let b = _mm256_loadu_si256(y.as_ptr().cast());
        // Within each 128-bit lane: lo = x0 y0 .. x3 y3 | x8 y8 .., hi = x4 y4 .. | x12 y12 ..
        let (lo, hi) = (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
        let out = dst.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(lo, hi));
        _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(lo, hi));
    }
}

/// A pointer to C shared by tasks that write disjoint blocks.
#[derive(Clone, Copy)]
struct CPtr(*mut f32);
// SAFETY: tasks write disjoint blocks of C, and nothing reads C meanwhile.
unsafe impl Send for CPtr {}
unsafe impl Sync for CPtr {}

/// The tile configuration: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn all_full() -> TileConfig {
        let mut cfg = [0u8; 64];
        cfg[0] = 1;
        for t in 0..8 {
            cfg[16 + 2 * t..18 + 2 * t].copy_from_slice(&(4 * T as u16).to_le_bytes());
            cfg[48 + t] = T as u8;
        }
        TileConfig(cfg)
    }
}

/// The 32×32 blocks of C in `rows × cols` (block indices), depth slice by depth slice: for
/// each chunk of `NCB` column blocks, for each `KCA`-deep slice, every row block against the
/// chunk's column blocks, so that the row block's A tiles (64 KiB) stay close and the chunk of
/// B (1 MiB) in L2. C holds the running f32 sums between slices (exact: the tiles are f32).
///
/// # Safety
/// AMX must be [`available`]; `pa`/`pb` hold the slab pairs of every block named, and `c`
/// addresses `m` rows of `n` elements `ldc` apart that no other thread touches in these blocks.
#[allow(clippy::too_many_arguments)]
unsafe fn blocks_of(
    m: usize,
    n: usize,
    kp: usize,
    pa: &[bf16],
    pb: &[bf16],
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    c: CPtr,
    ldc: usize,
) {
    use std::arch::asm;
    let cfg = TileConfig::all_full();
    let mut edge = Acc([0.0; 4 * T * T]);
    let slab = T * kp;
    assert!(rows.end * 2 * slab <= pa.len() && cols.end * 2 * slab <= pb.len());
    // SAFETY: AMX is available (the caller's contract), the configuration is valid.
    unsafe { asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly)) };
    let _release = TileRelease;
    for jc in cols.clone().step_by(NCB) {
        let chunk = jc..(jc + NCB).min(cols.end);
        for pc in (0..kp).step_by(KCA) {
            let kc = KCA.min(kp - pc);
            for bi in rows.clone() {
                let a0 = pa[2 * bi * slab + pc * T..].as_ptr();
                let a1 = pa[(2 * bi + 1) * slab + pc * T..].as_ptr();
                for bj in chunk.clone() {
                    let b0 = pb[2 * bj * slab + pc * T..].as_ptr();
                    let b1 = pb[(2 * bj + 1) * slab + pc * T..].as_ptr();
                    let (r0, c0) = (bi * 2 * T, bj * 2 * T);
                    let (h, w) = ((2 * T).min(m - r0), (2 * T).min(n - c0));
                    // A whole block is summed in C itself; an edge block in `edge` (32×32),
                    // copied from and back to C's part of it.
                    let whole = h == 2 * T && w == 2 * T;
                    // SAFETY: the block's rows r0..r0 + h < m and columns c0..c0 + w <= n lie
                    // in C (the caller's contract), in this task's blocks.
                    let (cp, ld) = unsafe {
                        if whole {
                            (c.0.add(r0 * ldc + c0), ldc)
                        } else {
                            if pc > 0 {
                                for r in 0..h {
                                    let src = c.0.add((r0 + r) * ldc + c0);
                                    std::ptr::copy_nonoverlapping(
                                        src,
                                        edge.0[r * 2 * T..].as_mut_ptr(),
                                        w,
                                    );
                                }
                            }
                            (edge.0.as_mut_ptr(), 2 * T)
                        }
                    };
                    // SAFETY: each slab holds `kp/32` tiles of 1 KiB from `pc` on (asserted
                    // above); `cp` addresses 32 rows of 32 f32, `ld` apart.
                    unsafe { tile_block(a0, a1, b0, b1, kc / KS, cp, ld, pc > 0) };
                    if !whole {
                        for r in 0..h {
                            // SAFETY: as above.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    edge.0[r * 2 * T..].as_ptr(),
                                    c.0.add((r0 + r) * ldc + c0),
                                    w,
                                )
                            };
                        }
                    }
                }
            }
        }
    }
}

/// Releases the tile state when dropped (also if a panic unwinds out of [`blocks_of`]), so no
/// thread keeps it configured.
struct TileRelease;

impl Drop for TileRelease {
    fn drop(&mut self) {
        // SAFETY: created only after `ldtilecfg` (AMX available); releasing returns the tiles
        // to their initial state.
        unsafe { std::arch::asm!("tilerelease", options(nostack, nomem)) };
    }
}

/// One 32×32 block of f32 sums at `c` (rows `ldc` apart): `C (+)= A·B` over `steps` depth
/// steps of 32, from the A tiles at `a0`, `a1` (rows 0..16, 16..32) and the B tiles at `b0`,
/// `b1` (columns 0..16, 16..32), 1 KiB each per step. With `load` false C's old contents are
/// not read.
///
/// # Safety
/// The tile configuration is loaded; the four panels hold `steps` tiles each and `c` addresses
/// 32 rows of 32 f32 `ldc` apart.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_block(
    a0: *const bf16,
    a1: *const bf16,
    b0: *const bf16,
    b1: *const bf16,
    steps: usize,
    c: *mut f32,
    ldc: usize,
    load: bool,
) {
    use std::arch::asm;
    // SAFETY: the caller's contract; tmm0..3 hold C's four 16×16 quarters (row-major order),
    // tmm4/5 the A tiles, tmm6/7 the B tiles.
    unsafe {
        asm!(
            "lea {c2}, [{c} + {ld}*8]",
            "lea {c2}, [{c2} + {ld}*8]",
            "test {load}, {load}",
            "jz 3f",
            "tileloadd tmm0, [{c} + {ld}*1]",
            "tileloadd tmm1, [{c} + {ld}*1 + 64]",
            "tileloadd tmm2, [{c2} + {ld}*1]",
            "tileloadd tmm3, [{c2} + {ld}*1 + 64]",
            "jmp 2f",
            "3:",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "2:",
            "tileloadd tmm4, [{a0} + {s}*1]",
            "tileloadd tmm6, [{b0} + {s}*1]",
            "tileloadd tmm5, [{a1} + {s}*1]",
            "tileloadd tmm7, [{b1} + {s}*1]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a0}, 1024",
            "add {a1}, 1024",
            "add {b0}, 1024",
            "add {b1}, 1024",
            "dec {steps}",
            "jnz 2b",
            "tilestored [{c} + {ld}*1], tmm0",
            "tilestored [{c} + {ld}*1 + 64], tmm1",
            "tilestored [{c2} + {ld}*1], tmm2",
            "tilestored [{c2} + {ld}*1 + 64], tmm3",
            a0 = inout(reg) a0 => _,
            a1 = inout(reg) a1 => _,
            b0 = inout(reg) b0 => _,
            b1 = inout(reg) b1 => _,
            steps = inout(reg) steps => _,
            c = in(reg) c,
            c2 = out(reg) _,
            ld = in(reg) ldc * 4,
            load = in(reg) load as usize,
            s = in(reg) 4 * T,
            options(nostack),
        );
    }
}

/// Four 16×16 f32 tiles, on a cache line.
#[repr(C, align(64))]
struct Acc([f32; 4 * T * T]);
