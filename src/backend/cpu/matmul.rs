//! CPU matrix multiply through the `matrixmultiply` crate (packed, SIMD, its own thread pool for
//! large products). Chosen over `gemm` by measurement on the CI machine (`examples/bench.rs`
//! prints both): 385 vs 246 GFLOP/s at 1024³ f32. Half types compute in f32 and round once.

use super::{with_cpu, CpuElem, CpuStorage};
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
            let mut out = vec![0f32; bs * m * n];
            run(av, al, bv, bl, &mut out, |o| unsafe { sgemm(o) });
            CpuStorage::F32(out)
        }
        (CpuStorage::F64(av), CpuStorage::F64(bv)) => {
            let mut out = vec![0f64; bs * m * n];
            run(av, al, bv, bl, &mut out, |o| unsafe { dgemm(o) });
            CpuStorage::F64(out)
        }
        _ => with_cpu!(a, av, T => {
            // Half types: widen the viewed elements to f32, multiply, round once.
            let bv = T::slice(b).expect("matmul: same dtype");
            let af: Vec<f32> = av.iter().map(|x| x.to_f64() as f32).collect();
            let bf: Vec<f32> = bv.iter().map(|x| x.to_f64() as f32).collect();
            let mut of = vec![0f32; bs * m * n];
            run(&af, al, &bf, bl, &mut of, |o| unsafe { sgemm(o) });
            T::wrap(of.into_iter().map(|v| T::from_f64(v as f64)).collect())
        }),
    }
}

/// One product's operands: pointers to the first elements and the row/column strides.
#[derive(Clone, Copy)]
struct Operands<T> {
    a: *const T,
    b: *const T,
    c: *mut T,
    m: usize,
    k: usize,
    n: usize,
    rsa: isize,
    csa: isize,
    rsb: isize,
    csb: isize,
}
// SAFETY: the pointers address disjoint output blocks and read-only inputs for the call's duration.
unsafe impl<T> Send for Operands<T> {}
unsafe impl<T> Sync for Operands<T> {}

unsafe fn sgemm(o: Operands<f32>) {
    matrixmultiply::sgemm(
        o.m,
        o.k,
        o.n,
        1.0,
        o.a,
        o.rsa,
        o.csa,
        o.b,
        o.rsb,
        o.csb,
        0.0,
        o.c,
        o.n as isize,
        1,
    );
}
unsafe fn dgemm(o: Operands<f64>) {
    matrixmultiply::dgemm(
        o.m,
        o.k,
        o.n,
        1.0,
        o.a,
        o.rsa,
        o.csa,
        o.b,
        o.rsb,
        o.csb,
        0.0,
        o.c,
        o.n as isize,
        1,
    );
}

fn run<T: Copy + Default + Send + Sync>(
    av: &[T],
    al: &Layout,
    bv: &[T],
    bl: &Layout,
    out: &mut [T],
    f: impl Fn(Operands<T>) + Sync,
) {
    let (bs, m, k) = (al.shape[0], al.shape[1], al.shape[2]);
    let n = bl.shape[2];
    if m == 0 || n == 0 {
        return;
    }
    let one = |bi: usize, c: &mut [T]| {
        if k == 0 {
            c.iter_mut().for_each(|x| *x = T::default());
            return;
        }
        // SAFETY: the op layer validated the layouts, so every addressed element is in bounds.
        let o = unsafe {
            Operands {
                a: av.as_ptr().add(al.offset + bi * al.strides[0]),
                b: bv.as_ptr().add(bl.offset + bi * bl.strides[0]),
                c: c.as_mut_ptr(),
                m,
                k,
                n,
                rsa: al.strides[1] as isize,
                csa: al.strides[2] as isize,
                rsb: bl.strides[1] as isize,
                csb: bl.strides[2] as isize,
            }
        };
        f(o);
    };
    // Large products thread inside matrixmultiply; many small ones run in parallel over the batch.
    if m * n * k >= 96 * 96 * 96 || bs == 1 {
        out.chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, c)| one(bi, c));
    } else {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, c)| one(bi, c));
    }
}
