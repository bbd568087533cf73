//! index_add, index_put, masked_scatter, meshgrid, view_as, new_*: bad inputs (PyTorch's
//! messages, out-of-range indices on every device), in-place forms, what the goldens cannot pin
//! (repeated positions without accumulate). Random ops: statistics with fixed seeds, ranges,
//! shapes and dtypes, and the same samples on every device for the same seed.

mod common;

use common::{devices, seed_lock, vals};
use wgtorch::ops::{IndexAddOptions, Indexing};
use wgtorch::{DType, Device, Result, Scalar, Tensor};

fn msg<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn ints(v: &[i32], dev: &Device) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()], dev).unwrap()
}

fn f32s(v: &[f32], shape: &[usize], dev: &Device) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, dev).unwrap()
}

fn bools(v: &[bool], shape: &[usize], dev: &Device) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, dev).unwrap()
}

fn arange(n: usize, shape: &[usize], dev: &Device) -> Tensor {
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    f32s(&v, shape, dev)
}

/// The error of an op whose bad index may surface only at the readback (on a GPU).
fn index_error(r: Result<Tensor>) -> String {
    msg(r.and_then(|t| t.to_vec::<f32>()))
}

#[test]
fn index_add_checks_inputs() {
    for dev in devices() {
        let x = Tensor::zeros([3, 4], &dev).unwrap();
        let s = Tensor::ones([2, 4], &dev).unwrap();
        let m = index_error(x.index_add(0, &ints(&[0, 5], &dev), &s));
        assert_eq!(
            m,
            "index_add: index 5 is out of bounds for dimension 0 with size 3"
        );
        let m = index_error(x.index_add(0, &ints(&[-1, 0], &dev), &s));
        assert_eq!(
            m,
            "index_add: index -1 is out of bounds for dimension 0 with size 3"
        );
        // The context stays usable after a device-side failure.
        let ok = x.index_add(0, &ints(&[2, 2], &dev), &s).unwrap();
        assert_eq!(vals(&ok)[8..], [2.0; 4]);
        let i2 = Tensor::from_vec(vec![0i32, 1], [1, 2], &dev).unwrap();
        assert!(msg(x.index_add(0, &i2, &s)).contains("Index is supposed to be a vector"));
        let fi = f32s(&[0., 1.], &[2], &dev);
        assert!(msg(x.index_add(0, &fi, &s)).contains("Expected dtype int32/int64 for index"));
        let s5 = Tensor::ones([2, 5], &dev).unwrap();
        assert!(msg(x.index_add(0, &ints(&[0, 1], &dev), &s5))
            .contains("source tensor shape must match self tensor shape"));
        let s3 = Tensor::ones([3, 4], &dev).unwrap();
        assert!(msg(x.index_add(0, &ints(&[0, 1], &dev), &s3))
            .contains("Number of indices (2) should be equal to source.size(dim): (3)"));
        let si = Tensor::full_dtype([2, 4], 1.0, DType::I32, &dev).unwrap();
        assert!(msg(x.index_add(0, &ints(&[0, 1], &dev), &si))
            .contains("self (float32) and source (int32) must have the same scalar type"));
        assert!(msg(x.index_add(2, &ints(&[0, 1], &dev), &s)).contains("Dimension out of range"));
        let xi = Tensor::full_dtype([3], 0.0, DType::I32, &dev).unwrap();
        let o = IndexAddOptions {
            alpha: Scalar::Float(0.5),
        };
        let one = Tensor::full_dtype([1], 1.0, DType::I32, &dev).unwrap();
        assert!(msg(xi.index_add_with(0, &ints(&[0], &dev), &one, o))
            .contains("alpha must not be a floating point number"));
    }
    if let Some(gpu) = common::gpu() {
        let x = Tensor::zeros([3], &Device::Cpu).unwrap();
        let s = Tensor::ones([1], &gpu).unwrap();
        let m = msg(x.index_add(0, &ints(&[0], &Device::Cpu), &s));
        assert!(m.contains("same device") && m.contains("index_add"), "{m}");
    }
}

#[test]
fn index_add_in_place() {
    for dev in devices() {
        let x = Tensor::zeros([2, 3], &dev).unwrap();
        let s = arange(4, &[2, 2], &dev);
        let o = IndexAddOptions {
            alpha: Scalar::Float(2.0),
        };
        x.index_add_with_(1, &ints(&[2, 2], &dev), &s, o).unwrap();
        assert_eq!(vals(&x), [0., 0., 2., 0., 0., 10.]);
        x.index_add_(0, &ints(&[1], &dev), &Tensor::ones([1, 3], &dev).unwrap())
            .unwrap();
        assert_eq!(vals(&x), [0., 0., 2., 1., 1., 11.]);
        let leaf = Tensor::zeros([2, 3], &dev).unwrap().requires_grad_(true);
        let m = msg(leaf.index_add_(0, &ints(&[1], &dev), &Tensor::ones([1, 3], &dev).unwrap()));
        assert!(m.contains("in-place operation (index_add_)"), "{m}");
    }
}

#[test]
fn index_put_reports_out_of_range_indices() {
    for dev in devices() {
        let x = Tensor::zeros([2, 3], &dev).unwrap();
        let v = Tensor::ones([2], &dev).unwrap();
        for acc in [false, true] {
            let (r, c) = (ints(&[0, 1], &dev), ints(&[1, 3], &dev));
            let m = index_error(x.index_put(&[Some(&r), Some(&c)], &v, acc));
            assert_eq!(
                m,
                "index_put: index 3 is out of bounds for dimension 1 with size 3"
            );
            let c = ints(&[-4, 0], &dev);
            let m = index_error(x.index_put(&[Some(&r), Some(&c)], &v, acc));
            assert_eq!(
                m,
                "index_put: index -4 is out of bounds for dimension 1 with size 3"
            );
            let r = ints(&[2], &dev);
            let m = index_error(x.index_put(&[Some(&r)], &Tensor::ones([3], &dev).unwrap(), acc));
            assert_eq!(
                m,
                "index_put: index 2 is out of bounds for dimension 0 with size 2"
            );
        }
        // In range negative indices count from the end.
        let y = x
            .index_put(
                &[None, Some(&ints(&[-1], &dev))],
                &Tensor::ones([1], &dev).unwrap(),
                false,
            )
            .unwrap();
        assert_eq!(vals(&y), [0., 0., 1., 0., 0., 1.]);
    }
}

#[test]
fn index_put_checks_inputs() {
    for dev in devices() {
        let x = Tensor::zeros([3, 4], &dev).unwrap();
        let (i, one) = (ints(&[0, 1], &dev), Tensor::ones([1], &dev).unwrap());
        assert!(
            msg(x.index_put(&[Some(&i), Some(&i), Some(&i)], &one, false))
                .contains("too many indices for tensor of dimension 2 (got 3)")
        );
        let i3 = ints(&[0, 1, 2], &dev);
        let m = msg(x.index_put(&[Some(&i), Some(&i3)], &one, false));
        assert!(
            m.contains("indexing tensors could not be broadcast together with shapes [2], [3]"),
            "{m}"
        );
        let m = msg(x.index_put(&[Some(&i)], &Tensor::ones([3], &dev).unwrap(), false));
        assert!(
            m.contains(
                "value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 4]"
            ),
            "{m}"
        );
        let vi = Tensor::full_dtype([1], 1.0, DType::I32, &dev).unwrap();
        assert!(msg(x.index_put(&[Some(&i)], &vi, false))
            .contains("Index put requires the source and destination dtypes match"));
        let fi = f32s(&[0.], &[1], &dev);
        assert!(msg(x.index_put(&[Some(&fi)], &one, false))
            .contains("tensors used as indices must be long, int, byte or bool tensors"));
        let mask = bools(&[true; 15], &[3, 5], &dev);
        let m = msg(x.index_put(&[Some(&mask)], &one, false));
        assert!(m.contains("The shape of the mask [3, 5] at index 1 does not match the shape of the indexed tensor [3, 4] at index 1"), "{m}");
        assert!(msg(x.index_put(&[None], &one, false)).contains("at least one index tensor"));
        // Zero-size: no indices leave self unchanged.
        let e = Tensor::from_vec(Vec::<i32>::new(), [0], &dev).unwrap();
        let y = x.index_put(&[Some(&e)], &one, false).unwrap();
        assert_eq!(vals(&y), [0.0; 12]);
        let z = Tensor::zeros([3, 0], &dev).unwrap();
        let v0 = Tensor::ones([2, 0], &dev).unwrap();
        for acc in [false, true] {
            let y = z.index_put(&[Some(&i)], &v0, acc).unwrap();
            assert_eq!(y.shape(), [3, 0]);
        }
        let e0 = Tensor::zeros([0, 3], &dev).unwrap();
        let y = e0
            .index_add(
                1,
                &ints(&[0, 0], &dev),
                &Tensor::ones([0, 2], &dev).unwrap(),
            )
            .unwrap();
        assert_eq!(y.shape(), [0, 3]);
        let m0 = Tensor::from_vec(Vec::<bool>::new(), [0], &dev).unwrap();
        let y = Tensor::zeros([0], &dev)
            .unwrap()
            .masked_scatter(&m0, &Tensor::ones([0], &dev).unwrap())
            .unwrap();
        assert_eq!(y.shape(), [0]);
    }
}

#[test]
fn index_put_without_accumulate_last_write_wins() {
    for dev in devices() {
        let x = Tensor::zeros([3], &dev).unwrap().requires_grad_(true);
        let v = f32s(&[1., 2., 3., 4.], &[4], &dev).requires_grad_(true);
        let i = ints(&[0, 2, 0, 0], &dev);
        let y = x.index_put(&[Some(&i)], &v, false).unwrap();
        assert_eq!(vals(&y), [4., 0., 2.]);
        let acc = x.index_put(&[Some(&i)], &v, true).unwrap();
        assert_eq!(vals(&acc), [8., 0., 2.]);
        // PyTorch's gradients: self gets none where written; every value gets grad[index].
        y.mul(&f32s(&[10., 20., 30.], &[3], &dev))
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(vals(&x.grad().unwrap()), [0., 20., 0.]);
        assert_eq!(vals(&v.grad().unwrap()), [10., 30., 10., 10.]);
    }
}

#[test]
fn index_put_in_place_and_masks() {
    for dev in devices() {
        let x = arange(6, &[2, 3], &dev);
        let m = bools(&[true, false, true, false, false, true], &[2, 3], &dev);
        x.index_put_(&[Some(&m)], &f32s(&[-1.], &[1], &dev), false)
            .unwrap();
        assert_eq!(vals(&x), [-1., 1., -1., 3., 4., -1.]);
        let rows = bools(&[false, true], &[2], &dev);
        x.index_put_(&[Some(&rows)], &f32s(&[7., 8., 9.], &[3], &dev), true)
            .unwrap();
        assert_eq!(vals(&x), [-1., 1., -1., 10., 12., 8.]);
    }
}

#[test]
fn masked_scatter_checks_inputs_and_in_place() {
    for dev in devices() {
        let x = Tensor::zeros([2, 2], &dev).unwrap();
        let m = bools(&[true, true, false, true], &[2, 2], &dev);
        let e = msg(x.masked_scatter(&m, &Tensor::ones([2], &dev).unwrap()));
        assert!(
            e.contains("Number of elements of source < number of ones in mask"),
            "{e}"
        );
        let fm = Tensor::ones([2, 2], &dev).unwrap();
        assert!(msg(x.masked_scatter(&fm, &fm)).contains(
            "masked_scatter_ only supports boolean masks, but got mask with dtype float32"
        ));
        let si = Tensor::full_dtype([4], 1.0, DType::I32, &dev).unwrap();
        assert!(
            msg(x.masked_scatter(&m, &si)).contains("expected self and source to have same dtypes")
        );
        let m3 = bools(&[true; 3], &[3], &dev);
        assert!(msg(x.masked_scatter(&m3, &fm)).contains("masked_scatter"));
        x.masked_scatter_(&m, &arange(5, &[5], &dev)).unwrap();
        assert_eq!(vals(&x), [0., 1., 0., 2.]);
        // In place the mask broadcasts to self, never self to the mask.
        let v = Tensor::zeros([2], &dev).unwrap();
        assert!(msg(v.masked_scatter_(&m, &fm)).contains("masked_scatter_"));
    }
}

#[test]
fn meshgrid_and_views() {
    for dev in devices() {
        let a = arange(2, &[2], &dev);
        let b = arange(3, &[3], &dev);
        let g = Tensor::meshgrid(&[&a, &b], Indexing::Ij).unwrap();
        assert_eq!(g[0].shape(), [2, 3]);
        assert_eq!(vals(&g[1]), [0., 1., 2., 0., 1., 2.]);
        assert!(msg(Tensor::meshgrid(&[], Indexing::Ij)).contains("non-empty TensorList"));
        let m2 = Tensor::zeros([2, 2], &dev).unwrap();
        assert!(
            msg(Tensor::meshgrid(&[&a, &m2], Indexing::Xy)).contains("Expected 0D or 1D tensor")
        );
        let ai = Tensor::full_dtype([2], 0.0, DType::I32, &dev).unwrap();
        assert!(msg(Tensor::meshgrid(&[&a, &ai], Indexing::Ij)).contains("same dtype"));
        let x = arange(6, &[2, 3], &dev);
        assert_eq!(
            x.view_as(&b.unsqueeze(0).unwrap().expand([2, 3]).unwrap().t().unwrap())
                .unwrap()
                .shape(),
            [3, 2]
        );
        assert!(msg(x.t().unwrap().view_as(&arange(6, &[6], &dev)))
            .contains("view size is not compatible"));
        assert!(msg(x.view_as(&b)).contains("view"));
        for t in [
            x.new_zeros([4]).unwrap(),
            x.new_ones([0, 2]).unwrap(),
            x.new_empty([1]).unwrap(),
        ] {
            assert_eq!((t.dtype(), t.device()), (DType::F32, dev));
        }
        let h = x.to_dtype(DType::F16).unwrap().new_full([2], 3.0).unwrap();
        assert_eq!((h.dtype(), vals(&h)), (DType::F16, vec![3., 3.]));
    }
    if let Some(gpu) = common::gpu() {
        let a = Tensor::zeros([2], &gpu).unwrap();
        let b = Tensor::zeros([2], &Device::Cpu).unwrap();
        assert!(msg(Tensor::meshgrid(&[&a, &b], Indexing::Ij)).contains("same device"));
    }
}

/// Pearson's chi-square of `counts` against expected `probs` (summing to 1).
fn chi_square(counts: &[f64], probs: &[f64]) -> f64 {
    let n: f64 = counts.iter().sum();
    counts
        .iter()
        .zip(probs)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| (c - n * p).powi(2) / (n * p))
        .sum()
}

fn to_i32(t: &Tensor) -> Vec<i32> {
    assert_eq!(t.dtype(), DType::INDEX);
    let v = t.to_vec::<i64>().unwrap();
    v.into_iter().map(|x| i32::try_from(x).unwrap()).collect()
}

#[test]
fn multinomial_statistics() {
    let _l = seed_lock();
    let dev = Device::Cpu;
    let w = f32s(&[1., 2., 3., 0., 4.], &[5], &dev);
    wgtorch::manual_seed(11);
    let s = to_i32(&w.multinomial(20_000, true).unwrap());
    let mut counts = [0f64; 5];
    for &i in &s {
        counts[i as usize] += 1.0;
    }
    assert_eq!(counts[3], 0.0, "a zero-weight category was drawn");
    // 3 degrees of freedom: P(chi2 > 25) < 2e-5.
    let chi = chi_square(&counts, &[0.1, 0.2, 0.3, 0.0, 0.4]);
    assert!(chi < 25.0, "chi-square {chi} for {counts:?}");
    // Without replacement: rows are distinct, zero weights come last, and the first draw
    // follows the weights.
    let rows = Tensor::stack(&vec![w.clone(); 4000], 0).unwrap();
    let s = to_i32(&rows.multinomial(5, false).unwrap());
    let mut first = [0f64; 5];
    for r in s.chunks(5) {
        let mut sorted = r.to_vec();
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2, 3, 4]);
        assert_eq!(r[4], 3, "the zero-weight category is drawn last");
        first[r[0] as usize] += 1.0;
    }
    let chi = chi_square(&first, &[0.1, 0.2, 0.3, 0.0, 0.4]);
    assert!(chi < 25.0, "chi-square {chi} for first draws {first:?}");
    // The second draw given the first was 4 (weights 1, 2, 3 left): 1/6, 2/6, 3/6.
    let mut second = [0f64; 5];
    for r in s.chunks(5).filter(|r| r[0] == 4) {
        second[r[1] as usize] += 1.0;
    }
    let chi = chi_square(&second, &[1. / 6., 2. / 6., 0.5, 0.0, 0.0]);
    assert!(chi < 25.0, "chi-square {chi} for second draws {second:?}");
}

#[test]
fn multinomial_shapes_errors_and_devices() {
    let _l = seed_lock();
    let mut by_device = Vec::new();
    for dev in devices() {
        let w = f32s(&[0.5, 0., 2., 1., 1., 1.], &[2, 3], &dev);
        wgtorch::manual_seed(3);
        let s = w.multinomial(2, false).unwrap();
        assert_eq!((s.shape(), s.device()), (&[2usize, 2][..], dev));
        let r = w.multinomial(7, true).unwrap();
        assert_eq!(r.shape(), [2, 7]);
        assert!(to_i32(&r)[..7].iter().all(|&i| i != 1));
        by_device.push((to_i32(&s), to_i32(&r)));
        let e = |t: &Tensor, n, rep| msg(t.multinomial(n, rep));
        let z = Tensor::zeros([3], &dev).unwrap();
        assert!(
            e(&z, 1, true).contains("invalid multinomial distribution (sum of probabilities <= 0)")
        );
        let one = Tensor::ones([3], &dev).unwrap();
        assert!(e(&one, 4, false)
            .contains("cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
        assert!(e(&one, 0, true).contains("cannot sample n_sample <= 0 samples"));
        for bad in [-1.0, f32::INFINITY, f32::NAN] {
            let b = f32s(&[1., bad], &[2], &dev);
            assert!(e(&b, 1, true)
                .contains("probability tensor contains either `inf`, `nan` or element < 0"));
        }
        assert!(e(&Tensor::ones([2, 2, 2], &dev).unwrap(), 1, true)
            .contains("prob_dist must be 1 or 2 dim"));
        assert!(
            e(&Tensor::ones([], &dev).unwrap(), 1, true).contains("prob_dist must be 1 or 2 dim")
        );
        assert!(e(&ints(&[1, 2], &dev), 1, true).contains("only supports floating-point dtypes"));
        let empty = Tensor::ones([0, 3], &dev)
            .unwrap()
            .multinomial(2, false)
            .unwrap();
        assert_eq!(empty.shape(), [0, 2]);
    }
    assert!(
        by_device.windows(2).all(|w| w[0] == w[1]),
        "devices disagree: {by_device:?}"
    );
}

#[test]
fn randint_and_randperm() {
    let _l = seed_lock();
    let mut by_device = Vec::new();
    for dev in devices() {
        wgtorch::manual_seed(5);
        let t = Tensor::randint(-3, 4, [2000], &dev).unwrap();
        assert_eq!(
            (t.shape(), t.dtype(), t.device()),
            (&[2000usize][..], DType::INDEX, dev)
        );
        let v = to_i32(&t);
        let mut counts = [0f64; 7];
        for &x in &v {
            assert!((-3..4).contains(&x));
            counts[(x + 3) as usize] += 1.0;
        }
        // 6 degrees of freedom: P(chi2 > 35) < 5e-6.
        let chi = chi_square(&counts, &[1.0 / 7.0; 7]);
        assert!(chi < 35.0, "chi-square {chi} for {counts:?}");
        let p = to_i32(&Tensor::randperm(50, &dev).unwrap());
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(p, sorted, "a shuffle of 50 left everything in place");
        assert_eq!(Tensor::randperm(0, &dev).unwrap().shape(), [0]);
        let like = Tensor::zeros([3, 2], &dev)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap()
            .randint_like(0, 10)
            .unwrap();
        assert_eq!((like.shape(), like.dtype()), (&[3usize, 2][..], DType::F16));
        assert!(vals(&like)
            .iter()
            .all(|&x| x == x.floor() && (0.0..10.0).contains(&x)));
        by_device.push((v, p, vals(&like)));
        assert!(msg(Tensor::randint(3, 3, [2], &dev))
            .contains("random_ expects 'from' to be less than 'to', but got from=3 >= to=3"));
        // int64 draws past int32: exact on the CPU; a GPU holds int64 as int32 and refuses
        // them (64 draws below 2^40 all fitting int32 has probability 2^-576).
        let big = Tensor::randint(0, 1 << 40, [64], &dev);
        if dev.is_gpu() {
            assert!(msg(big).contains("int32"));
        } else {
            let v = big.unwrap().to_vec::<i64>().unwrap();
            assert!(v.iter().all(|v| (0..1i64 << 40).contains(v)));
        }
    }
    assert!(
        by_device.windows(2).all(|w| w[0] == w[1]),
        "devices disagree"
    );
    // Every position of a small permutation is equally likely.
    wgtorch::manual_seed(6);
    let mut pos = [0f64; 4];
    for _ in 0..4000 {
        let p = to_i32(&Tensor::randperm(4, &Device::Cpu).unwrap());
        pos[p.iter().position(|&x| x == 0).unwrap()] += 1.0;
    }
    let chi = chi_square(&pos, &[0.25; 4]);
    assert!(chi < 25.0, "chi-square {chi} for {pos:?}");
}

#[test]
fn bernoulli_statistics_and_errors() {
    let _l = seed_lock();
    let mut by_device = Vec::new();
    for dev in devices() {
        wgtorch::manual_seed(9);
        let n = 4000;
        let p: Vec<f32> = (0..n).map(|i| [0.0, 0.3, 1.0][i % 3]).collect();
        let pt = Tensor::from_vec(p.clone(), [n], &dev).unwrap();
        let s = pt.bernoulli().unwrap();
        assert_eq!((s.dtype(), s.device()), (DType::F32, dev));
        let v = vals(&s);
        let mut ones = 0.0;
        for (x, q) in v.iter().zip(&p) {
            if *q == 0.0 || *q == 1.0 {
                assert_eq!(*x, *q as f64);
            } else {
                ones += x;
            }
        }
        let k = (n / 3) as f64;
        // Binomial(1333, 0.3): sd ~ 16.7; 6 sd.
        assert!(
            (ones - 0.3 * k).abs() < 100.0,
            "{ones} ones of {k} at p=0.3"
        );
        let q = Tensor::zeros([3000], &dev)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap()
            .bernoulli_p(0.7)
            .unwrap();
        assert_eq!(q.dtype(), DType::F16);
        let mean = vals(&q).iter().sum::<f64>() / 3000.0;
        assert!((mean - 0.7).abs() < 0.05, "mean {mean}");
        by_device.push((v, vals(&q)));
        for bad in [1.5f32, -0.5, f32::NAN] {
            let b = f32s(&[0.5, bad], &[2], &dev);
            assert!(msg(b.bernoulli()).contains("Expected p_in >= 0 && p_in <= 1"));
        }
        assert!(msg(ints(&[1, 0], &dev).bernoulli()).contains("not implemented for dtype int32"));
        let one = Tensor::ones([2], &dev).unwrap();
        assert!(msg(one.bernoulli_p(1.5))
            .contains("bernoulli_ expects p to be in [0, 1], but got p=1.5"));
        assert_eq!(vals(&one.bernoulli_p(1.0).unwrap()), [1., 1.]);
        assert_eq!(vals(&one.bernoulli_p(0.0).unwrap()), [0., 0.]);
    }
    assert!(
        by_device.windows(2).all(|w| w[0] == w[1]),
        "devices disagree"
    );
}

#[test]
fn rand_like_stays_below_one_in_every_float_dtype() {
    let _l = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(2);
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let x = Tensor::zeros([20_000], &dev).unwrap().to_dtype(dt).unwrap();
            let u = x.rand_like().unwrap();
            assert_eq!((u.dtype(), u.device()), (dt, dev));
            let v = vals(&u);
            assert!(
                v.iter().all(|&x| (0.0..1.0).contains(&x)),
                "{dt}: a draw outside [0, 1)"
            );
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            // sd of the mean: 0.29 / sqrt(20000) = 0.002.
            assert!((mean - 0.5).abs() < 0.015, "{dt}: mean {mean}");
        }
        let i = Tensor::full_dtype([2], 0.0, DType::I32, &dev).unwrap();
        assert!(msg(i.rand_like()).contains("rand: not implemented for dtype int32"));
        assert!(msg(i.randn_like()).contains("randn: not implemented for dtype int32"));
        let n = Tensor::zeros([3], &dev).unwrap().randn_like().unwrap();
        assert_eq!(n.shape(), [3]);
    }
}

/// Copies of transposed views (a dim other than the last contiguous in the source) hold, in
/// order, the source elements the strides name: on `arange` values each element is its own
/// storage offset. With a middle dim, an offset into the storage, a broadcast dim, more than one
/// parallel block, int64 and f16 too.
#[test]
fn transposed_copies_hold_the_elements_the_strides_name() -> Result<()> {
    let offsets = |t: &Tensor| -> Vec<f64> {
        let (shape, stride) = (t.shape(), t.stride());
        (0..t.numel())
            .map(|mut k| {
                let mut o = t.storage_offset();
                for d in (0..shape.len()).rev() {
                    o += (k % shape[d]) * stride[d];
                    k /= shape[d];
                }
                o as f64
            })
            .collect()
    };
    for dev in devices() {
        for dt in [DType::F32, DType::I64, DType::F16] {
            let base = |shape: &[usize]| arange(shape.iter().product(), shape, &dev).to_dtype(dt);
            let views = [
                base(&[20, 3, 37])?.permute([2, 1, 0])?,
                base(&[5, 40, 18])?.narrow(0, 1, 4)?.permute([0, 2, 1])?,
                base(&[17, 4, 33])?.permute([2, 1, 0])?,
                base(&[33, 17])?.t()?.unsqueeze(1)?.expand([17, 3, 33])?,
                base(&[300, 3, 40])?.permute([2, 1, 0])?,
                base(&[40, 3, 300])?.permute([2, 1, 0])?,
            ];
            for v in &views {
                let what = format!("{dev:?} {dt:?} {:?} {:?}", v.shape(), v.stride());
                let c = v.contiguous()?;
                assert!(c.is_contiguous(), "{what}");
                // f16 holds the offsets past 2048 rounded.
                let want = offsets(v).into_iter();
                let want: Vec<f64> = match dt {
                    DType::F16 => want.map(|o| half::f16::from_f64(o).to_f64()).collect(),
                    _ => want.collect(),
                };
                assert_eq!(vals(&c.to_dtype(DType::F32)?), want, "{what}");
            }
        }
    }
    Ok(())
}

#[test]
fn strided_sources_and_indices_match_contiguous_ones() {
    for dev in devices() {
        let x = arange(12, &[3, 4], &dev);
        let st = arange(12, &[4, 3], &dev).t().unwrap(); // [3, 4], strided
        let sc = st.contiguous().unwrap();
        let i = ints(&[3, 0, 3, 1, 0, 2], &dev).slice(0, 0, 6, 2).unwrap(); // [3, 3, 0]
        let ic = i.contiguous().unwrap();
        let m = index_error(x.index_add(0, &i, &sc.slice(0, 0, 3, 1).unwrap()));
        assert_eq!(
            m,
            "index_add: index 3 is out of bounds for dimension 0 with size 3"
        );
        let j = ints(&[2, 0, 2], &dev);
        let jt = ints(&[2, 9, 0, 9, 2, 9], &dev).slice(0, 0, 6, 2).unwrap();
        assert_eq!(
            vals(&x.index_add(0, &jt, &st).unwrap()),
            vals(&x.index_add(0, &j, &sc).unwrap())
        );
        let v = arange(8, &[4, 2], &dev).t().unwrap(); // [2, 4], strided
        let r = ints(&[2, 0], &dev);
        for acc in [false, true] {
            assert_eq!(
                vals(&x.index_put(&[Some(&r)], &v, acc).unwrap()),
                vals(
                    &x.index_put(&[Some(&r)], &v.contiguous().unwrap(), acc)
                        .unwrap()
                )
            );
        }
        let cols = ic.slice(0, 0, 2, 1).unwrap(); // [3, 3]
        let y = x
            .index_put(&[None, Some(&cols)], &f32s(&[5.], &[1], &dev), true)
            .unwrap();
        assert_eq!(vals(&y)[3], 3.0 + 10.0);
    }
}

#[test]
fn half_dtypes_match_f32() {
    for dev in devices() {
        for dt in [DType::F16, DType::BF16] {
            let x = arange(6, &[2, 3], &dev);
            let s = arange(4, &[2, 2], &dev);
            let (xh, sh) = (x.to_dtype(dt).unwrap(), s.to_dtype(dt).unwrap());
            let i = ints(&[2, 0], &dev);
            let a = xh.index_add(1, &i, &sh).unwrap();
            assert_eq!(a.dtype(), dt);
            assert_eq!(vals(&a), vals(&x.index_add(1, &i, &s).unwrap()));
            let p = xh.index_put(&[None, Some(&i)], &sh, false).unwrap();
            assert_eq!(
                vals(&p),
                vals(&x.index_put(&[None, Some(&i)], &s, false).unwrap())
            );
            let m = bools(&[true, false, false, true, true, false], &[2, 3], &dev);
            let q = xh.masked_scatter(&m, &sh).unwrap();
            assert_eq!(vals(&q), vals(&x.masked_scatter(&m, &s).unwrap()));
        }
    }
}

/// `n` indices in `0..v`, scrambled, with repeats.
fn scrambled(n: usize, v: usize) -> Vec<i32> {
    (0..n).map(|i| ((i * 7919 + i / 3) % v) as i32).collect()
}

#[test]
fn broadcast_index_scatters_match_the_cpu_bit_for_bit() {
    // An index broadcast off its dimension and 32 or more long is scattered on a GPU through its
    // stable sort (`scatter_add_sorted.wgsl`): each position sums its sources in index order, as
    // the CPU and the one-pass kernel do, so the bits agree.
    let Some(gpu) = common::gpu() else { return };
    let _seed = seed_lock();
    let run = |dev: &Device| -> Vec<Vec<f64>> {
        // The same draws for every device.
        wgtorch::manual_seed(5);
        let cpu = Device::Cpu;
        // The embedding gradient (gather's along dim 0, the index expanded over the columns).
        let w = Tensor::randn([50, 7], &cpu).unwrap().to(dev).unwrap();
        let w = w.requires_grad_(true);
        let tokens = Tensor::from_vec(scrambled(300, 50), [20, 15], dev).unwrap();
        let g = Tensor::randn([20, 15, 7], &cpu).unwrap().to(dev).unwrap();
        let e = tokens.embedding(&w).unwrap();
        e.mul(&g).unwrap().sum_all().unwrap().backward().unwrap();
        // index_add along a middle dim: a strided index (every other entry of a longer one), a
        // transposed source.
        let base = Tensor::randn([3, 40, 5], &cpu).unwrap().to(dev).unwrap();
        let long = Tensor::from_vec(scrambled(128, 40), [128], dev).unwrap();
        let long = long.to_dtype(DType::I64).unwrap();
        let idx = long.slice(0, 1, 128, 2).unwrap(); // 64 int64 entries, offset 1, stride 2
        let src = Tensor::randn([5, 64, 3], &cpu).unwrap().to(dev).unwrap();
        let src = src.permute([2, 1, 0]).unwrap(); // [3, 64, 5], not contiguous
        let added = base.index_add(1, &idx, &src).unwrap();
        // scatter_add with an index expanded over fewer columns than the base has (columns 3
        // and 4 are not covered: unchanged).
        let col = Tensor::from_vec(scrambled(40, 50), [40, 1], dev).unwrap();
        let idx = col.expand([40, 3]).unwrap();
        let src = Tensor::randn([40, 3], &cpu).unwrap().to(dev).unwrap();
        let part = Tensor::randn([50, 5], &cpu).unwrap().to(dev).unwrap();
        let part = part.scatter_add(0, &idx, &src).unwrap();
        // int32 counts (a bincount).
        let ones = Tensor::full_dtype([1], 1.0, DType::I32, dev).unwrap();
        let idx = Tensor::from_vec(scrambled(100, 9), [100], dev).unwrap();
        let counts = Tensor::full_dtype([9], 0.0, DType::I32, dev).unwrap();
        let counts = counts
            .scatter_add(0, &idx, &ones.expand([100]).unwrap())
            .unwrap();
        [&w.grad().unwrap(), &added, &part, &counts]
            .iter()
            .map(|t| vals(t))
            .collect()
    };
    let want = run(&Device::Cpu);
    let prof = wgtorch::profiler::profile(Default::default(), |_| {
        run(&gpu);
        Ok(())
    })
    .unwrap();
    let got = run(&gpu);
    for (what, (w, g)) in ["embedding grad", "index_add", "scatter_add", "counts"]
        .iter()
        .zip(want.iter().zip(&got))
    {
        assert!(w == g, "{what}: the GPU differs from the CPU");
    }
    assert_eq!(want[3].iter().sum::<f64>(), 100.0);
    // The sorted kernel ran for each (where the adapter times its kernels; the lock keeps this
    // file's other sorted scatters out of the profile).
    let kernels = prof.gpu_kernels();
    let ran = |name: &str| kernels.iter().filter(|k| k.name == name).count();
    assert!(
        !prof.gpu_time_unavailable().is_empty()
            || (ran("scatter_add_sorted_f32") == 3 && ran("scatter_add_sorted_i32") == 1),
        "{:?}",
        kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
    );
}

#[test]
fn broadcast_index_scatter_reports_out_of_range_indices() {
    // Through the sorted kernel too (index 32 or more long): the smallest and largest index of
    // each chunk are checked, so a bad one anywhere is reported, in PyTorch's words.
    let _seed = seed_lock();
    for dev in devices() {
        let base = Tensor::zeros([10, 2], &dev).unwrap();
        for (bad, at) in [(10, 17), (-1, 0), (12, 39)] {
            let mut v = scrambled(40, 10);
            v[at] = bad;
            let idx = Tensor::from_vec(v, [40, 1], &dev).unwrap();
            let idx = idx.expand([40, 2]).unwrap();
            let src = Tensor::ones([40, 2], &dev).unwrap();
            assert_eq!(
                index_error(base.scatter_add(0, &idx, &src)),
                format!("scatter_add: index {bad} is out of bounds for dimension 0 with size 10")
            );
        }
        // Expanded to no line at all: nothing is scattered, nothing checked (as on the CPU).
        let mut v = scrambled(40, 10);
        v[3] = 99;
        let idx = Tensor::from_vec(v, [40, 1], &dev).unwrap();
        let idx = idx.expand([40, 0]).unwrap();
        let src = Tensor::ones([40, 0], &dev).unwrap();
        let same = base.scatter_add(0, &idx, &src).unwrap();
        assert_eq!(vals(&same), vals(&base));
    }
}
