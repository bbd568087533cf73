//! The GEMM crates a user could pick instead of wgtorch's own kernels, on the same products and
//! threads: `gemm` (its own AVX-512 kernels, rayon) and `matrixmultiply` (AVX2 kernels,
//! single-threaded), which wgtorch used before its own kernels.

use super::median;
use std::time::Instant;

/// Print wgtorch's kernel choice, then one row per crate and size (256³ to 1024³, f32).
pub fn rows() {
    println!(
        "| cpu (wgtorch's f32 GEMM kernel: {}) | - | - | - | - |",
        wgtorch::backend::cpu::gemm_kernel()
    );
    for n in [256usize, 512, 1024] {
        let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut c = vec![0f32; n * n];
        type Run<'a> = &'a dyn Fn(&mut [f32]);
        let crates: [(&str, Run); 2] = [
            ("gemm crate, 2 threads", &|c: &mut [f32]| {
                // SAFETY: row-major n×n buffers of the right length.
                unsafe {
                    gemm::gemm(
                        n,
                        n,
                        n,
                        c.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        a.as_ptr(),
                        1,
                        n as isize,
                        a.as_ptr(),
                        1,
                        n as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(2),
                    )
                }
            }),
            ("matrixmultiply crate, 1 thread", &|c: &mut [f32]| {
                let (p, s) = (a.as_ptr(), n as isize);
                // SAFETY: row-major n×n buffers of the right length.
                unsafe {
                    matrixmultiply::sgemm(n, n, n, 1.0, p, s, 1, p, s, 1, 0.0, c.as_mut_ptr(), s, 1)
                }
            }),
        ];
        for (label, run) in crates {
            let ts = (0..5)
                .map(|_| {
                    let t0 = Instant::now();
                    run(&mut c);
                    t0.elapsed().as_secs_f64()
                })
                .collect();
            let t = median(ts);
            println!(
                "| cpu ({label}, for comparison) | matmul f32 | {n}³ | {:.2} | {:.1} GFLOP/s |",
                t * 1e3,
                2.0 * (n * n * n) as f64 / t / 1e9
            );
        }
    }
}
