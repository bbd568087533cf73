//! llvmpipe's loop cap (issue #11, found with defect 1): lavapipe ends an invocation's loops
//! after 65,535 iterations in total, so every kernel whose loop length follows the data splits
//! it there. Each family is run just past the cap on the GPU and compared with the CPU; the
//! values are small integers, so both sums are exact and must agree bit for bit.

use crate::common;
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Tensor};

/// Just past llvmpipe's 65,535 loop iterations.
const PAST: usize = 70_001;

/// Small integer values (-2..=2) in `shape` on the CPU.
fn ints(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 7 + seed) % 5) as f32 - 2.0).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// `f` on the CPU tensors and on their GPU copies agree exactly.
fn same_on_gpu(what: &str, g: &Device, xs: &[&Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    let cpu: Vec<Tensor> = xs.iter().map(|&x| x.clone()).collect();
    let gpu: Vec<Tensor> = xs.iter().map(|x| x.to(g).unwrap()).collect();
    let (want, got) = (common::vals(&f(&cpu)), common::vals(&f(&gpu)));
    assert!(want == got, "{what}: the GPU differs from the CPU");
}

#[test]
fn matmul_k_past_loop_cap() {
    let Some(g) = common::gpu() else { return };
    let a = Tensor::ones([1, PAST], &g).unwrap();
    let b = Tensor::ones([PAST, 1], &g).unwrap();
    assert_eq!(common::vals(&a.matmul(&b).unwrap()), [PAST as f64]);
    let (a, b) = (ints(&[3, PAST], 1), ints(&[PAST, 2], 2));
    same_on_gpu("matmul (strided)", &g, &[&a, &b], |t| {
        t[0].matmul(&t[1]).unwrap()
    });
    // K a multiple of 4 with aligned operands: the vec4 kernel's K / 4 passes the cap too.
    let k4 = 4 * 65_540;
    let (a, b) = (ints(&[4, k4], 3), ints(&[k4, 4], 4));
    same_on_gpu("matmul (vec4 layouts)", &g, &[&a, &b], |t| {
        t[0].matmul(&t[1]).unwrap()
    });
    let (a, b) = (ints(&[2, 1, PAST], 5), ints(&[2, PAST, 3], 6));
    same_on_gpu("bmm", &g, &[&a, &b], |t| t[0].bmm(&t[1]).unwrap());
    let (x, w, bias) = (ints(&[2, PAST], 7), ints(&[3, PAST], 8), ints(&[3], 9));
    same_on_gpu("linear", &g, &[&x, &w, &bias], |t| {
        t[0].linear(&t[1], Some(&t[2])).unwrap()
    });
}

/// conv2d's output and both gradients (of `sum()`), as one flat vector.
fn conv_all(t: &[Tensor], padding: usize) -> Tensor {
    let x = t[0].clone().requires_grad_(true);
    let w = t[1].clone().requires_grad_(true);
    let b = t[2].clone().requires_grad_(true);
    let y = F::conv2d_with(
        &x,
        &w,
        Some(&b),
        F::Conv2dFuncOptions {
            padding: [padding; 2].into(),
            ..Default::default()
        },
    )
    .unwrap();
    y.sum_all().unwrap().backward().unwrap();
    let flat = |t: &Tensor| t.reshape([-1]).unwrap();
    let parts = [
        flat(&y.detach()),
        flat(&x.grad().unwrap()),
        flat(&w.grad().unwrap()),
        flat(&b.grad().unwrap()),
    ];
    Tensor::cat(&parts, 0).unwrap()
}

#[test]
fn conv2d_gemm_k_past_loop_cap() {
    let Some(g) = common::gpu() else { return };
    // Forward K = Cin*kh*kw = 7,779 * 9 = 70,011; input-gradient K = Cout*kh*kw likewise.
    let c = 7_779;
    let (x, w, b) = (
        ints(&[1, c, 3, 3], 1),
        ints(&[2, c, 3, 3], 2),
        ints(&[2], 3),
    );
    same_on_gpu("conv2d forward K", &g, &[&x, &w, &b], |t| conv_all(t, 0));
    let (x, w, b) = (
        ints(&[1, 1, 2, 2], 4),
        ints(&[c, 1, 3, 3], 5),
        ints(&[c], 6),
    );
    same_on_gpu("conv2d input-gradient K", &g, &[&x, &w, &b], |t| {
        conv_all(t, 1)
    });
    // Weight-gradient K = N*Ho*Wo = 265 * 265 = 70,225 on one sample (no batch to split).
    let (x, w, b) = (
        ints(&[1, 1, 265, 265], 7),
        ints(&[1, 1, 1, 1], 8),
        ints(&[1], 9),
    );
    same_on_gpu("conv2d weight-gradient K", &g, &[&x, &w, &b], |t| {
        conv_all(t, 0)
    });
}

#[test]
fn cumsum_row_past_loop_cap() {
    let Some(g) = common::gpu() else { return };
    let x = Tensor::ones([PAST], &g).unwrap();
    let last = common::vals(&x.cumsum(0).unwrap())[PAST - 1];
    assert_eq!(last, PAST as f64, "cumsum of ones lost its tail");
    let x = ints(&[2, 2 * PAST], 1);
    same_on_gpu("cumsum f32", &g, &[&x], |t| t[0].cumsum(1).unwrap());
    let x = x.to_dtype(DType::I32).unwrap();
    same_on_gpu("cumsum i32", &g, &[&x], |t| t[0].cumsum(1).unwrap());
}

#[test]
fn scatter_add_index_past_loop_cap() {
    let Some(g) = common::gpu() else { return };
    let idx: Vec<i32> = (0..PAST).map(|i| (i % 3) as i32).collect();
    let idx = Tensor::from_vec(idx, [PAST], &Device::Cpu).unwrap();
    let src = ints(&[PAST], 2);
    let base = ints(&[3], 3);
    same_on_gpu("scatter_add", &g, &[&base, &idx, &src], |t| {
        t[0].scatter_add(0, &t[1], &t[2]).unwrap()
    });
    let ones = Tensor::ones([PAST], &g).unwrap();
    let counts = Tensor::zeros([3], &g)
        .unwrap()
        .scatter_add(0, &idx.to(&g).unwrap(), &ones)
        .unwrap();
    assert_eq!(common::vals(&counts), [23_334.0, 23_334.0, 23_333.0]);
    // The index above is one line (the sorted kernel takes it, in chunks of sorted entries): one
    // position whose run of entries crosses the chunks, and a bad index sorted into the last.
    let zeros = Tensor::zeros([PAST], &g)
        .unwrap()
        .to_dtype(DType::I32)
        .unwrap();
    let one = Tensor::zeros([1], &g)
        .unwrap()
        .scatter_add(0, &zeros, &ones)
        .unwrap();
    assert_eq!(common::vals(&one), [PAST as f64]);
    let mut bad: Vec<i32> = vec![0; PAST];
    bad[PAST - 1] = 3;
    let bad = Tensor::from_vec(bad, [PAST], &g).unwrap();
    let r = Tensor::zeros([3], &g).unwrap().scatter_add(0, &bad, &ones);
    let e = r.and_then(|t| t.to_vec::<f32>()).unwrap_err().to_string();
    assert_eq!(
        e,
        "scatter_add: index 3 is out of bounds for dimension 0 with size 3"
    );
    // An index that differs between lines takes the one-pass kernel, in chunks along `dim`.
    let rows: Vec<i32> = (0..2 * PAST).map(|i| ((i / PAST + i) % 3) as i32).collect();
    let idx = Tensor::from_vec(rows, [2, PAST], &Device::Cpu).unwrap();
    let (src, base) = (ints(&[2, PAST], 4), ints(&[2, 3], 5));
    same_on_gpu("scatter_add (two lines)", &g, &[&base, &idx, &src], |t| {
        t[0].scatter_add(1, &t[1], &t[2]).unwrap()
    });
}

/// Dispatches `f` records, the fewest over a few tries (other tests share the context's count;
/// they can only add to it).
fn dispatches(f: impl Fn()) -> u64 {
    let ctx = wgtorch::backend::gpu::context(0).expect("GPU context");
    (0..10)
        .map(|_| {
            let before = ctx.stats().dispatches;
            f();
            ctx.stats().dispatches - before
        })
        .min()
        .unwrap()
}

#[test]
fn matmul_below_loop_cap_is_one_dispatch() {
    let Some(g) = common::gpu() else { return };
    let (a, b) = (
        ints(&[8, 1000], 1).to(&g).unwrap(),
        ints(&[1000, 8], 2).to(&g).unwrap(),
    );
    assert_eq!(dispatches(|| drop(a.matmul(&b).unwrap())), 1);
    let (a, b) = (
        ints(&[8, 999], 1).to(&g).unwrap(),
        ints(&[999, 8], 2).to(&g).unwrap(),
    );
    assert_eq!(dispatches(|| drop(a.matmul(&b).unwrap())), 1);
    // Past the cap on llvmpipe: split into launches (one elsewhere).
    let (a, b) = (
        ints(&[1, PAST], 1).to(&g).unwrap(),
        ints(&[PAST, 1], 2).to(&g).unwrap(),
    );
    let ctx = wgtorch::backend::gpu::context(0).unwrap();
    let want = if ctx.is_cpu_adapter() && ctx.describe().contains("llvmpipe") {
        2
    } else {
        1
    };
    assert_eq!(dispatches(|| drop(a.matmul(&b).unwrap())), want);
}

#[test]
fn max_pool_window_past_loop_cap() {
    let Some(g) = common::gpu() else { return };
    let x = ints(&[1, 1, 256, 256], 1);
    let pool = |t: &[Tensor], k: usize| {
        F::max_pool2d_with(
            &t[0],
            [k, k],
            F::MaxPool2dOptions {
                stride: Some([1, 1].into()),
                ..Default::default()
            },
        )
    };
    // 255 rows of 255 + 1 iterations fit; 256 rows of 256 + 1 do not.
    same_on_gpu("max_pool2d 255x255", &g, &[&x], |t| pool(t, 255).unwrap());
    let ctx = wgtorch::backend::gpu::context(0).unwrap();
    let on_gpu = pool(&[x.to(&g).unwrap()], 256);
    if ctx.describe().contains("llvmpipe") {
        let Err(e) = on_gpu else {
            panic!("a 256x256 window must be refused on llvmpipe")
        };
        let msg = e.to_string();
        eprintln!("{msg}");
        assert!(matches!(e, wgtorch::Error::GpuLimit { .. }), "{msg}");
        assert!(
            msg.contains("max_pool2d") && msg.contains("llvmpipe loop"),
            "{msg}"
        );
    } else {
        same_on_gpu("max_pool2d 256x256", &g, &[&x], |t| pool(t, 256).unwrap());
    }
}
