//! Recurrent layers in compiled graphs: `LSTM` and `GRU` run as ONNX's LSTM/GRU nodes and train
//! as eager; `nn.RNN` and a projected LSTM, which have no node here, run eagerly with the reason.

use super::bits;
use crate::common::{assert_close, devices, seed_lock, vals};
use wgtorch::compile::compile_module;
use wgtorch::nn::{Embedding, Forward, Module, ModuleExt, RNNOptions, GRU, LSTM, RNN};
use wgtorch::optim::{Optimizer, Sgd};
use wgtorch::{compile, Device, Result, Tensor};

/// A word LM's forward pass (embedding → 2-layer batch-first LSTM from a state given from outside
/// → decoder tied to the embedding), a bidirectional GRU and a bidirectional LSTM without biases
/// over the LSTM's output: three steps
/// of compiled calls give eager's outputs and the gradients of every parameter and of both
/// initial states; the optimizer's updates between the steps are read live.
#[test]
fn lstm_and_gru_compile_and_train_as_eager() -> Result<()> {
    let _g = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(7);
        let (vocab, feat, batch, steps) = (13, 6, 3, 4);
        let emb = Embedding::new(vocab, feat, &dev)?;
        let lstm = LSTM::with_options(
            feat,
            feat,
            RNNOptions {
                num_layers: 2,
                batch_first: true,
                ..Default::default()
            },
            &dev,
        )?;
        let gru = GRU::with_options(
            feat,
            5,
            RNNOptions {
                bidirectional: true,
                ..Default::default()
            },
            &dev,
        )?;
        // Both directions, no biases: the marked node's reverse direction and its missing B.
        let bilstm = LSTM::with_options(
            feat,
            4,
            RNNOptions {
                bias: false,
                bidirectional: true,
                batch_first: true,
                ..Default::default()
            },
            &dev,
        )?;
        let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
            let (out, (h, c)) =
                lstm.forward_with_state(&emb.forward(&xs[0])?, Some((&xs[1], &xs[2])))?;
            let logits = out.linear(&emb.weight, None)?;
            let (g, h_g) = gru.forward_with_state(&out.transpose(0, 1)?, None)?;
            let (b, (h_b, c_b)) = bilstm.forward_with_state(&out, None)?;
            Ok(vec![logits, h, c, g, h_g, b, h_b, c_b])
        };
        let fast = compile(f);
        let tokens: Vec<i64> = (0..batch * steps)
            .map(|i| (i * 5 + 2) as i64 % 13)
            .collect();
        let x = Tensor::from_vec(tokens, [batch, steps], &dev)?;
        let h0 = Tensor::randn([2, batch, feat], &dev)?.requires_grad_(true);
        let c0 = Tensor::randn([2, batch, feat], &dev)?.requires_grad_(true);
        let mut params = emb.parameters();
        params.extend(lstm.parameters());
        params.extend(gru.parameters());
        params.extend(bilstm.parameters());

        let mut opt = Sgd::new(params.clone(), 0.5)?;
        // A weight per output element, so that no gradient is a plain sum.
        let weights: Vec<Tensor> = f(&[x.clone(), h0.clone(), c0.clone()])?
            .iter()
            .map(|o| Tensor::randn(o.shape(), &dev))
            .collect::<Result<_>>()?;
        // (output values, gradients of the parameters and of both states)
        type Values = (Vec<Vec<f64>>, Vec<Vec<f64>>);
        let grads = |outs: Vec<Tensor>| -> Result<Values> {
            for p in &params {
                p.set_grad(None);
            }
            h0.set_grad(None);
            c0.set_grad(None);
            let mut loss = Tensor::zeros([], &dev)?;
            for (o, w) in outs.iter().zip(&weights) {
                loss = loss.add(&o.mul(w)?.sum_all()?)?;
            }
            loss.backward()?;
            let values = outs.iter().map(vals).collect();
            let mut g: Vec<Vec<f64>> = params.iter().map(|p| vals(&p.grad().unwrap())).collect();
            g.push(vals(&h0.grad().unwrap()));
            g.push(vals(&c0.grad().unwrap()));
            Ok((values, g))
        };
        for step in 0..3 {
            let inputs = [x.clone(), h0.clone(), c0.clone()];
            let (got, got_grads) = grads(fast.call(&inputs)?)?;
            let (want, want_grads) = grads(f(&inputs)?)?;
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_close(&format!("{dev} step {step} output {k}"), g, w, 1e-5, 1e-6);
            }
            for (k, (g, w)) in got_grads.iter().zip(&want_grads).enumerate() {
                assert_close(&format!("{dev} step {step} gradient {k}"), g, w, 1e-4, 1e-5);
            }
            // Eager's gradients are the ones left: both paths step from the same values.
            opt.step()?;
        }
        let e = fast.explain();
        assert_eq!(
            (e.stats.graphs, e.stats.cache_hits, e.stats.eager_calls),
            (1, 2, 0),
            "{dev}: {e}"
        );
    }
    Ok(())
}

/// A compiled LSTM reads its live weights in the module's gate order (its node is marked for the
/// importer): each time step dispatches, forward and backward, what eager's step does, and the
/// call adds less than a step's worth (reordering the weights and their gradients at every call
/// added 246 dispatches to eager's 247 at 3 steps).
#[test]
fn compiled_lstm_steps_dispatch_what_eager_steps_do() -> Result<()> {
    let _g = seed_lock();
    let Some(dev) = devices().into_iter().find(Device::is_gpu) else {
        eprintln!("no GPU adapter: the dispatch counts are not checked");
        return Ok(());
    };
    let Device::Gpu(n) = dev else { unreachable!() };
    let ctx = wgtorch::backend::gpu::context(n)?;
    wgtorch::manual_seed(9);
    let lstm = LSTM::with_options(
        4,
        5,
        RNNOptions {
            num_layers: 2,
            ..Default::default()
        },
        &dev,
    )?;
    let fast = compile_module(&lstm);
    let mut per_call = Vec::new();
    for steps in [3, 6] {
        let x = Tensor::randn([steps, 2, 4], &dev)?;
        let count = |compiled: bool| -> Result<u64> {
            let d0 = ctx.stats().dispatches;
            let y = if compiled {
                fast.forward(&x)?
            } else {
                lstm.forward(&x)?
            };
            y.sum_all()?.backward()?;
            lstm.visit(&mut |_, p, _| p.set_grad(None));
            Ok(ctx.stats().dispatches - d0)
        };
        // The first call traces and checks. Then the fewest of three calls: other tests share
        // the context's count and can only add to it (a concurrent test's kernels once landed in
        // eager's window, 228 against 212).
        count(true)?;
        let fewest = |compiled: bool| -> Result<u64> {
            Ok(count(compiled)?.min(count(compiled)?).min(count(compiled)?))
        };
        per_call.push((fewest(false)?, fewest(true)?));
    }
    let (eager, compiled) = (per_call[1].0 - per_call[0].0, per_call[1].1 - per_call[0].1);
    assert_eq!(compiled, eager, "dispatches for 3 more steps: {per_call:?}");
    // What the graph adds per call (its bias concatenation, the stacked outputs) is less than
    // one more time step of eager's.
    for &(e, c) in &per_call {
        assert!(
            (c as i64) - (e as i64) < (eager / 3) as i64,
            "dispatches per call: {per_call:?}"
        );
    }
    assert_eq!(fast.stats().eager_calls, 0);
    Ok(())
}

/// `nn.RNN` and an LSTM with `proj_size` have no ONNX node here: a compiled call runs them
/// eagerly, gives eager's bits and gradients, and says why.
#[test]
fn recurrent_layers_without_a_node_run_eagerly_with_the_reason() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    wgtorch::manual_seed(8);
    let rnn = RNN::new(4, 3, &dev)?;
    let projected = LSTM::with_options(
        4,
        3,
        RNNOptions {
            proj_size: 2,
            ..Default::default()
        },
        &dev,
    )?;
    let x = Tensor::randn([5, 2, 4], &dev)?;
    for (what, f) in [
        (
            "nn.RNN",
            Box::new(|xs: &[Tensor]| Ok(vec![rnn.forward(&xs[0])?]))
                as Box<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>>,
        ),
        (
            "proj_size",
            Box::new(|xs: &[Tensor]| Ok(vec![projected.forward(&xs[0])?])),
        ),
    ] {
        let fast = compile(&f);
        let module: &dyn Module = if what == "nn.RNN" { &rnn } else { &projected };
        for _ in 0..2 {
            let got = fast.call(std::slice::from_ref(&x))?.remove(0);
            let want = f(std::slice::from_ref(&x))?.remove(0);
            assert_eq!(bits(&got), bits(&want), "{what}");
            let grad = |y: Tensor| -> Result<Vec<u32>> {
                module.visit(&mut |_, p, _| p.set_grad(None));
                y.sum_all()?.backward()?;
                let mut g = Vec::new();
                module.visit(&mut |_, p, _| g.extend(bits(&p.grad().unwrap())));
                Ok(g)
            };
            assert_eq!(grad(got)?, grad(want)?, "{what}");
        }
        let e = fast.explain();
        assert_eq!((e.stats.graphs, e.stats.eager_calls), (0, 2), "{what}: {e}");
        assert!(e.eager[0].1.contains(what), "{what}: {e}");
    }
    Ok(())
}
