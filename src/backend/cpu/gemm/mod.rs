//! CPU matrix multiply: `C = A·B + beta·C` with packed panels and register-tiled microkernels
//! for the widest vector instruction set the CPU has (AVX-512F, AVX2 + FMA, or a portable loop;
//! [`kernel`]), blocked for the caches, and split over rayon only when each task keeps enough
//! work to gain from it.
//!
//! The operands are [`Source`]s, so a convolution packs its unfolded input straight from the
//! image (`conv.rs`), and a transposed operand is packed from its own layout without a copy.
//! Products with a single row or column, or two rows against a B whose columns are contiguous
//! (a linear layer at batch 2), go to a dot-product/axpy path instead (a matrix-vector product
//! gains nothing from packing, and a transposed B would be gathered for two rows to use).
//!
//! Blocking (the BLIS loop order): for each `NC`-column block of B, for each `KC`-deep slice,
//! pack the `KC×NC` block of B (it stays in L2); for each `MC`-row block of A pack it, then run
//! the microkernel over every (A panel, B panel) pair, the A panel (`MR×KC`) staying in L1.
//! A product large enough is split over the threads into pieces of C (by rows or by columns,
//! whichever side is longer); the operand that every piece reads whole (B for rows, A for
//! columns, when it is to be packed at all) is then packed once, in parallel when large, into
//! the calling thread's buffer for the pieces to share (up to [`SHARED_MAX`]; past it, or on a
//! thread already in a product, each piece packs it for itself as before).
//! Each element of C sums its products in the same order whatever the thread count, so results
//! do not depend on `RAYON_NUM_THREADS`.

#[cfg(target_arch = "x86_64")]
pub(crate) mod amx;
mod kernel;
mod pack;
#[cfg(test)]
pub(super) mod tests;

pub(crate) use kernel::Kernel;
use pack::Panels;
pub(crate) use pack::{copy_short, Source, Strided, Transposed};

use super::vmath::{self, Isa};
use super::CpuElem;
use rayon::prelude::*;
use std::cell::RefCell;

/// Depth of a packed slice.
const KC: usize = 384;
/// Rows of A packed at once (a multiple of every kernel's `MR`).
const MC: usize = 240;
/// Columns of B packed at once (a multiple of every kernel's `NR`).
const NC: usize = 384;
/// Products of this many rows or fewer whose B has contiguous columns (a linear layer's weight,
/// transposed) go to [`gemv`], B read in place, rather than to the packed kernels, which would
/// gather B into panels on every call for a few rows to use. Measured on an AMD EPYC (Zen 3,
/// AVX2), medians of 7: `[2, 2048]·[2048, 64]` 90 → 45 µs, `[2, 4096]·[4096, 256]` 390 → 180 µs,
/// `[2, 64]·[64, 64]` 4.3 → 3.6 µs; with 4 rows the packed AVX2 kernels were faster up to
/// k·n = 64K (`[4, 256]·[256, 256]`: 42 µs packed, 48 µs by dot products) and about even
/// above. In the browser (wasm SIMD128) the golden simple_cnn's inference (batch 2) went from
/// 0.53 to 0.44 ms a run in Node 20.
const FEW_ROWS: usize = 2;
/// A product is split over threads only into pieces of at least this many multiply-adds (a few
/// microseconds of work, more than a rayon task costs).
const MIN_TASK_MACS: usize = 1 << 18;
/// Pieces per thread when C is split by columns (each piece packs only its own columns of B):
/// a thread the host preempts then holds up less of the product.
const SPLIT_COLS: usize = 4;

const _: () = assert!(KC <= pack::MAX_RUN && MC <= pack::MAX_RUN && NC <= pack::MAX_RUN);
// Whole panels of every kernel (MR 4, 6, 8, 12; NR 8, 16, 32, 48) fit the blocks; NC is also a
// multiple of every MR, since an A packed whole (`Panels`) is packed `NC` rows at a time.
const _: () = assert!(MC.is_multiple_of(24) && NC.is_multiple_of(96));

/// Float types with GEMM kernels.
pub(crate) trait Gemm:
    CpuElem + num_traits::Float + std::ops::AddAssign + Send + Sync + Default
{
    /// Whether 3×3 convolutions may take Winograd's F(2×2, 3×3) (`winograd.rs`): f32 does;
    /// f64, gradcheck's reference type, keeps the direct sums.
    const WINOGRAD: bool;

    /// The microkernels for `isa`, or for the widest set below it that the CPU runs.
    fn kernels(isa: Isa) -> Vec<Kernel<Self>>;

    /// The microkernel for an `m×n` product on the instruction set in use (`vmath::isa`): of
    /// the set's kernels, the one that pads C least.
    fn kernel(m: usize, n: usize) -> Kernel<Self>;
}

impl Gemm for f32 {
    const WINOGRAD: bool = true;
    fn kernels(isa: Isa) -> Vec<Kernel<f32>> {
        kernel::f32_kernels(isa)
    }
    fn kernel(m: usize, n: usize) -> Kernel<f32> {
        static KERNELS: std::sync::OnceLock<Vec<Kernel<f32>>> = std::sync::OnceLock::new();
        kernel::fitted(KERNELS.get_or_init(|| f32::kernels(vmath::isa())), m, n)
    }
}

impl Gemm for f64 {
    const WINOGRAD: bool = false;
    fn kernels(_: Isa) -> Vec<Kernel<f64>> {
        vec![kernel::portable_kernel()]
    }
    fn kernel(_: usize, _: usize) -> Kernel<f64> {
        kernel::portable_kernel()
    }
}

/// `c = a·b + beta·c` for an `m×k` by `k×n` product of strided operands: `sa` and `sb` are the
/// (row, column) strides of `a` and `b` in elements, `c` is row-major with row stride `ldc`.
/// With `beta = 0` C's old contents are not read (NaN included), as in BLAS.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Gemm>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    sa: [usize; 2],
    b: &[T],
    sb: [usize; 2],
    beta: T,
    c: &mut [T],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    check_operands(m, k, n, a.len(), sa, b.len(), sb);
    // One row, or a few against a B whose columns are contiguous (a linear layer's transposed
    // weight, which packing would gather element by element): matrix-vector products.
    let few = m == 1 || (m <= FEW_ROWS && sb[0] == 1 && n > 1);
    if k > 0 && (few || n == 1) {
        check_c(m, n, c.len(), ldc);
        if few {
            gemv(m, k, n, (a, sa), (b, sb), beta, (c, [ldc, 1]));
        } else {
            gemv(
                1,
                k,
                m,
                (b, [0, sb[0]]),
                (a, [sa[1], sa[0]]),
                beta,
                (c, [0, ldc]),
            );
        }
        return;
    }
    let (a, b) = (
        Strided {
            data: a,
            rs: sa[0],
            cs: sa[1],
        },
        Strided {
            data: b,
            rs: sb[0],
            cs: sb[1],
        },
    );
    gemm_src(m, k, n, &a, &b, beta, c, ldc, T::kernel(m, n));
}

/// A `k×n` B packed once into the panels the kernels read, for many products against it (an
/// LSTM's recurrent weight, used at every time step): [`gemm_packed`] then skips packing B,
/// which for a few rows of A is a large part of the product.
pub(crate) struct PackedB<T> {
    k: usize,
    n: usize,
    kernel: Kernel<T>,
    /// From `start` (on a cache line, as the scratch panels are): depth slice by depth slice
    /// (`KC` deep), every `nr`-wide column panel in order.
    data: Vec<T>,
    start: usize,
}

impl<T: Gemm> PackedB<T> {
    /// Pack `b` (`k×n`, (row, column) strides `sb`) for the kernel that suits products of `m`
    /// rows (`T::kernel(m, n)`; [`gemm_packed`] takes any number of rows).
    pub(crate) fn new(m: usize, k: usize, n: usize, b: &[T], sb: [usize; 2]) -> PackedB<T> {
        let kernel = T::kernel(m, n);
        let line = 64 / std::mem::size_of::<T>();
        let mut data = vec![T::zero(); Panels::<T>::len(k, n, kernel.nr) + line];
        let start = data.as_ptr().align_offset(64).min(line);
        let src = Strided {
            data: b,
            rs: sb[0],
            cs: sb[1],
        };
        Panels::pack_whole(&src, k, n, kernel.nr, &mut data[start..]);
        PackedB {
            k,
            n,
            kernel,
            data,
            start,
        }
    }

    /// The packed panels.
    fn panels(&self) -> Panels<'_, T> {
        Panels::new(self.n, self.kernel.nr, &self.data[self.start..])
    }
}

/// `c = a·b + beta·c` for an `m×k` strided `a` (strides `sa`) and a [`PackedB`]; `c` row-major
/// with row stride `ldc`. Each element sums its products in the order [`gemm_src`] does with the
/// same kernel.
pub(crate) fn gemm_packed<T: Gemm>(
    m: usize,
    a: &[T],
    sa: [usize; 2],
    b: &PackedB<T>,
    beta: T,
    c: &mut [T],
    ldc: usize,
) {
    let (k, n) = (b.k, b.n);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        k == 0 || (m - 1) * sa[0] + (k - 1) * sa[1] < a.len(),
        "gemm: operand out of bounds"
    );
    let a = Strided {
        data: a,
        rs: sa[0],
        cs: sa[1],
    };
    gemm_blocks(
        m,
        k,
        n,
        &a,
        BOperand::<T, Strided<T>>::Packed(b.panels()),
        beta,
        c,
        ldc,
        b.kernel,
    );
}

/// B as [`block`] reads it: a source it packs block by block, or packed already.
enum BOperand<'a, T, S> {
    Source(&'a S),
    Packed(Panels<'a, T>),
}

impl<T, S> Clone for BOperand<'_, T, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, S> Copy for BOperand<'_, T, S> {}

/// An `m×k` A with (row, column) strides `sa` and a `k×n` B with strides `sb` lie within
/// slices of `a_len` and `b_len` elements.
fn check_operands(
    m: usize,
    k: usize,
    n: usize,
    a_len: usize,
    sa: [usize; 2],
    b_len: usize,
    sb: [usize; 2],
) {
    let last = |rows: usize, s: [usize; 2], cols: usize| {
        (rows.max(1) - 1) * s[0] + (cols.max(1) - 1) * s[1]
    };
    assert!(
        k == 0 || (last(m, sa, k) < a_len && last(k, sb, n) < b_len),
        "gemm: operand out of bounds"
    );
}

/// `c` holds an `m×n` matrix with row stride `ldc`.
fn check_c(m: usize, n: usize, len: usize, ldc: usize) {
    let need = (m - 1)
        .checked_mul(ldc)
        .and_then(|v| v.checked_add(n))
        .expect("gemm: C's extent overflows");
    assert!(need <= len && (m == 1 || n <= ldc), "gemm: C out of bounds");
}

/// A pointer to C that rayon tasks share; each task writes a disjoint block.
#[derive(Clone, Copy)]
struct CPtr<T>(*mut T);
// SAFETY: tasks write disjoint blocks of C (see `gemm_blocks`), and nothing reads C meanwhile.
unsafe impl<T> Send for CPtr<T> {}
unsafe impl<T> Sync for CPtr<T> {}

/// `c = a·b + beta·c` for sources `a` (`m×k`) and `b` (`k×n`) with `kernel`; `c` row-major with
/// row stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_src<T: Gemm>(
    m: usize,
    k: usize,
    n: usize,
    a: &impl Source<T>,
    b: &impl Source<T>,
    beta: T,
    c: &mut [T],
    ldc: usize,
    kernel: Kernel<T>,
) {
    gemm_blocks(m, k, n, a, BOperand::Source(b), beta, c, ldc, kernel)
}

/// [`gemm_src`] with B either a source or packed already.
#[allow(clippy::too_many_arguments)]
fn gemm_blocks<T: Gemm, S: Source<T>>(
    m: usize,
    k: usize,
    n: usize,
    a: &impl Source<T>,
    b: BOperand<'_, T, S>,
    beta: T,
    c: &mut [T],
    ldc: usize,
    kernel: Kernel<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    check_c(m, n, c.len(), ldc);
    // beta = 0 overwrites C in the first slice; another beta other than 1 scales it first.
    let accumulate = beta != T::zero();
    if k == 0 || (accumulate && beta != T::one()) {
        for r in 0..m {
            let row = &mut c[r * ldc..r * ldc + n];
            if accumulate {
                row.iter_mut().for_each(|v| *v = *v * beta);
            } else {
                row.fill(T::zero());
            }
        }
        if k == 0 {
            return;
        }
    }
    // Split the longer side of C into equal pieces (whole tiles), one task each, when each
    // piece keeps at least MIN_TASK_MACS of work.
    let macs = m.saturating_mul(n).saturating_mul(k);
    let by_rows = m >= n;
    let per_thread = if by_rows { 1 } else { SPLIT_COLS };
    let pieces = (rayon::current_num_threads() * per_thread)
        .min(macs / MIN_TASK_MACS)
        .max(1);
    let (len, unit) = if by_rows {
        (m, kernel.mr)
    } else {
        (n, kernel.nr)
    };
    let step = len.div_ceil(unit).div_ceil(pieces) * unit;
    let cp = CPtr(c.as_mut_ptr());
    let run = |a_packed: Option<Panels<'_, T>>, b: BOperand<'_, T, S>| {
        let task = |i: usize| {
            let (p0, p1) = (i * step, ((i + 1) * step).min(len));
            if p0 >= p1 {
                return;
            }
            let (rows, cols) = if by_rows {
                (p0..p1, 0..n)
            } else {
                (0..m, p0..p1)
            };
            // SAFETY: C's extent was checked above; the pieces are disjoint blocks of C.
            unsafe { block(a, a_packed, b, k, rows, cols, cp, ldc, accumulate, kernel) };
        };
        if pieces == 1 {
            task(0);
        } else {
            (0..pieces).into_par_iter().for_each(task);
        }
    };
    // Every piece reads the whole of the operand along the split (A when C is split by
    // columns, B by rows), and would pack it for itself. A weight gradient such as
    // `[128, 2048]·[2048, 512]` (eight pieces) spent 18% of its instructions packing so, 8% with
    // A packed once; it ran in 2.4–3.0 ms instead of 3.5–4.5 on an AMD EPYC (Zen 3, 2 threads).
    // Packed once, by all threads, the pieces share it.
    let (mr, nr) = (kernel.mr, kernel.nr);
    let shared_b = match b {
        BOperand::Source(src) if by_rows && pieces > 1 => Some(src),
        _ => None,
    };
    let shared_a = !by_rows && pieces > 1 && a_in_place(a, step, nr).is_none();
    let shared = if shared_a {
        Panels::<T>::len(k, m, mr)
    } else if shared_b.is_some() {
        Panels::<T>::len(k, n, nr)
    } else {
        0
    };
    if shared == 0 {
        return run(None, b);
    }
    with_shared::<T, _>(shared, |buf| match (buf, shared_b) {
        (Some(buf), Some(src)) => run(
            None,
            BOperand::Packed(Panels::pack_whole(src, k, n, nr, buf)),
        ),
        (Some(buf), None) => run(Some(Panels::pack_whole(&Transposed(a), k, m, mr, buf)), b),
        (None, _) => run(None, b),
    })
}

/// A row-major A's rows when the kernels read them in place for a block of C `cols` wide (see
/// [`block`]).
fn a_in_place<T: Gemm>(a: &impl Source<T>, cols: usize, nr: usize) -> Option<Strided<'_, T>> {
    // A row-major A is read in place by the kernels: packing it would cost a fair part of using
    // it when C is narrow (a 3×3 convolution at 7×7 ran 1.7× faster so), and no less elsewhere
    // (measured from 256³ to 1024³). Rows a multiple of 4 KiB apart are packed all the same
    // (the microkernel's rows would share one L1 set and evict one another), unless C is one
    // panel wide: then each A panel is read once, and packing it would only add a pass over A
    // (a weight gradient of `[32, 1024]·[1024, 27]` spent more time packing A than using it).
    let one_panel = cols <= nr;
    a.strided().filter(|s| {
        s.cs == 1 && (one_panel || !(s.rs * std::mem::size_of::<T>()).is_multiple_of(4096))
    })
}

thread_local! {
    /// Each thread's packing buffers (A and B), kept between calls: a fresh buffer per call
    /// would fault its pages in every time.
    static SCRATCH: RefCell<(Vec<u64>, Vec<u64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// The calling thread's buffer for an operand packed whole and shared by the pieces.
    static SHARED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The largest operand packed whole for the pieces to share (bytes): a 1024×1024 f32. Larger
/// ones are packed piece by piece, where the packing is a smaller part of the work, rather than
/// kept in a buffer that lives as long as the thread. Each thread that starts a split product
/// keeps one such buffer (the caller's, and a rayon worker's when it runs products inside an
/// outer parallel loop): at most this much per thread.
const SHARED_MAX: usize = 4 << 20;

/// Run `f` with the calling thread's shared packing buffer, `n` elements on a cache line, or
/// with `None` when that is larger than [`SHARED_MAX`] or in use already (a product started
/// while this thread waits on its own pieces).
fn with_shared<T: Gemm, R>(n: usize, f: impl FnOnce(Option<&mut [T]>) -> R) -> R {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes > SHARED_MAX {
        return f(None);
    }
    SHARED.with(|s| match s.try_borrow_mut() {
        Ok(mut v) => f(Some(aligned(&mut v, n))),
        Err(_) => f(None),
    })
}

/// `n` elements of `v` (grown as needed, zeroed or reused) from its first cache line (64
/// bytes): a vector load that straddles two lines costs about twice as much, and the allocator
/// guarantees only 8 bytes.
fn aligned<T: Gemm>(v: &mut Vec<u64>, n: usize) -> &mut [T] {
    let words = (n * std::mem::size_of::<T>()).div_ceil(8) + 8;
    if v.len() < words {
        v.resize(words, 0);
    }
    let skip = v.as_ptr().align_offset(64).min(8);
    // SAFETY: `T` is f32 or f64 (plain old data, alignment ≤ 8) and the words after `skip`
    // cover `n` elements.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().add(skip) as *mut T, n) }
}

/// Run `f` with two zeroed-or-reused scratch slices of `na` and `nb` elements.
fn with_scratch<T: Gemm, R>(na: usize, nb: usize, f: impl FnOnce(&mut [T], &mut [T]) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => {
            let (va, vb) = &mut *s;
            f(aligned(va, na), aligned(vb, nb))
        }
        // Re-entered on this thread (not done today): fresh buffers.
        Err(_) => {
            let (mut va, mut vb) = (Vec::new(), Vec::new());
            f(aligned(&mut va, na), aligned(&mut vb, nb))
        }
    })
}

/// One task's block of C: rows `rows`, columns `cols`, all of k.
///
/// # Safety
/// `c` addresses the whole `m×n` C (row stride `ldc`) and no other task touches this block.
#[allow(clippy::too_many_arguments)]
unsafe fn block<T: Gemm, S: Source<T>>(
    a: &impl Source<T>,
    a_packed: Option<Panels<'_, T>>,
    b: BOperand<'_, T, S>,
    k: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    c: CPtr<T>,
    ldc: usize,
    accumulate: bool,
    kern: Kernel<T>,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    let kc_max = KC.min(k);
    let mc_max = MC.min(rows.len().div_ceil(mr) * mr);
    let nc_max = NC.min(cols.len().div_ceil(nr) * nr);
    let direct = match a_packed {
        Some(_) => None,
        None => a_in_place(a, cols.len(), nr),
    };
    let a_words = if direct.is_some() || a_packed.is_some() {
        0
    } else {
        mc_max * kc_max
    };
    let b_words = match b {
        BOperand::Source(_) => kc_max * nc_max,
        BOperand::Packed(_) => 0,
    };
    with_scratch::<T, _>(a_words, b_words, |ap, bp| {
        for jc in cols.clone().step_by(NC) {
            let nc = NC.min(cols.end - jc);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                let bp: &[T] = match b {
                    BOperand::Source(b) => {
                        pack::pack(b, pc, kc, jc, nc, nr, bp);
                        bp
                    }
                    BOperand::Packed(b) => b.at(pc, kc, jc),
                };
                let acc = accumulate || pc > 0;
                for ic in rows.clone().step_by(MC) {
                    let mc = MC.min(rows.end - ic);
                    let apanels: &[T] = match (a_packed, direct) {
                        (Some(p), _) => p.at(pc, kc, ic),
                        (None, None) => {
                            pack::pack(&Transposed(a), pc, kc, ic, mc, mr, ap);
                            ap
                        }
                        (None, Some(_)) => &[],
                    };
                    for ir in (0..mc).step_by(mr) {
                        let (apanel, sa) = match direct {
                            Some(s) => (&s.data[(ic + ir) * s.rs + pc..], [s.rs, 1]),
                            None => (&apanels[ir * kc..(ir + mr) * kc], [1, mr]),
                        };
                        for jr in (0..nc).step_by(nr) {
                            let bpanel = &bp[jr * kc..(jr + nr) * kc];
                            // SAFETY: the tile is inside this task's block (the caller's
                            // contract), `mr.min(..)` rows and `nr.min(..)` columns.
                            unsafe {
                                kern.tile(
                                    kc,
                                    apanel,
                                    sa,
                                    bpanel,
                                    c.0.add((ic + ir) * ldc + jc + jr),
                                    ldc,
                                    mr.min(mc - ir),
                                    nr.min(nc - jr),
                                    acc,
                                )
                            };
                        }
                    }
                }
            }
        }
    })
}

/// `y[i, j] = beta·y[i, j] + Σ_kk x[i, kk]·B[kk, j]` for the `m ≤ FEW_ROWS` rows of `x` and
/// `j < n`: matrix-vector products (`x`, B and `y` with (row, column) strides `sx`, `sb`, `sy`)
/// that read B once for all rows, by dot products when B's columns are contiguous and by row
/// updates otherwise, split over threads by columns when large. Each output sums its products
/// in the same order whatever `m` and the thread count.
fn gemv<T: Gemm>(
    m: usize,
    k: usize,
    n: usize,
    (x, sx): (&[T], [usize; 2]),
    (b, sb): (&[T], [usize; 2]),
    beta: T,
    (y, sy): (&mut [T], [usize; 2]),
) {
    debug_assert!((1..=FEW_ROWS).contains(&m));
    let xs: Vec<Vec<T>> = (0..m)
        .map(|i| (0..k).map(|kk| x[i * sx[0] + kk * sx[1]]).collect())
        .collect();
    let parallel = k.saturating_mul(n).saturating_mul(m) >= 2 * MIN_TASK_MACS;
    let chunk = if parallel {
        n.div_ceil(rayon::current_num_threads()).max(1)
    } else {
        n
    };
    // Columns `ci·chunk..` of every row, row-major (`m × cols`).
    let block = |ci: usize| -> Vec<T> {
        let j0 = ci * chunk;
        let cols = chunk.min(n - j0);
        let mut o = vec![T::zero(); m * cols];
        if sb[0] == 1 {
            dots_widest(&xs, &b[j0 * sb[1]..], sb[1], &mut o);
        } else {
            for kk in 0..k {
                let at = kk * sb[0] + j0 * sb[1];
                for (x, orow) in xs.iter().zip(o.chunks_exact_mut(cols)) {
                    let xv = x[kk];
                    if sb[1] == 1 {
                        let row = &b[at..at + cols];
                        orow.iter_mut().zip(row).for_each(|(o, &v)| *o += xv * v);
                    } else {
                        for (jj, o) in orow.iter_mut().enumerate() {
                            *o += xv * b[at + jj * sb[1]];
                        }
                    }
                }
            }
        }
        o
    };
    let blocks: Vec<Vec<T>> = if parallel {
        (0..n.div_ceil(chunk)).into_par_iter().map(block).collect()
    } else {
        vec![block(0)]
    };
    for (ci, o) in blocks.iter().enumerate() {
        let cols = o.len() / m;
        for (i, row) in o.chunks_exact(cols).enumerate() {
            for (jj, &v) in row.iter().enumerate() {
                let yij = &mut y[i * sy[0] + (ci * chunk + jj) * sy[1]];
                *yij = if beta == T::zero() {
                    v
                } else {
                    beta * *yij + v
                };
            }
        }
    }
}

vmath::widest!(dots_widest, dots_on => dots<T: Gemm>(xs: &[Vec<T>], b: &[T], ld: usize, o: &mut [T]));

/// `o[i·cols + j] = Σ xs[i][kk]·b[j·ld + kk]` for the `m = xs.len() ≤ FEW_ROWS` rows (all `k`
/// long) and the `cols = o.len() / m` columns of B: each column read once for every row (from
/// memory once, then from L1), every row's dot product summed by [`dot_rows`] in the same order
/// whatever `m`.
#[inline(always)]
fn dots<T: Gemm>(xs: &[Vec<T>], b: &[T], ld: usize, o: &mut [T]) {
    let (m, k) = (xs.len(), xs[0].len());
    let cols = o.len() / m;
    for jj in 0..cols {
        let col = &b[jj * ld..][..k];
        match xs {
            [x] => [o[jj]] = dot_rows([&x[..]], col),
            [x0, x1] => [o[jj], o[cols + jj]] = dot_rows([&x0[..], &x1[..]], col),
            _ => unreachable!("gemv: at most {FEW_ROWS} rows"),
        }
    }
    // The match above covers every row count `gemv` takes.
    const _: () = assert!(FEW_ROWS == 2);
}

/// Running sums per row of [`dot_rows`]: enough independent chains of additions to keep the
/// vector units busy (two AVX-512 registers a row, four AVX2 ones) without spilling on wasm's
/// 128-bit vectors (four a row there).
const DOT_LANES: usize = if cfg!(target_arch = "x86_64") { 32 } else { 16 };

/// `Σ x[kk]·y[kk]` for each of the `R ≤ 2` rows `xs` against one `y`: `DOT_LANES` running sums
/// a row (lane `l` takes `kk ≡ l`), added by [`fold_lanes`], then the tail in order. A row's
/// result does not depend on `R`.
#[inline(always)]
fn dot_rows<T: Gemm, const R: usize>(xs: [&[T]; R], y: &[T]) -> [T; R] {
    const L: usize = DOT_LANES;
    const { assert!(R == 1 || R == 2, "dot_rows: one or two rows") };
    let (x0, x1) = (xs[0], xs[R - 1]);
    debug_assert!(
        x0.len() == y.len() && x1.len() == y.len(),
        "dot_rows: rows of y's length"
    );
    // One array a row (not one indexed by row), so that the sums stay in registers.
    let (mut s0, mut s1) = ([T::zero(); L], [T::zero(); L]);
    let chunks = y
        .chunks_exact(L)
        .zip(x0.chunks_exact(L))
        .zip(x1.chunks_exact(L));
    for ((yc, c0), c1) in chunks {
        for ((s, &x), &y) in s0.iter_mut().zip(c0).zip(yc) {
            *s += x * y;
        }
        if R == 2 {
            for ((s, &x), &y) in s1.iter_mut().zip(c1).zip(yc) {
                *s += x * y;
            }
        }
    }
    let body = y.len() / L * L;
    let finish = |s: &mut [T; L], x: &[T]| {
        let tail = x[body..]
            .iter()
            .zip(&y[body..])
            .fold(T::zero(), |t, (&a, &b)| t + a * b);
        fold_lanes(s) + tail
    };
    let r0 = finish(&mut s0, x0);
    let r1 = if R == 2 { finish(&mut s1, x1) } else { r0 };
    std::array::from_fn(|r| if r == 0 { r0 } else { r1 })
}

/// The lanes of [`dot_rows`] added pairwise (lane `l` and `l + w` for `w` halving). Not
/// inlined: seen next to the loop, this tree leads LLVM to vectorise the loop two lanes at a
/// time, with its sums in memory.
#[inline(never)]
fn fold_lanes<T: Gemm>(s: &mut [T; DOT_LANES]) -> T {
    let mut w = DOT_LANES / 2;
    while w > 0 {
        for l in 0..w {
            s[l] += s[l + w];
        }
        w /= 2;
    }
    s[0]
}
