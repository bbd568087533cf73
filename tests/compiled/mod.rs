//! `wgtorch::compile`: compiled forward passes against the eager module, on the CPU and the GPU.

mod functions;
mod recurrent;

use crate::common::{assert_close, devices, seed_lock, vals};
use wgtorch::compile::{compile_module, compile_module_with, CompileOptions};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{
    BatchNorm2d, Conv2d, Conv2dOptions, Forward, Kind, Linear, Module, ModuleExt, ReLU, Sequential,
};
use wgtorch::optim::{Optimizer, Sgd};
use wgtorch::{Device, Result, Tensor};

/// conv → bn → relu → conv → (+ x) → relu → mean → linear: a residual block and a head.
#[derive(Module)]
struct Block {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    fc: Linear,
}

impl Block {
    fn new(dev: &Device) -> Result<Block> {
        let same = Conv2dOptions {
            padding: 1.into(),
            ..Default::default()
        };
        Ok(Block {
            conv1: Conv2d::with_options(4, 4, 3, same, dev)?,
            bn1: BatchNorm2d::new(4, dev)?,
            conv2: Conv2d::with_options(4, 4, 3, same, dev)?,
            fc: Linear::new(4, 3, dev)?,
        })
    }
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.bn1.forward(&self.conv1.forward(x)?)?.relu()?;
        let y = self.conv2.forward(&y)?.add(x)?.relu()?;
        self.fc.forward(&y.mean_dims([2, 3], false)?)
    }
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn compiled_modules_compute_what_the_module_computes() -> Result<()> {
    let _g = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(1);
        // SimpleCNN: every conv → relu runs fused, and gives eager's bits.
        let mut cnn = SimpleCnn::new(&dev)?;
        cnn.eval();
        let fast = compile_module(&cnn);
        let x = Tensor::randn([2, 3, 32, 32], &dev)?;
        for _ in 0..2 {
            assert_eq!(bits(&fast.forward(&x)?), bits(&cnn.forward(&x)?), "{dev}");
        }
        let e = fast.explain();
        assert_eq!(e.graphs.len(), 1, "{e}");
        assert!(e.graphs[0].fused_nodes > 0, "{e}");
        assert_eq!(fast.stats().cache_hits, 1);

        // A residual block with batch norm (running statistics) and a head.
        let mut block = Block::new(&dev)?;
        // Non-trivial running statistics.
        block.forward(&Tensor::randn([8, 4, 5, 5], &dev)?.mul_scalar(2.0)?)?;
        block.eval();
        let fast = compile_module(&block);
        for shape in [[2, 4, 5, 5], [3, 4, 5, 5], [2, 4, 5, 5]] {
            let x = Tensor::randn(shape, &dev)?;
            assert_close(
                &format!("{dev} block {shape:?}"),
                &vals(&fast.forward(&x)?),
                &vals(&block.forward(&x)?),
                1e-5,
                1e-6,
            );
        }
        let s = fast.stats();
        assert_eq!(
            (s.graphs, s.recompiles, s.cache_hits, s.eager_calls),
            (2, 1, 1, 0)
        );
    }
    Ok(())
}

#[test]
fn compiled_graphs_read_the_live_parameters_and_pass_gradients() -> Result<()> {
    let _g = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(2);
        let mut block = Block::new(&dev)?;
        block.eval();
        let fast = compile_module(&block);
        let x = Tensor::randn([2, 4, 5, 5], &dev)?;
        fast.forward(&x)?;
        // Gradients through the graph reach the module's parameters, as eager's do.
        let mut opt = Sgd::new(block.parameters(), 0.5)?;
        fast.forward(&x)?.square()?.sum_all()?.backward()?;
        let compiled_grads: Vec<Vec<f64>> = block
            .parameters()
            .iter()
            .map(|p| vals(&p.grad().unwrap()))
            .collect();
        opt.zero_grad();
        block.forward(&x)?.square()?.sum_all()?.backward()?;
        for (p, g) in block.parameters().iter().zip(&compiled_grads) {
            assert_close(
                &format!("{dev} grad"),
                g,
                &vals(&p.grad().unwrap()),
                1e-5,
                1e-6,
            );
        }
        // An optimizer step (in place) is seen without a recompile.
        opt.step()?;
        assert_close(
            &format!("{dev} after a step"),
            &vals(&fast.forward(&x)?),
            &vals(&block.forward(&x)?),
            1e-5,
            1e-6,
        );
        assert_eq!(fast.stats().graphs, 1);
        // Values copied in (as load_state_dict does; it needs `&mut`, so outside the borrow):
        // seen, no recompile.
        let mut other = Block::new(&dev)?;
        other.eval();
        let state = other.state_dict();
        let _ng = wgtorch::no_grad();
        for ((_, p), (_, q)) in block.state_dict().iter().zip(&state) {
            p.copy_(q)?;
        }
        drop(_ng);
        assert_eq!(bits(&fast.forward(&x)?), bits(&other.forward(&x)?));
        assert_eq!(fast.stats().graphs, 1);
    }
    // A parameter replaced by another tensor (a module with interior mutability can do it
    // through the shared borrow): the graphs go, the next call recompiles.
    let dev = Device::Cpu;
    let m = Swappable {
        w: std::sync::Mutex::new(Tensor::randn([4, 3], &dev)?),
    };
    let fast = compile_module(&m);
    let x = Tensor::randn([2, 4], &dev)?;
    assert_eq!(bits(&fast.forward(&x)?), bits(&m.forward(&x)?));
    *m.w.lock().unwrap() = Tensor::randn([4, 3], &dev)?;
    assert_eq!(bits(&fast.forward(&x)?), bits(&m.forward(&x)?));
    let s = fast.stats();
    assert_eq!((s.graphs, s.recompiles, s.cache_hits), (2, 1, 0));
    Ok(())
}

/// `x @ w`, with `w` replaceable through `&self`.
struct Swappable {
    w: std::sync::Mutex<Tensor>,
}
impl Module for Swappable {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("w", &self.w.lock().unwrap(), Kind::Param)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("w", self.w.get_mut().unwrap(), Kind::Param)
    }
}
impl Forward for Swappable {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w.lock().unwrap())
    }
}

/// Adds a value the forward pass reads on the host.
#[derive(Module)]
struct ReadsBack {
    fc: Linear,
}
impl Forward for ReadsBack {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.fc.forward(x)?;
        let m = y.sum_all()?.item()?; // a data-dependent branch
        if m > 0.0 {
            y.relu()
        } else {
            y.neg()
        }
    }
}

/// Scales by a weight read on the host.
#[derive(Module)]
struct Scaled {
    fc: Linear,
}
impl Forward for Scaled {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = self.fc.weight.to_vec::<f32>()?[0] as f64;
        self.fc.forward(x)?.mul_scalar(s)
    }
}

/// Adds noise: a random draw in the forward pass.
#[derive(Module)]
struct Noisy {
    fc: Linear,
}
impl Forward for Noisy {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc
            .forward(x)?
            .add(&Tensor::randn([x.shape()[0], 3], &x.device())?)
    }
}

#[test]
fn what_a_graph_cannot_hold_runs_eagerly_with_the_reason() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    // A host read of a computed value: each call takes its own branch, as eager does.
    let rb = ReadsBack {
        fc: Linear::new(4, 3, &dev)?,
    };
    let fast = compile_module(&rb);
    for s in [1.0, -1.0] {
        let x = Tensor::randn([2, 4], &dev)?.mul_scalar(s)?;
        assert_eq!(bits(&fast.forward(&x)?), bits(&rb.forward(&x)?));
    }
    let e = fast.explain();
    assert_eq!(e.stats.graphs, 0);
    assert!(e.eager[0].1.contains("reads a float32 tensor"), "{e}");
    assert!(e.eager[0].1.contains("item"), "{e}");
    let strict = compile_module_with(
        &rb,
        CompileOptions {
            fullgraph: true,
            ..Default::default()
        },
    );
    let err = strict
        .forward(&Tensor::randn([2, 4], &dev)?)
        .unwrap_err()
        .to_string();
    assert!(err.contains("fullgraph") && err.contains("item"), "{err}");

    // A parameter read on the host: its value would go stale in the graph.
    let scaled = Scaled {
        fc: Linear::new(4, 3, &dev)?,
    };
    let fast = compile_module(&scaled);
    fast.forward(&Tensor::randn([2, 4], &dev)?)?;
    let e = fast.explain();
    assert!(e.eager[0].1.contains("on the host (to_vec)"), "{e}");

    // A random draw: eager, drawing exactly what eager draws.
    let noisy = Noisy {
        fc: Linear::new(4, 3, &dev)?,
    };
    let fast = compile_module(&noisy);
    let x = Tensor::randn([2, 4], &dev)?;
    for _ in 0..2 {
        wgtorch::manual_seed(9);
        let a = fast.forward(&x)?;
        wgtorch::manual_seed(9);
        assert_eq!(bits(&a), bits(&noisy.forward(&x)?));
    }
    let e = fast.explain();
    assert!(e.eager[0].1.contains("random"), "{e}");
    assert_eq!(e.stats.eager_calls, 2);

    // Dropout in training mode: a random draw.
    let cnn = Sequential::new()
        .append(Linear::new(4, 3, &dev)?)
        .append(ReLU::new())
        .append(wgtorch::nn::Dropout::new(0.1)?);
    let fast = compile_module(&cnn);
    fast.forward(&x)?;
    assert!(
        fast.explain().eager[0].1.contains("random"),
        "{}",
        fast.explain()
    );

    // Autocast.
    let fc = Linear::new(4, 3, &dev)?;
    let fast = compile_module(&fc);
    let y = {
        let _ac = wgtorch::amp::autocast(&dev, wgtorch::DType::BF16);
        fast.forward(&x)?
    };
    assert_eq!(y.dtype(), wgtorch::DType::BF16);
    assert!(
        fast.explain().eager[0].1.contains("autocast to bfloat16"),
        "{}",
        fast.explain()
    );

    // More signatures than the cache holds.
    let fc = Linear::new(4, 3, &dev)?;
    let fast = compile_module_with(
        &fc,
        CompileOptions {
            cache_size_limit: 1,
            ..Default::default()
        },
    );
    fast.forward(&Tensor::randn([2, 4], &dev)?)?;
    let x3 = Tensor::randn([3, 4], &dev)?;
    assert_eq!(bits(&fast.forward(&x3)?), bits(&fc.forward(&x3)?));
    let e = fast.explain();
    assert!(e.eager[0].1.contains("cache_size_limit (1)"), "{e}");

    // Bad input is the module's own error, not a fallback.
    let fast = compile_module(&fc);
    let err = fast
        .forward(&Tensor::randn([2, 5], &dev)?)
        .unwrap_err()
        .to_string();
    let eager = fc
        .forward(&Tensor::randn([2, 5], &dev)?)
        .unwrap_err()
        .to_string();
    assert_eq!(err, eager);
    assert_eq!(fast.stats().eager_calls, 0);
    Ok(())
}

/// `tanh(gelu(fc(x)) * 0.5 + x)`: the elementwise tail after the linear layer (a compiled graph
/// writes GELU as one `Gelu` node) runs as one fused kernel in the compiled graph
/// (`explain` names its ops), with eager's values (the graph's
/// `Gemm` may round the product differently from `Linear`; the fused kernel's own bits are
/// tested against the ops in tests/parity/fused.rs).
#[derive(Module)]
struct GeluTail {
    fc: Linear,
}

impl Forward for GeluTail {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.forward(x)?.gelu()?.mul_scalar(0.5)?.add(x)?.tanh()
    }
}

#[test]
fn compiled_elementwise_chains_run_as_one_kernel() -> Result<()> {
    let _g = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(3);
        let mut m = GeluTail {
            fc: Linear::new(6, 6, &dev)?,
        };
        m.eval();
        let fast = compile_module(&m);
        let x = Tensor::randn([5, 6], &dev)?;
        let _nograd = wgtorch::no_grad();
        for _ in 0..2 {
            let (a, b) = (fast.forward(&x)?, m.forward(&x)?);
            assert_close(&format!("{dev}"), &vals(&a), &vals(&b), 1e-5, 1e-6);
        }
        let e = fast.explain();
        // GELU is one node (a compiled graph takes the newest opset), fused with what follows.
        let groups = &e.graphs[0].fused_groups;
        let want = ["Gelu", "Mul", "Add", "Tanh"].map(String::from);
        assert!(groups.iter().any(|g| g[..] == want[..]), "{e}");
        assert!(e.to_string().contains("one kernel: "), "{e}");
    }
    Ok(())
}

/// Training through a compiled module: the graph's fused elementwise tail backpropagates through
/// generated kernels; losses, gradients and SGD steps follow eager's (to the graph's rounding of
/// the product).
#[test]
fn compiled_modules_train_as_eager_modules_do() -> Result<()> {
    let _g = seed_lock();
    for dev in devices() {
        wgtorch::manual_seed(4);
        let m = GeluTail {
            fc: Linear::new(6, 6, &dev)?,
        };
        let twin = GeluTail {
            fc: Linear::new(6, 6, &dev)?,
        };
        let _ng = wgtorch::no_grad();
        twin.fc.weight.copy_(&m.fc.weight)?;
        twin.fc
            .bias
            .as_ref()
            .unwrap()
            .copy_(m.fc.bias.as_ref().unwrap())?;
        drop(_ng);
        let fast = compile_module(&m);
        let mut opt = Sgd::new(m.parameters(), 0.1)?;
        let mut twin_opt = Sgd::new(twin.parameters(), 0.1)?;
        let x = Tensor::randn([5, 6], &dev)?.requires_grad_(true);
        let target = Tensor::randn([5, 6], &dev)?;
        for step in 0..3 {
            let what = format!("{dev} step {step}");
            opt.zero_grad();
            twin_opt.zero_grad();
            x.set_grad(None);
            let y = fast.forward(&x)?;
            // The graph's last node is the fused tail, and it keeps its autograd node.
            assert_eq!(y.grad_fn().map(|n| n.name()), Some("fused"), "{what}");
            let loss = y.sub(&target)?.square()?.mean_all()?;
            loss.backward()?;
            let dx = vals(&x.grad().unwrap());
            x.set_grad(None);
            let eager_loss = twin.forward(&x)?.sub(&target)?.square()?.mean_all()?;
            eager_loss.backward()?;
            assert_close(&what, &vals(&loss), &vals(&eager_loss), 1e-5, 1e-6);
            assert_close(&what, &dx, &vals(&x.grad().unwrap()), 1e-5, 1e-6);
            for (p, q) in m.parameters().iter().zip(twin.parameters()) {
                let (gp, gq) = (p.grad().unwrap(), q.grad().unwrap());
                assert_close(&what, &vals(&gp), &vals(&gq), 1e-5, 1e-6);
            }
            opt.step()?;
            twin_opt.step()?;
        }
        let s = fast.stats();
        assert_eq!((s.graphs, s.cache_hits, s.eager_calls), (1, 2, 0), "{dev}");
    }
    Ok(())
}

/// Counts its calls in a buffer, as BatchNorm's `num_batches_tracked` does.
#[derive(Module)]
struct Counting {
    fc: Linear,
    #[buffer]
    calls: Tensor,
}

impl Forward for Counting {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        {
            let _ng = wgtorch::no_grad();
            self.calls.add_(&Tensor::ones([1], &x.device())?)?;
        }
        self.fc.forward(x)
    }
}

/// A forward pass that writes the module's state in place (a counter; BatchNorm's running
/// statistics in training mode) runs eagerly, and the state changes once per call (the capture's
/// write undone), as eager's does. The eval-mode signature is another, compiled, graph.
#[test]
fn in_place_state_updates_run_eagerly_once() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    let counting = Counting {
        fc: Linear::new(4, 3, &dev)?,
        calls: Tensor::zeros([1], &dev)?,
    };
    let fast = compile_module(&counting);
    let x = Tensor::randn([2, 4], &dev)?;
    for _ in 0..2 {
        assert_eq!(bits(&fast.forward(&x)?), bits(&counting.fc.forward(&x)?));
    }
    assert_eq!(counting.calls.to_vec::<f32>()?, [2.0]);
    let e = fast.explain();
    assert_eq!(e.stats.eager_calls, 2, "{e}");
    assert!(e.eager[0].1.contains("writes 'calls' in place"), "{e}");
    // With fullgraph the call is an error, and changes nothing.
    let strict = compile_module_with(
        &counting,
        CompileOptions {
            fullgraph: true,
            ..Default::default()
        },
    );
    let err = strict.forward(&x).unwrap_err().to_string();
    assert!(
        err.contains("fullgraph") && err.contains("'calls'"),
        "{err}"
    );
    assert_eq!(counting.calls.to_vec::<f32>()?, [2.0]);
    // A capture that fails (a random draw) and is refused leaves the generator as it was.
    let noisy = Noisy {
        fc: Linear::new(4, 3, &dev)?,
    };
    let strict = compile_module_with(
        &noisy,
        CompileOptions {
            fullgraph: true,
            ..Default::default()
        },
    );
    wgtorch::manual_seed(11);
    assert!(strict.forward(&x).is_err());
    let after = Tensor::randn([4], &dev)?;
    wgtorch::manual_seed(11);
    assert_eq!(bits(&after), bits(&Tensor::randn([4], &dev)?));

    wgtorch::manual_seed(5);
    let mut block = Block::new(&dev)?;
    let mut twin = Block::new(&dev)?;
    twin.load_state_dict(&block.state_dict(), true)?;
    let x = Tensor::randn([4, 4, 5, 5], &dev)?;
    {
        let fast = compile_module(&block);
        for _ in 0..2 {
            assert_eq!(bits(&fast.forward(&x)?), bits(&twin.forward(&x)?));
        }
        let e = fast.explain();
        assert_eq!(e.stats.eager_calls, 2, "{e}");
        assert!(
            e.eager[0].1.contains("writes 'bn1.running_mean' in place"),
            "{e}"
        );
        assert!(e.eager[0].0.ends_with("(training)"), "{e}");
    }
    for ((n, a), (_, b)) in block.state_dict().iter().zip(&twin.state_dict()) {
        assert_eq!(vals(a), vals(b), "{n}");
    }
    // Refused with fullgraph: the running statistics stay as they were.
    {
        let strict = compile_module_with(
            &block,
            CompileOptions {
                fullgraph: true,
                ..Default::default()
            },
        );
        assert!(strict.forward(&x).is_err());
    }
    for ((n, a), (_, b)) in block.state_dict().iter().zip(&twin.state_dict()) {
        assert_eq!(vals(a), vals(b), "{n} after a refused call");
    }
    block.eval();
    twin.eval();
    let fast = compile_module(&block);
    assert_close(
        "eval",
        &vals(&fast.forward(&x)?),
        &vals(&twin.forward(&x)?),
        1e-5,
        1e-6,
    );
    assert_eq!(fast.stats().graphs, 1);
    Ok(())
}

/// Scales by a tensor that requires grad but is not registered as a parameter.
#[derive(Module)]
struct HiddenLeaf {
    fc: Linear,
    #[module(skip)]
    scale: Tensor,
}

impl Forward for HiddenLeaf {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.forward(x)?.mul(&self.scale)
    }
}

/// The graph reads such a tensor live, as a captured one: the tensor gets its gradient through
/// the graph, as in eager mode.
#[test]
fn a_leaf_that_is_no_parameter_keeps_its_gradient() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    let m = HiddenLeaf {
        fc: Linear::new(4, 3, &dev)?,
        scale: Tensor::randn([3], &dev)?.requires_grad_(true),
    };
    let fast = compile_module(&m);
    let x = Tensor::randn([2, 4], &dev)?;
    fast.forward(&x)?.sum_all()?.backward()?;
    let compiled = m.scale.grad().expect("the leaf's gradient");
    m.scale.set_grad(None);
    m.forward(&x)?.sum_all()?.backward()?;
    assert_eq!(bits(&compiled), bits(&m.scale.grad().unwrap()));
    let e = fast.explain();
    assert_eq!((e.stats.graphs, e.stats.eager_calls), (1, 0), "{e}");
    Ok(())
}

/// `train_cnn --compile` trains through one compiled graph per batch shape, to eager's losses.
#[test]
fn train_cnn_compiles_its_forward_pass() {
    let Some(bin) = crate::example_bin("train_cnn") else {
        return;
    };
    let run = |compile: bool| -> String {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["--epochs", "1", "--max-batches", "3", "--device", "cpu"]);
        if compile {
            cmd.arg("--compile");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (eager, compiled) = (run(false), run(true));
    assert!(
        compiled.contains("compiled: 1 graphs, 2 cache hits, 0 eager calls"),
        "{compiled}"
    );
    // The epoch line up to its throughput: the same loss and accuracy.
    let summary = |s: &str| {
        let line = s
            .lines()
            .find(|l| l.starts_with("epoch"))
            .expect("an epoch line");
        line[..line.find(" img/s").unwrap()]
            .rsplit_once("  ")
            .unwrap()
            .0
            .to_string()
    };
    assert_eq!(summary(&compiled), summary(&eager));
}

/// Reads its weight through `detach()`: the detached tensor shares the parameter's storage.
#[derive(Module)]
struct Detached {
    fc: Linear,
}

impl Forward for Detached {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.fc.weight.detach().t()?)
    }
}

/// Ops the tracer does not record run eagerly with the reason; a detached view of a parameter
/// is read live, never held as a constant (after an in-place update of the parameter, as an
/// optimizer step makes, the compiled call still gives eager's result, without a recompile).
#[test]
fn unrecorded_ops_run_eagerly_and_detached_parameters_are_read_live() -> Result<()> {
    let _g = seed_lock();
    let dev = Device::Cpu;
    let x = Tensor::randn([2, 4], &dev)?;
    let m = Detached {
        fc: Linear::new(4, 3, &dev)?,
    };
    let fast = compile_module(&m);
    assert_eq!(bits(&fast.forward(&x)?), bits(&m.forward(&x)?));
    {
        let _ng = wgtorch::no_grad();
        m.fc.weight.add_(&Tensor::ones([3, 4], &dev)?)?;
    }
    assert_eq!(bits(&fast.forward(&x)?), bits(&m.forward(&x)?));
    let s = fast.stats();
    assert_eq!((s.graphs, s.eager_calls), (1, 0), "{}", fast.explain());
    let cum = CumsumHead {
        fc: Linear::new(4, 3, &dev)?,
    };
    let fast = compile_module(&cum);
    assert_eq!(bits(&fast.forward(&x)?), bits(&cum.forward(&x)?));
    let e = fast.explain();
    assert!(
        e.eager[0]
            .1
            .contains("not computed from the inputs by recorded ops (it comes from cumsum"),
        "{e}"
    );
    Ok(())
}

/// A cumulative sum, which ONNX export does not write.
#[derive(Module)]
struct CumsumHead {
    fc: Linear,
}

impl Forward for CumsumHead {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.forward(x)?.cumsum(1)
    }
}
