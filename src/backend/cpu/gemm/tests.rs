//! Every microkernel against a scalar reference, on shapes that cross the blocking (`KC`, `MC`,
//! `NC`), edge tiles, transposed operands, and each `beta`.

use super::*;

/// A deterministic pseudo-random matrix in [-1, 1) (the Winograd tests use it too).
pub(in crate::backend::cpu) fn mat(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// `beta·c + a·b` in f64, strided as `gemm` takes them.
#[allow(clippy::too_many_arguments)]
fn reference(
    m: usize,
    k: usize,
    n: usize,
    a: &[f64],
    sa: [usize; 2],
    b: &[f64],
    sb: [usize; 2],
    beta: f64,
    c: &[f64],
) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| a[i * sa[0] + p * sa[1]] * b[p * sb[0] + j * sb[1]])
                .sum();
            out[i * n + j] = if beta == 0.0 {
                s
            } else {
                beta * c[i * n + j] + s
            };
        }
    }
    out
}

/// Run one product on every path (f32 kernels for each ISA, f64) and compare: A and B dense,
/// row-major or (`ta`, `tb`) column-major.
fn check(m: usize, k: usize, n: usize, ta: bool, tb: bool, beta: f64) {
    let sa = if ta { [1, m] } else { [k, 1] };
    let sb = if tb { [1, k] } else { [n, 1] };
    check_strided(m, k, n, sa, sb, beta);
}

/// [`check`] with any (row, column) strides for A and B.
fn check_strided(m: usize, k: usize, n: usize, sa: [usize; 2], sb: [usize; 2], beta: f64) {
    let extent =
        |rows: usize, cols: usize, s: [usize; 2]| (rows - 1) * s[0] + (cols - 1) * s[1] + 1;
    let (a, b) = (mat(extent(m, k, sa), 1), mat(extent(k, n, sb), 2));
    let (ta, tb) = (sa[1] != 1, sb[1] != 1);
    let c0 = mat(m * n, 3);
    let want = reference(m, k, n, &a, sa, &b, sb, beta, &c0);
    let tol = 1e-5 * (k as f64).sqrt() * 4.0;
    let (af, bf): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&v| v as f32).collect(),
        b.iter().map(|&v| v as f32).collect(),
    );
    for kern in [Isa::Baseline, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .flat_map(f32::kernels)
    {
        // beta = 0 must ignore C's old contents, NaN included.
        let mut c: Vec<f32> = if beta == 0.0 {
            vec![f32::NAN; m * n]
        } else {
            c0.iter().map(|&v| v as f32).collect()
        };
        let (sra, srb) = (
            Strided {
                data: &af[..],
                rs: sa[0],
                cs: sa[1],
            },
            Strided {
                data: &bf[..],
                rs: sb[0],
                cs: sb[1],
            },
        );
        gemm_src(m, k, n, &sra, &srb, beta as f32, &mut c, n, kern);
        for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol,
                "{:?} {}×{} kernel, {m}×{k}×{n} ta {ta} tb {tb} beta {beta}: [{i}] {g} vs {w}",
                kern.isa,
                kern.mr,
                kern.nr
            );
        }
    }
    // The f32 entry point (its matrix-vector paths included).
    let mut c: Vec<f32> = if beta == 0.0 {
        vec![f32::NAN; m * n]
    } else {
        c0.iter().map(|&v| v as f32).collect()
    };
    gemm(m, k, n, &af, sa, &bf, sb, beta as f32, &mut c, n);
    for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol,
            "f32 gemm {m}×{k}×{n} ta {ta} tb {tb} beta {beta}: [{i}] {g} vs {w}"
        );
    }
    let mut c = if beta == 0.0 {
        vec![f64::NAN; m * n]
    } else {
        c0.clone()
    };
    gemm(m, k, n, &a, sa, &b, sb, beta, &mut c, n);
    for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * k as f64,
            "f64 {m}×{k}×{n}: [{i}] {g} vs {w}"
        );
    }
}

#[test]
fn every_kernel_matches_the_reference() {
    // Edge tiles in both directions, one full tile, a single slice.
    check(13, 7, 37, false, false, 0.0);
    check(12, 5, 32, false, false, 1.0);
    // Deeper than KC, taller than MC, wider than NC (blocks and their edges).
    check(250, 300, 9, false, true, 0.5);
    check(7, 260, 530, true, false, 1.0);
    check(30, 40, 50, true, true, 0.0);
    // A row-major A read in place, and packed because its rows are 4 KiB apart (f32; C wider
    // than the 12×32 and 6×16 kernels' panels, though one 8×48 panel)...
    check(25, 30, 100, false, false, 1.0);
    check(13, 1024, 40, false, false, 1.0);
    // ... and read in place all the same when C is one panel wide.
    check(13, 1024, 27, false, false, 0.0);
    // Neither stride 1 (packed by gathers); rows of the transposed tiles past KC and the panel.
    check_strided(20, 400, 37, [3, 2 * 20 + 1], [2, 3 * 400 + 2], 1.0);
    check_strided(9, 33, 50, [2 * 33 + 1, 2], [1, 33], 0.5);
}

#[test]
fn each_product_takes_the_tile_that_pads_least() {
    let k = |mr, nr| {
        let mut k: Kernel<f32> = f32::kernels(Isa::Baseline)[0];
        (k.mr, k.nr) = (mr, nr);
        k
    };
    let set = [k(12, 32), k(8, 48)];
    let pick = |m, n| {
        let f = kernel::fitted(&set, m, n);
        (f.mr, f.nr)
    };
    assert_eq!(pick(64, 3136), (8, 48));
    assert_eq!(pick(512, 49), (12, 32));
    assert_eq!(pick(96, 96), (12, 32)); // a tie keeps the first
}

#[test]
fn vectors_and_empty_products() {
    // m = 1, n = 1 and m ≤ FEW_ROWS with B's columns contiguous take the matrix-vector path
    // (m = 2 with a row-major B the packed kernels); both layouts of the matrix.
    for (m, n) in [
        (1, 300),
        (300, 1),
        (1, 1),
        (2, 300),
        (2, 17),
        (3, 9),
        (4, 1),
    ] {
        for (ta, tb) in [(false, false), (true, true)] {
            check(m, 70, n, ta, tb, 0.0);
            check(m, 70, n, ta, tb, 2.0);
        }
    }
    // Neither stride 1 (one row: B's rows updated element by element), and large enough to
    // split.
    check_strided(1, 33, 50, [2 * 33 + 1, 2], [2, 3 * 33 + 2], 0.5);
    check(2, 700, 400, false, true, 0.0);
    check(1, 700, 800, false, false, 1.0);
    // C rows wider than the product (ldc > n): the padding is left as it was.
    for (m, tb) in [(1, false), (2, true), (5, false)] {
        let (k, n, ldc) = (70, 9, 12);
        let sb = if tb { [1, k] } else { [n, 1] };
        let (a, b) = (mat(m * k, 8), mat(k * n, 9));
        let want = reference(m, k, n, &a, [k, 1], &b, sb, 0.0, &[]);
        let mut c = vec![7.0f64; m * ldc];
        gemm(m, k, n, &a, [k, 1], &b, sb, 0.0, &mut c, ldc);
        for (r, row) in c.chunks(ldc).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                if j < n {
                    assert!(
                        (v - want[r * n + j]).abs() < 1e-12 * k as f64,
                        "{m} rows: [{r}, {j}]"
                    );
                } else {
                    assert_eq!(v, 7.0, "{m} rows: padding [{r}, {j}] written");
                }
            }
        }
    }
    // k = 0: C = beta·C (beta = 0 writes zeros over NaN).
    let mut c = vec![f32::NAN; 6];
    gemm::<f32>(2, 0, 3, &[], [0, 1], &[], [3, 1], 0.0, &mut c, 3);
    assert_eq!(c, vec![0.0; 6]);
    let mut c = vec![2.0f32; 6];
    gemm::<f32>(2, 0, 3, &[], [0, 1], &[], [3, 1], 0.5, &mut c, 3);
    assert_eq!(c, vec![1.0; 6]);
}

/// B packed once gives the bits of packing it block by block, with the same kernel: depths and
/// widths across `KC` and `NC`, edge panels, a transposed B, each `beta`, rows split over
/// threads or columns, f32 on this CPU's kernels and f64.
#[test]
fn packed_b_matches_packing_per_product() {
    fn check<T: Gemm + From<f32>>(m: usize, k: usize, n: usize, tb: bool, beta: f32) {
        let cv = |x: f32| <T as From<f32>>::from(x);
        let f = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| cv(x as f32)).collect() };
        let (a, b, c0) = (f(&mat(m * k, 11)), f(&mat(k * n, 12)), f(&mat(m * n, 13)));
        let sb = if tb { [1, k] } else { [n, 1] };
        let kernel = T::kernel(m, n);
        let (mut want, mut got) = (c0.clone(), c0);
        let (sa, sbs) = (
            Strided {
                data: &a[..],
                rs: k,
                cs: 1,
            },
            Strided {
                data: &b[..],
                rs: sb[0],
                cs: sb[1],
            },
        );
        gemm_src(m, k, n, &sa, &sbs, cv(beta), &mut want, n, kernel);
        let packed = PackedB::new(m, k, n, &b, sb);
        gemm_packed(m, &a, [k, 1], &packed, cv(beta), &mut got, n);
        let bits = |v: &[T]| {
            v.iter()
                .map(|x| x.to_f64().map(f64::to_bits))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bits(&got),
            bits(&want),
            "{m}×{k}×{n}, transposed B {tb}, beta {beta}"
        );
    }
    for (m, k, n) in [
        (20, 200, 800),
        (7, 400, 500),
        (300, 400, 21),
        (1, 5, 3),
        (4, 0, 6),
    ] {
        for tb in [false, true] {
            for beta in [0.0, 1.0] {
                check::<f32>(m, k, n, tb, beta);
                check::<f64>(m, k, n, tb, beta);
            }
        }
    }
}

#[test]
fn results_do_not_depend_on_the_split() {
    // Large enough to split over the threads; the same bits as one task.
    let (m, k, n) = (96, 200, 700);
    let (a, b): (Vec<f32>, Vec<f32>) = (
        mat(m * k, 4).iter().map(|&v| v as f32).collect(),
        mat(k * n, 5).iter().map(|&v| v as f32).collect(),
    );
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let run = |pool: &rayon::ThreadPool| {
        let mut c = vec![0f32; m * n];
        pool.install(|| gemm(m, k, n, &a, [k, 1], &b, [n, 1], 0.0, &mut c, n));
        c
    };
    assert_eq!(run(&one), run(&two));
    // Two rows and a transposed B (the matrix-vector path, split by columns; a row-major B
    // takes it for one row): the same bits on any thread count, and each row the same bits as
    // that row alone.
    let (m, k, n) = (2, 700, 400);
    let (a, b): (Vec<f32>, Vec<f32>) = (
        mat(m * k, 6).iter().map(|&v| v as f32).collect(),
        mat(k * n, 7).iter().map(|&v| v as f32).collect(),
    );
    let run = |pool: &rayon::ThreadPool, rows: usize, a: &[f32]| {
        let mut c = vec![0f32; rows * n];
        pool.install(|| gemm(rows, k, n, a, [k, 1], &b, [1, k], 0.0, &mut c, n));
        c
    };
    let all = run(&two, m, &a);
    assert_eq!(all, run(&one, m, &a));
    for i in 0..m {
        let row = run(&two, 1, &a[i * k..(i + 1) * k]);
        assert_eq!(&all[i * n..(i + 1) * n], &row[..], "row {i}");
    }
}

/// Products split over pieces that share an operand packed once (A when C is split by columns,
/// B by rows): A row-major with rows 4 KiB apart or transposed, B row-major or transposed, each
/// `beta`, and a shared operand deeper than `KC` and wider than `MC` and `NC`; the reference's
/// values on one thread, two and three (one thread splits by columns too), and the same bits on
/// each.
#[test]
fn operands_packed_once_for_all_pieces() {
    let pools: Vec<rayon::ThreadPool> = [1, 2, 3]
        .map(|t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        })
        .into();
    // (m, k, n, transposed A and B, beta): split by columns (A shared) and by rows (B shared),
    // every layout and beta; then a shared A of 600 rows (past `MC` and `NC`: several blocks of
    // panels) and a shared B of 600 columns.
    let layouts = [(false, false), (true, false), (false, true), (true, true)];
    let small = [
        (40, 1024, 700),
        (130, 800, 1000),
        (700, 900, 40),
        (500, 400, 130),
    ];
    let cases = small
        .into_iter()
        .flat_map(|(m, k, n)| {
            layouts.map(|(ta, tb)| [0.0, 0.5].map(|beta| (m, k, n, ta, tb, beta)))
        })
        .flatten()
        .chain([
            (600, 500, 1300, true, false, 0.5),
            (1300, 500, 600, false, false, 0.5),
        ]);
    for (m, k, n, ta, tb, beta) in cases {
        let sa = if ta { [1, m] } else { [k, 1] };
        let sb = if tb { [1, k] } else { [n, 1] };
        let (a, b, c0) = (mat(m * k, 21), mat(k * n, 22), mat(m * n, 23));
        let want = reference(m, k, n, &a, sa, &b, sb, beta, &c0);
        let f = |v: &[f64]| -> Vec<f32> { v.iter().map(|&x| x as f32).collect() };
        let (af, bf) = (f(&a), f(&b));
        let got: Vec<Vec<f32>> = pools
            .iter()
            .map(|pool| {
                let mut c = f(&c0);
                pool.install(|| gemm(m, k, n, &af, sa, &bf, sb, beta as f32, &mut c, n));
                c
            })
            .collect();
        let case = format!("{m}×{k}×{n}, transposed A {ta} B {tb}, beta {beta}");
        for (i, (g, w)) in got[0].iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - w).abs() <= 1e-4,
                "{case}: [{i}] {g} against {w}"
            );
        }
        assert_eq!(got[0], got[1], "{case}: one thread against two");
        assert_eq!(got[0], got[2], "{case}: one thread against three");
    }
}

/// The matrix-vector products' AVX-512, AVX2 and baseline copies give the same bits (a set
/// the CPU lacks runs the widest below it), for one row and two, with a tail shorter than the
/// running sums and a column stride longer than a column.
#[test]
fn every_instruction_set_gives_the_same_dots() {
    let (k, n) = (2 * DOT_LANES + 5, 7);
    let ld = k + 4;
    let f = |len, seed| -> Vec<f32> { mat(len, seed).iter().map(|&v| v as f32).collect() };
    let (x, b) = (f(2 * k, 61), f(ld * n + 3, 62));
    let xs = [x[..k].to_vec(), x[k..].to_vec()];
    for m in [1, 2] {
        let run = |isa| {
            let mut o = vec![0f32; m * n];
            dots_on(isa, &xs[..m], &b[3..], ld, &mut o);
            o.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let want = run(Isa::Baseline);
        let exact = reference(
            m,
            k,
            n,
            &mat(2 * k, 61),
            [k, 1],
            &mat(ld * n + 3, 62)[3..],
            [1, ld],
            0.0,
            &[],
        );
        for (i, &w) in want.iter().enumerate() {
            assert!(
                (f32::from_bits(w) as f64 - exact[i]).abs() < 1e-5 * k as f64,
                "{m} rows: {i}"
            );
        }
        for isa in [Isa::Avx2, Isa::Avx512] {
            assert_eq!(run(isa), want, "{m} rows, {isa:?}");
        }
    }
}

#[test]
#[should_panic(expected = "gemm: operand out of bounds")]
fn out_of_bounds_operands_are_refused() {
    let mut c = vec![0f32; 4];
    gemm::<f32>(
        2,
        3,
        2,
        &[0.0; 5],
        [3, 1],
        &[0.0; 6],
        [2, 1],
        0.0,
        &mut c,
        2,
    );
}

/// AMX bf16 products (where the CPU and OS offer them) against f64 sums of the same bf16
/// values: shapes with edge blocks on every side, depths that are not a multiple of the tile's
/// 32, transposed and strided operands, a split over threads, and a C with a wider row stride
/// whose padding must stay untouched.
#[cfg(target_arch = "x86_64")]
#[test]
fn amx_bf16_matches_reference() {
    use half::bf16;
    if !amx::available() {
        eprintln!("amx_bf16_matches_reference: no AMX on this machine, not run");
        return;
    }
    // (m, k, n, A's strides, B's strides)
    type Case = (usize, usize, usize, [usize; 2], [usize; 2]);
    let cases: &[Case] = &[
        (1, 1, 1, [1, 1], [1, 1]),
        (5, 7, 3, [7, 1], [3, 1]),
        (16, 32, 16, [32, 1], [16, 1]),
        (33, 65, 47, [1, 33], [47, 1]),
        (40, 100, 70, [100, 1], [1, 100]),
        (70, 33, 200, [1, 70], [1, 33]),
        (9, 50, 31, [100, 2], [62, 2]),
        (300, 257, 260, [257, 1], [260, 1]),
        // Deeper than a slice (512) with edge blocks summed across slices, and wider than a
        // chunk of column blocks (512).
        (37, 1100, 600, [1100, 1], [600, 1]),
        (50, 1030, 530, [1, 50], [1, 1030]),
    ];
    for &(m, k, n, sa, sb) in cases {
        let extent =
            |rows: usize, cols: usize, s: [usize; 2]| (rows - 1) * s[0] + (cols - 1) * s[1] + 1;
        let a: Vec<bf16> = mat(extent(m, k, sa), 4)
            .iter()
            .map(|&v| bf16::from_f64(v))
            .collect();
        let b: Vec<bf16> = mat(extent(k, n, sb), 5)
            .iter()
            .map(|&v| bf16::from_f64(v))
            .collect();
        let (af, bf): (Vec<f64>, Vec<f64>) = (
            a.iter().map(|v| v.to_f64()).collect(),
            b.iter().map(|v| v.to_f64()).collect(),
        );
        let want = reference(m, k, n, &af, sa, &bf, sb, 0.0, &[]);
        let ldc = n + 3;
        let mut c = vec![f32::NAN; (m - 1) * ldc + n + 3];
        amx::gemm_bf16(m, k, n, &a, sa, &b, sb, &mut c, ldc);
        let tol = 1e-6 * k as f64;
        for i in 0..m {
            for j in 0..n {
                let (got, w) = (c[i * ldc + j] as f64, want[i * n + j]);
                assert!(
                    (got - w).abs() <= tol,
                    "{m}x{k}x{n} [{i},{j}]: {got} vs {w}"
                );
            }
            let pad = if i + 1 < m { n..ldc } else { n..n + 3 };
            assert!(
                c[i * ldc..][pad].iter().all(|v| v.is_nan()),
                "{m}x{k}x{n}: C's padding written"
            );
        }
    }
    // No depth: zeros.
    let mut c = vec![f32::NAN; 6];
    amx::gemm_bf16(2, 0, 3, &[], [0, 1], &[], [3, 1], &mut c, 3);
    assert_eq!(c, [0.0; 6]);
}
