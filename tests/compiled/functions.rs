//! `compile(fn)`: functions of tensors, with tensors they capture, on every device.

use super::bits;
use crate::common::{assert_close, devices, seed_lock, vals};
use wgtorch::compile::{compile_with, CompileOptions};
use wgtorch::{compile, Device, Result, Tensor};

/// Two inputs and a captured leaf: three calls (one trace, two replays) give eager's values, and
/// the gradients of the inputs and of the captured leaf are eager's.
#[test]
fn compiled_functions_compute_and_differentiate_what_eager_does() -> Result<()> {
    for dev in devices() {
        let w = Tensor::randn([3], &dev)?.requires_grad_(true);
        let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
            let h = xs[0].mul(&w)?.gelu_tanh()?;
            Ok(vec![h.add(&xs[1])?.tanh()?, h.sum_dims([1], false)?])
        };
        let fast = compile(f);
        let x = Tensor::randn([4, 3], &dev)?.requires_grad_(true);
        let r = Tensor::randn([4, 3], &dev)?;
        for _ in 0..3 {
            let got = fast.call(&[x.clone(), r.clone()])?;
            let want = f(&[x.clone(), r.clone()])?;
            // The graph writes GELU's tanh form as ONNX's ops: rounding may differ.
            for (g, e) in got.iter().zip(&want) {
                assert_eq!(g.shape(), e.shape(), "{dev}");
                assert_close("compiled", &vals(g), &vals(e), 1e-5, 1e-6);
            }
        }
        let s = fast.stats();
        assert_eq!((s.graphs, s.cache_hits, s.eager_calls), (1, 2, 0), "{dev}");
        let grads = |out: Vec<Tensor>| -> Result<(Vec<f64>, Vec<f64>)> {
            x.set_grad(None);
            w.set_grad(None);
            out[0].sum_all()?.add(&out[1].mean_all()?)?.backward()?;
            Ok((
                x.grad().unwrap().to_f64_vec()?,
                w.grad().unwrap().to_f64_vec()?,
            ))
        };
        let (gx, gw) = grads(fast.call(&[x.clone(), r.clone()])?)?;
        let (ex, ew) = grads(f(&[x.clone(), r.clone()])?)?;
        assert_close("input grad", &gx, &ex, 1e-5, 1e-6);
        assert_close("captured grad", &gw, &ew, 1e-5, 1e-6);
    }
    Ok(())
}

/// A copy the function makes (`contiguous` of a transposed view, as self-attention makes of a
/// batch-first input) is made once in the graph too, not once by each of its three readers.
#[test]
fn a_copy_of_a_view_is_made_once_for_its_readers() -> Result<()> {
    use wgtorch::profiler::{self, ProfileOptions};
    for dev in devices() {
        let ws: Vec<Tensor> = (0..3)
            .map(|_| Tensor::randn([8, 5], &dev))
            .collect::<Result<_>>()?;
        let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
            let y = xs[0].transpose(0, 1)?.contiguous()?;
            ws.iter().map(|w| y.matmul(w)).collect()
        };
        let fast = compile(f);
        let x = Tensor::randn([4, 3, 8], &dev)?;
        let xs = std::slice::from_ref(&x);
        fast.call(xs)?;
        let prof = profiler::profile(ProfileOptions::default(), |_| {
            let _scope = profiler::record_function("replay");
            for (g, e) in fast.call(xs)?.iter().zip(f(xs)?) {
                assert_eq!(bits(g), bits(&e), "{dev}");
            }
            Ok(())
        })?;
        assert_eq!(fast.stats().cache_hits, 1, "{dev}");
        let copies = crate::common::events_under(&prof, "replay")
            .iter()
            .filter(|n| *n == "contiguous")
            .count();
        // One in the compiled call, one in the eager call it is compared with.
        assert_eq!(copies, 2, "{dev}");
    }
    Ok(())
}

/// A captured float tensor is read live: an in-place update is seen without a recompile. A
/// captured bool mask is held as it was (folded at load): writing it recompiles. A captured
/// tensor that an op the recorder does not know read (under no_grad) is guarded the same way.
#[test]
fn captured_tensors_are_read_live_or_guarded() -> Result<()> {
    let dev = Device::Cpu;
    let scale = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev)?;
    let mask = Tensor::from_vec(vec![true, false, true], [3], &dev)?;
    let offset = Tensor::from_vec(vec![0.5f32, 0.25, 0.125], [3], &dev)?;
    let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        // cumsum is not recorded: its result is a constant computed from `offset`.
        let shift = {
            let _ng = wgtorch::no_grad();
            offset.cumsum(0)?
        };
        let y = xs[0].mul(&scale)?.add(&shift)?;
        Ok(vec![Tensor::where_cond(&mask, &y, &xs[0])?])
    };
    let fast = compile(f);
    let x = Tensor::randn([2, 3], &dev)?;
    let check = |what: &str| -> Result<()> {
        let got = fast.call(std::slice::from_ref(&x))?.remove(0);
        assert_eq!(bits(&got), bits(&f(std::slice::from_ref(&x))?[0]), "{what}");
        Ok(())
    };
    check("first call")?;
    {
        let _ng = wgtorch::no_grad();
        scale.mul_(&Tensor::full([3], 2.0, &dev)?)?;
    }
    check("after scale.mul_")?;
    assert_eq!((fast.stats().graphs, fast.stats().recompiles), (1, 0));
    mask.copy_(&Tensor::from_vec(vec![false, true, true], [3], &dev)?)?;
    check("after mask.copy_")?;
    assert_eq!((fast.stats().graphs, fast.stats().recompiles), (2, 1));
    {
        let _ng = wgtorch::no_grad();
        offset.add_(&Tensor::ones([3], &dev)?)?;
    }
    check("after offset.add_")?;
    assert_eq!((fast.stats().graphs, fast.stats().recompiles), (3, 2));
    check("replayed")?;
    assert_eq!(fast.stats().eager_calls, 0, "{}", fast.explain());
    Ok(())
}

/// What a graph cannot repeat runs eagerly, once per call, with the reason: a write into a
/// captured tensor (refused before it happens during the capture, so the counter moves once
/// per call), a backward pass inside the function (the gradient is not doubled), a value
/// computed from the input by an op the recorder does not know under no_grad, a detached value
/// computed from the input. With fullgraph the call is an error and changes nothing.
#[test]
fn what_a_function_graph_cannot_repeat_runs_eagerly_once() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    let x = Tensor::randn([2, 3], &dev)?;

    let calls = Tensor::zeros([1], &dev)?;
    let counting = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        calls.add_(&Tensor::ones([1], &dev)?)?;
        Ok(vec![xs[0].relu()?])
    };
    let fast = compile(counting);
    for _ in 0..2 {
        assert_eq!(
            bits(&fast.call(std::slice::from_ref(&x))?[0]),
            bits(&x.relu()?)
        );
    }
    assert_eq!(calls.to_vec::<f32>()?, [2.0]);
    let e = fast.explain();
    assert_eq!(e.stats.eager_calls, 2, "{e}");
    assert!(e.eager[0].1.contains("writes in place (add_)"), "{e}");
    let strict = compile_with(
        counting,
        CompileOptions {
            fullgraph: true,
            ..Default::default()
        },
    );
    let err = strict
        .call(std::slice::from_ref(&x))
        .unwrap_err()
        .to_string();
    assert!(err.contains("fullgraph") && err.contains("add_"), "{err}");
    assert_eq!(calls.to_vec::<f32>()?, [2.0]);
    // Bad input is the function's own error, as eager gives it, fullgraph or not.
    let adding = |xs: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![xs[0].add(&xs[1])?]) };
    let bad = [x.clone(), Tensor::randn([4], &dev)?];
    let eager = adding(&bad).unwrap_err().to_string();
    for fullgraph in [false, true] {
        let strict = compile_with(
            adding,
            CompileOptions {
                fullgraph,
                ..Default::default()
            },
        );
        assert_eq!(strict.call(&bad).unwrap_err().to_string(), eager);
    }

    let w = Tensor::randn([3], &dev)?.requires_grad_(true);
    let stepping = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        let loss = xs[0].mul(&w)?.square()?.sum_all()?;
        loss.backward()?;
        Ok(vec![loss.detach()])
    };
    let fast = compile(stepping);
    fast.call(std::slice::from_ref(&x))?;
    let once = w.grad().unwrap().to_vec::<f32>()?;
    w.set_grad(None);
    stepping(std::slice::from_ref(&x))?;
    assert_eq!(once, w.grad().unwrap().to_vec::<f32>()?);
    let e = fast.explain();
    assert!(e.eager[0].1.contains("backward() inside"), "{e}");

    let hidden = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        let c = {
            let _ng = wgtorch::no_grad();
            xs[0].cumsum(1)?
        };
        Ok(vec![xs[0].mul(&c)?])
    };
    let fast = compile(hidden);
    for seed in 0..2 {
        wgtorch::manual_seed(seed);
        let x = Tensor::randn([2, 3], &dev)?;
        assert_eq!(
            bits(&fast.call(std::slice::from_ref(&x))?[0]),
            bits(&hidden(&[x])?[0])
        );
    }
    let e = fast.explain();
    assert!(
        e.eager[0].1.contains("recorder does not know (or a copy_"),
        "{e}"
    );
    assert_eq!(e.stats.eager_calls, 2, "{e}");

    // A detached value computed from the input would be one call's constant.
    let stable = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        let m = xs[0].amax([1], true)?.detach();
        Ok(vec![xs[0].sub(&m)?.exp()?])
    };
    let fast = compile(stable);
    for seed in 0..2 {
        wgtorch::manual_seed(seed);
        let x = Tensor::randn([2, 3], &dev)?;
        assert_eq!(
            bits(&fast.call(std::slice::from_ref(&x))?[0]),
            bits(&stable(&[x])?[0])
        );
    }
    let e = fast.explain();
    assert!(e.eager[0].1.contains("(a detach"), "{e}");
    Ok(())
}

/// A compiled graph's gathers refuse the indices eager refuses (negative, past the end, past
/// 32 bits on the CPU), on every device, after a replay with good ones; ONNX's own Gather (an exported
/// file) counts a negative index from the end.
#[test]
fn compiled_gathers_refuse_what_eager_refuses() -> Result<()> {
    for dev in devices() {
        let w = Tensor::randn([5, 3], &dev)?;
        let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
            Ok(vec![w
                .index_select(0, &xs[0])?
                .add(&xs[0].embedding(&w)?)?])
        };
        let fast = compile(f);
        let good = Tensor::from_vec(vec![0i64, 4, 2], [3], &dev)?;
        for _ in 0..2 {
            let got = fast.call(std::slice::from_ref(&good))?.remove(0);
            assert_eq!(
                bits(&got),
                bits(&f(std::slice::from_ref(&good))?[0]),
                "{dev}"
            );
        }
        assert_eq!(fast.stats().graphs, 1, "{dev}: {}", fast.explain());
        // (A GPU holds int64 as int32: a wider index cannot reach it.)
        let wide = (!dev.is_gpu()).then_some((1i64 << 32) + 1);
        for bad in [-1i64, 5].into_iter().chain(wide) {
            let bad = Tensor::from_vec(vec![0i64, bad, 2], [3], &dev)?;
            let read = |r: Result<Vec<Tensor>>| r.and_then(|o| o[0].to_vec::<f32>());
            assert!(read(f(std::slice::from_ref(&bad))).is_err(), "{dev}: eager");
            let got = read(fast.call(std::slice::from_ref(&bad)));
            assert!(
                got.is_err(),
                "{dev}: compiled gave {got:?} for {:?}",
                bad.to_vec::<i64>()?
            );
        }
        assert_eq!(fast.stats().eager_calls, 0, "{dev}");
    }
    Ok(())
}

/// An embedding with `padding_idx` blocks the padding row's gradient. It used to do so with a
/// detach of its own output, which a graph held as one call's constant (the first call's rows at
/// the next call's padding positions); it now reads the padding row itself, detached, so the
/// graph is right for every batch: a second batch with its padding elsewhere gets eager's values
/// and gradients.
#[test]
fn embedding_padding_rows_follow_each_call() -> Result<()> {
    use wgtorch::compile::compile_module;
    use wgtorch::nn::{Embedding, EmbeddingOptions, ModuleExt};
    let dev = Device::Cpu;
    let emb = Embedding::with_options(
        6,
        3,
        EmbeddingOptions {
            padding_idx: Some(0),
        },
        &dev,
    )?;
    let fast = compile_module(&emb);
    for ids in [vec![0i64, 3, 5, 1], vec![4, 0, 2, 0]] {
        let ids = Tensor::from_vec(ids, [4], &dev)?;
        let grad = |out: Tensor| -> Result<Vec<f32>> {
            emb.zero_grad();
            out.mul(&out)?.sum_all()?.backward()?;
            emb.weight.grad().unwrap().to_vec::<f32>()
        };
        let (got, want) = (fast.forward(&ids)?, emb.forward(&ids)?);
        assert_eq!(bits(&got), bits(&want));
        let g = grad(got)?;
        assert_eq!(g, grad(want)?);
        assert!(
            g[..3].iter().all(|&v| v == 0.0),
            "the padding row's gradient: {g:?}"
        );
    }
    let s = fast.stats();
    assert_eq!(
        (s.graphs, s.cache_hits, s.eager_calls),
        (1, 1, 0),
        "{}",
        fast.explain()
    );
    Ok(())
}

/// A tensor the function captures and the caller also passes is read live (a graph, not an
/// eager fallback); a compiled function called inside another's capture is part of that graph;
/// an optimizer step inside a function runs eagerly, once per call (Adam's step count and
/// moments as one eager step's).
#[test]
fn aliases_nesting_and_optimizer_steps() -> Result<()> {
    use wgtorch::optim::{Adam, Optimizer};
    let _g = seed_lock();
    let dev = Device::Cpu;
    let w = Tensor::randn([3], &dev)?;
    let scale = |xs: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![xs[0].mul(&w)?.tanh()?]) };
    let inner = compile(scale);
    for _ in 0..2 {
        let got = inner.call(std::slice::from_ref(&w))?;
        assert_eq!(bits(&got[0]), bits(&scale(std::slice::from_ref(&w))?[0]));
    }
    assert_eq!((inner.stats().graphs, inner.stats().eager_calls), (1, 0));
    let outer = compile(|xs: &[Tensor]| -> Result<Vec<Tensor>> {
        Ok(vec![inner.call(xs)?.remove(0).add(&xs[0])?])
    });
    let x = Tensor::randn([2, 3], &dev)?;
    for _ in 0..2 {
        let got = outer.call(std::slice::from_ref(&x))?.remove(0);
        assert_eq!(
            bits(&got),
            bits(&scale(std::slice::from_ref(&x))?[0].add(&x)?)
        );
    }
    assert_eq!((outer.stats().graphs, outer.stats().eager_calls), (1, 0));
    // The inner function's own cache saw neither the capture nor the replay.
    assert_eq!(inner.stats().graphs, 1);

    let make = || -> Result<(Tensor, std::cell::RefCell<Adam>)> {
        wgtorch::manual_seed(3);
        let p = Tensor::randn([3], &dev)?.requires_grad_(true);
        p.set_grad(Some(Tensor::ones([3], &dev)?));
        let opt = Adam::new(vec![p.clone()], 0.1)?;
        Ok((p, std::cell::RefCell::new(opt)))
    };
    let (p, opt) = make()?;
    let stepping = compile(|xs: &[Tensor]| -> Result<Vec<Tensor>> {
        opt.borrow_mut().step()?;
        Ok(vec![xs[0].add(&p.detach())?])
    });
    let (q, twin) = make()?;
    for _ in 0..2 {
        stepping.call(std::slice::from_ref(&x))?;
        twin.borrow_mut().step()?;
        assert_eq!(bits(&p.detach()), bits(&q.detach()));
    }
    let e = stepping.explain();
    assert!(e.eager[0].1.contains("an optimizer step inside"), "{e}");
    Ok(())
}

/// A graph whose held value is written before every call recompiles each time, up to
/// `cache_size_limit` times; then the signature runs eagerly, still with eager's values.
#[test]
fn graphs_that_keep_going_stale_run_eagerly() -> Result<()> {
    let dev = Device::Cpu;
    let mask = Tensor::from_vec(vec![true, false, true], [3], &dev)?;
    let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        Ok(vec![Tensor::where_cond(&mask, &xs[0], &xs[0].neg()?)?])
    };
    let fast = compile_with(
        f,
        CompileOptions {
            cache_size_limit: 2,
            ..Default::default()
        },
    );
    let x = Tensor::randn([3], &dev)?;
    for flip in [false, true, false, true, false] {
        mask.copy_(&Tensor::from_vec(vec![flip, !flip, true], [3], &dev)?)?;
        let got = fast.call(std::slice::from_ref(&x))?.remove(0);
        assert_eq!(bits(&got), bits(&f(std::slice::from_ref(&x))?[0]));
    }
    let e = fast.explain();
    assert_eq!((e.stats.graphs, e.stats.eager_calls), (3, 2), "{e}");
    assert!(e.eager[0].1.contains("written 3 times"), "{e}");
    Ok(())
}

/// A one-element constant operand of an elementwise node is the scalar op eager ran, in a
/// compiled graph and in a frozen ONNX import: `c - x`, `x - c`, `x / c`, `x * c`, `x + c` give
/// eager's bits on the CPU, and the constants are no inputs of the fused kernel (eight of them
/// would split the chain at six inputs, but it runs as one kernel). A compiled `pow_scalar(3)` is
/// PyTorch's `x * x * x` on every device, while a power of a one-element tensor stays `powf`
/// (whose rounding differs), as eager runs it; a file's `Pow` is ONNX's, C's `pow`.
#[test]
fn scalar_operands_become_the_scalar_ops_eager_ran() -> Result<()> {
    let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        let x = &xs[0];
        let inner = x.pow_scalar(3.0)?.mul_scalar(0.044715)?.add(x)?;
        let y = x
            .rsub_scalar(1.5)?
            .div_scalar(3.0)?
            .sub_scalar(0.25)?
            .add_scalar(0.125)?
            .mul_scalar(0.75)?
            .div_scalar(7.0)?
            .mul(&inner)?;
        let three = Tensor::scalar(3.0f32, &x.device())?;
        Ok(vec![y, x.pow_scalar(3.0)?, x.pow(&three)?])
    };
    for dev in devices() {
        let x = Tensor::randn([64, 33], &dev)?;
        let cube: Vec<u32> = x
            .to_vec::<f32>()?
            .iter()
            .map(|v| (v * v * v).to_bits())
            .collect();
        let powf: Vec<u32> = x
            .to_vec::<f32>()?
            .iter()
            .map(|v| v.powf(3.0).to_bits())
            .collect();
        assert!(powf != cube, "the inputs must tell x * x * x from powf");
        assert!(
            bits(&x.pow_scalar(3.0)?) == cube,
            "{dev}: pow_scalar(3) is not x * x * x"
        );
        let fast = compile(f);
        for _ in 0..3 {
            let xs = std::slice::from_ref(&x);
            let (got, want) = (fast.call(xs)?, f(xs)?);
            assert!(
                bits(&got[1]) == cube,
                "{dev}: a lone Pow(x, 3) is not x * x * x"
            );
            if !dev.is_gpu() {
                assert!(
                    bits(&got[0]) == bits(&want[0]),
                    "{dev}: graph and eager differ"
                );
                assert!(bits(&got[2]) == powf, "{dev}: x.pow(tensor) is not powf");
                assert!(bits(&want[2]) == powf, "{dev}: eager x.pow(tensor)");
            } else {
                // The generated kernel may contract `a * b + c` where eager's kernels could not.
                assert_close(
                    &format!("{dev}"),
                    &vals(&got[0]),
                    &vals(&want[0]),
                    1e-5,
                    1e-6,
                );
            }
        }
        let e = fast.explain();
        let groups = &e.graphs[0].fused_groups;
        assert_eq!(groups.len(), 1, "{e}");
        assert_eq!(groups[0].len(), 11, "{e}");
    }
    // The same graph from a file, loaded frozen: its constants are folded the same way, but
    // its `Pow` nodes are ONNX's (powf): the chain reads `x` and the exponent.
    let dev = Device::Cpu;
    let x = Tensor::randn([64, 33], &dev)?;
    let bytes = wgtorch::onnx::export_bytes(
        &wgtorch::nn::Sequential::new(),
        std::slice::from_ref(&x),
        f,
        Default::default(),
    )?;
    let m = wgtorch::onnx::Model::load_bytes(&bytes, &dev)?;
    assert_eq!(m.fused_groups().len(), 1);
    let xs = std::slice::from_ref(&x);
    let (got, want) = (m.run(xs)?, f(xs)?);
    let powf: Vec<u32> = x
        .to_vec::<f32>()?
        .iter()
        .map(|v| v.powf(3.0).to_bits())
        .collect();
    assert!(bits(&got[1]) == powf && bits(&got[2]) == powf);
    assert_close("frozen", &vals(&got[0]), &vals(&want[0]), 1e-6, 1e-7);
    Ok(())
}
