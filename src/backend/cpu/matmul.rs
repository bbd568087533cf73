//! CPU matrix multiply: the `matrixmultiply` crate's packed SIMD kernels, one call per block,
//! with large products split over rayon here (the crate's own thread pool is off, so convolution
//! tasks that each run a GEMM never oversubscribe the cores). Chosen over `gemm` by measurement
//! on the CI machine (`examples/bench.rs` prints both). Half types compute in f32 and round once.

use super::{pool, with_cpu, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::shape::Layout;
use rayon::prelude::*;

/// Batched `a @ b` with `a` laid out as `[B, M, K]` and `b` as `[B, K, N]` (any strides, batch
/// stride 0 for broadcast). Returns a contiguous `[B, M, N]`.
pub(crate) fn matmul(a: &CpuStorage, al: &Layout, b: &CpuStorage, bl: &Layout) -> CpuStorage {
    let (bs, m) = (al.shape[0], al.shape[1]);
    let n = bl.shape[2];
    match (a, b) {
        (CpuStorage::F32(av), CpuStorage::F32(bv)) => {
            let mut out = pool::any(bs * m * n);
            run(av, al, bv, bl, &mut out, |a, sa, b, sb, c| {
                gemm(m, al.shape[2], n, a, sa, b, sb, 0.0, c, n)
            });
            CpuStorage::F32(out)
        }
        (CpuStorage::F64(av), CpuStorage::F64(bv)) => {
            let mut out = pool::any(bs * m * n);
            run(av, al, bv, bl, &mut out, |a, sa, b, sb, c| {
                gemm(m, al.shape[2], n, a, sa, b, sb, 0.0, c, n)
            });
            CpuStorage::F64(out)
        }
        _ => with_cpu!(a, av, T => {
            // Half types: widen the viewed elements to f32, multiply, round once.
            let bv = T::slice(b).expect("matmul: same dtype");
            let af: Vec<f32> = av.iter().map(|x| x.to_f64() as f32).collect();
            let bf: Vec<f32> = bv.iter().map(|x| x.to_f64() as f32).collect();
            let mut of = vec![0f32; bs * m * n];
            run(&af, al, &bf, bl, &mut of, |a, sa, b, sb, c| gemm(m, al.shape[2], n, a, sa, b, sb, 0.0, c, n));
            T::wrap(of.into_iter().map(|v| T::from_f64(v as f64)).collect())
        }),
    }
}

/// Float types with a packed GEMM kernel (`matrixmultiply`, single-threaded per call; this module
/// splits large products over rayon so the library has one thread pool).
pub(crate) trait Gemm:
    super::CpuElem + num_traits::Float + std::ops::AddAssign + Send + Sync
{
    /// `C = A·B + beta·C` on raw strided operands.
    ///
    /// # Safety
    /// Every addressed element of `a`, `b` and `c` must be in bounds; `c` must not alias them.
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        sa: [isize; 2],
        b: *const Self,
        sb: [isize; 2],
        beta: Self,
        c: *mut Self,
        sc: [isize; 2],
    );
}
impl Gemm for f32 {
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        sa: [isize; 2],
        b: *const f32,
        sb: [isize; 2],
        beta: f32,
        c: *mut f32,
        sc: [isize; 2],
    ) {
        matrixmultiply::sgemm(
            m, k, n, 1.0, a, sa[0], sa[1], b, sb[0], sb[1], beta, c, sc[0], sc[1],
        );
    }
}
impl Gemm for f64 {
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f64,
        sa: [isize; 2],
        b: *const f64,
        sb: [isize; 2],
        beta: f64,
        c: *mut f64,
        sc: [isize; 2],
    ) {
        matrixmultiply::dgemm(
            m, k, n, 1.0, a, sa[0], sa[1], b, sb[0], sb[1], beta, c, sc[0], sc[1],
        );
    }
}

/// A raw pointer that may cross to rayon tasks (each task touches a disjoint block).
#[derive(Clone, Copy)]
struct Ptr<T>(*mut T);
// SAFETY: used only for disjoint output blocks and read-only inputs during one call.
unsafe impl<T> Send for Ptr<T> {}
unsafe impl<T> Sync for Ptr<T> {}

/// Products at least this many multiply-adds are split over rayon's threads.
const SPLIT_MACS: usize = 1 << 21;

/// `c = a·b + beta·c` for an `m×k` by `k×n` product: `sa`/`sb` are the (row, column) strides of
/// `a` and `b` in elements, `c` is row-major with row stride `ldc`. Large products are split into
/// row (or column) blocks, one rayon task each; every block packs its own operand panels.
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
    let last = |rows: usize, s: [usize; 2], cols: usize| {
        (rows.max(1) - 1) * s[0] + (cols.max(1) - 1) * s[1]
    };
    assert!(
        (k == 0 || (last(m, sa, k) < a.len() && last(k, sb, n) < b.len()))
            && last(m, [ldc, 1], n) < c.len(),
        "gemm: operand out of bounds"
    );
    if k == 0 {
        for r in 0..m {
            // beta = 0 overwrites (C may hold anything, NaN included), as BLAS does.
            let row = &mut c[r * ldc..r * ldc + n];
            if beta == T::zero() {
                row.fill(T::zero());
            } else {
                row.iter_mut().for_each(|v| *v = *v * beta);
            }
        }
        return;
    }
    let threads = rayon::current_num_threads();
    let pieces = if m * n * k >= SPLIT_MACS { threads } else { 1 };
    let (ap, bp, cp) = (
        Ptr(a.as_ptr() as *mut T),
        Ptr(b.as_ptr() as *mut T),
        Ptr(c.as_mut_ptr()),
    );
    let (sa, sb) = (sa.map(|s| s as isize), sb.map(|s| s as isize));
    let sc = [ldc as isize, 1];
    // Split the longer side of C into blocks that are multiples of 32 (the kernels' tile edge).
    let split_rows = m >= n;
    let len = if split_rows { m } else { n };
    let block = len.div_ceil(pieces).next_multiple_of(32).min(len);
    let run = |i: usize| {
        let (p0, p1) = (i * block, ((i + 1) * block).min(len));
        if p0 >= p1 {
            return;
        }
        let (ap, bp, cp) = (ap, bp, cp);
        // SAFETY: bounds asserted above; blocks of C are disjoint.
        unsafe {
            if split_rows {
                T::raw(
                    p1 - p0,
                    k,
                    n,
                    ap.0.offset(p0 as isize * sa[0]),
                    sa,
                    bp.0,
                    sb,
                    beta,
                    cp.0.add(p0 * ldc),
                    sc,
                );
            } else {
                T::raw(
                    m,
                    k,
                    p1 - p0,
                    ap.0,
                    sa,
                    bp.0.offset(p0 as isize * sb[1]),
                    sb,
                    beta,
                    cp.0.add(p0),
                    sc,
                );
            }
        }
    };
    let count = len.div_ceil(block);
    if count == 1 {
        run(0);
    } else {
        (0..count).into_par_iter().for_each(run);
    }
}

fn run<T: Copy + Default + Send + Sync>(
    av: &[T],
    al: &Layout,
    bv: &[T],
    bl: &Layout,
    out: &mut [T],
    f: impl Fn(&[T], [usize; 2], &[T], [usize; 2], &mut [T]) + Sync,
) {
    let (bs, m, k) = (al.shape[0], al.shape[1], al.shape[2]);
    let n = bl.shape[2];
    if m == 0 || n == 0 {
        return;
    }
    let one = |bi: usize, c: &mut [T]| {
        f(
            &av[al.offset + bi * al.strides[0]..],
            [al.strides[1], al.strides[2]],
            &bv[bl.offset + bi * bl.strides[0]..],
            [bl.strides[1], bl.strides[2]],
            c,
        )
    };
    // Many small products run in parallel over the batch; large ones split inside `gemm`.
    if m * n * k >= SPLIT_MACS || bs == 1 {
        out.chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, c)| one(bi, c));
    } else {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, c)| one(bi, c));
    }
}
