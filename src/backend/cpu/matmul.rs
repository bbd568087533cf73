//! CPU matrix multiply through the `gemm` crate (packed, SIMD, rayon-parallel; chosen over
//! `matrixmultiply` for its f16 support and AVX-512 kernels; see the benchmark).

use super::{with_cpu, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::shape::Layout;
use gemm::{gemm, Parallelism};
use rayon::prelude::*;

/// Batched `a @ b` with `a` laid out as `[B, M, K]` and `b` as `[B, K, N]` (any strides, batch
/// stride 0 for broadcast). Returns a contiguous `[B, M, N]`.
pub(crate) fn matmul(a: &CpuStorage, al: &Layout, b: &CpuStorage, bl: &Layout) -> CpuStorage {
    let (bs, m, k) = (al.shape[0], al.shape[1], al.shape[2]);
    let n = bl.shape[2];
    with_cpu!(a, av, T => {
        let bv = T::slice(b).expect("matmul: same dtype");
        let mut out = vec![T::default(); bs * m * n];
        match T::DTYPE {
            crate::DType::F32 => run::<f32>(cast_slice(av), al, cast_slice(bv), bl, cast_slice_mut(&mut out), bs, m, n, k),
            crate::DType::F64 => run::<f64>(cast_slice(av), al, cast_slice(bv), bl, cast_slice_mut(&mut out), bs, m, n, k),
            crate::DType::F16 => run::<gemm::f16>(cast_slice(av), al, cast_slice(bv), bl, cast_slice_mut(&mut out), bs, m, n, k),
            _ => {
                // bf16 (and anything else): compute in f32, round once.
                let af: Vec<f32> = av.iter().map(|x| x.to_f64() as f32).collect();
                let bf: Vec<f32> = bv.iter().map(|x| x.to_f64() as f32).collect();
                let mut of = vec![0f32; bs * m * n];
                run::<f32>(&af, al, &bf, bl, &mut of, bs, m, n, k);
                for (o, v) in out.iter_mut().zip(of) {
                    *o = T::from_f64(v as f64);
                }
            }
        }
        T::wrap(out)
    })
}

fn cast_slice<S, D>(s: &[S]) -> &[D] {
    assert_eq!(std::mem::size_of::<S>(), std::mem::size_of::<D>());
    // SAFETY: called only with S and D the same type (or half::f16 vs gemm::f16, the same type).
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const D, s.len()) }
}
fn cast_slice_mut<S, D>(s: &mut [S]) -> &mut [D] {
    assert_eq!(std::mem::size_of::<S>(), std::mem::size_of::<D>());
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut D, s.len()) }
}

#[allow(clippy::too_many_arguments)]
fn run<T: Copy + 'static + Send + Sync + num_traits::Zero + num_traits::One>(
    av: &[T],
    al: &Layout,
    bv: &[T],
    bl: &Layout,
    out: &mut [T],
    bs: usize,
    m: usize,
    n: usize,
    k: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let big = m * n * k >= 96 * 96 * 96;
    let threads = rayon::current_num_threads();
    let one = |bi: usize, o: &mut [T], par: Parallelism| {
        if k == 0 {
            o.iter_mut().for_each(|x| *x = T::zero());
            return;
        }
        let ap = unsafe { av.as_ptr().add(al.offset + bi * al.strides[0]) };
        let bp = unsafe { bv.as_ptr().add(bl.offset + bi * bl.strides[0]) };
        // SAFETY: the layouts were validated by the op layer; every index stays inside storage.
        unsafe {
            gemm(
                m,
                n,
                k,
                o.as_mut_ptr(),
                1,
                n as isize,
                false,
                ap,
                al.strides[2] as isize,
                al.strides[1] as isize,
                bp,
                bl.strides[2] as isize,
                bl.strides[1] as isize,
                T::zero(),
                T::one(),
                false,
                false,
                false,
                par,
            )
        }
    };
    if big || bs == 1 {
        let par = if big && threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        for (bi, o) in out.chunks_mut(m * n).enumerate() {
            one(bi, o, par);
        }
    } else {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, o)| one(bi, o, Parallelism::None));
    }
}
