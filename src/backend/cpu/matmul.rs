//! Batched matrix multiply on the CPU: one [`gemm`] per batch entry, in parallel over the batch
//! when the products are small. Half types compute in f32 and round once: bf16 on AMX tiles
//! where the CPU has them ([`amx`]), otherwise widened to f32 (see [`half_f32`] for why bf16
//! does not multiply with `vdpbf16ps`).

#[cfg(target_arch = "x86_64")]
use super::gemm::amx;
use super::gemm::gemm;
use super::{half_f32, pool, CpuStorage};
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
        #[cfg(target_arch = "x86_64")]
        (CpuStorage::BF16(av), CpuStorage::BF16(bv)) if amx::enabled() => {
            // bf16 on AMX tiles: f32 sums of the bf16 operands as they are, rounded once.
            let mut of = pool::any(bs * m * n);
            run(av, al, bv, bl, &mut of, |a, sa, b, sb, c| {
                amx::gemm_bf16(m, al.shape[2], n, a, sa, b, sb, c, n)
            });
            let out = half_f32::narrow(&of, half_f32::Half::BF16);
            pool::give_back(of);
            out
        }
        _ => {
            // Half types (the op layer admits float operands of one dtype): widen the storages
            // to f32, multiply, round once.
            assert_eq!(a.dtype(), b.dtype(), "matmul: operands share a dtype");
            let widen = |s| half_f32::widen(s).expect("matmul: a float dtype");
            let ((af, half), (bf, _)) = (widen(a), widen(b));
            let mut of = pool::any(bs * m * n);
            run(&af, al, &bf, bl, &mut of, |a, sa, b, sb, c| {
                gemm(m, al.shape[2], n, a, sa, b, sb, 0.0, c, n)
            });
            let out = half_f32::narrow(&of, half);
            for v in [af, bf, of] {
                pool::give_back(v);
            }
            out
        }
    }
}

/// Products at least this many multiply-adds run one after another, each split over the
/// threads inside `gemm`; smaller ones run in parallel over the batch.
const SPLIT_MACS: usize = 1 << 21;

fn run<T: Sync, U: Copy + Default + Send>(
    av: &[T],
    al: &Layout,
    bv: &[T],
    bl: &Layout,
    out: &mut [U],
    f: impl Fn(&[T], [usize; 2], &[T], [usize; 2], &mut [U]) + Sync,
) {
    let (bs, m, k) = (al.shape[0], al.shape[1], al.shape[2]);
    let n = bl.shape[2];
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // Sums of no products; the operands (which may start past their storage's end, as a
        // slice of an empty tensor does) are not read.
        out.fill(U::default());
        return;
    }
    let one = |bi: usize, c: &mut [U]| {
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
