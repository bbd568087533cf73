//! `#[derive(Module)]` and the module API (issue #12, item 3): names equal to PyTorch's for an
//! equivalent module, train/eval reaching every descendant, named_modules / children / apply /
//! downcasts, ModuleDict, generics, and a forward with any signature.

mod common;

use common::{assert_close, vals};
use std::marker::PhantomData;
use wgtorch::nn::{
    init, BatchNorm2d, Conv2d, Dropout, Forward, Kind, LayerNorm, Linear, LinearOptions, MaxPool2d,
    Module, ModuleDict, ModuleExt, ModuleList, ReLU, Sequential,
};
use wgtorch::{DType, Device, Result, Tensor};

#[derive(Module)]
struct Block {
    fc: Linear,
    drop: Dropout,
    ln: LayerNorm,
}

impl Block {
    fn new(dev: &Device) -> Result<Block> {
        Ok(Block {
            fc: Linear::new(4, 4, dev)?,
            drop: Dropout::new(0.5)?,
            ln: LayerNorm::new(&[4], dev)?,
        })
    }
}

/// The PyTorch module the names below come from (torch 2.x):
///
/// ```python
/// class Net(nn.Module):
///     def __init__(self):
///         super().__init__()
///         self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
///         self.blocks = nn.ModuleList([Block(), Block()])   # Block: fc Linear, drop Dropout, ln LayerNorm
///         self.proj = None
///         self.heads = nn.ModuleDict({"policy": nn.Linear(4, 2), "value": nn.Linear(4, 1)})
///         self.out = nn.Linear(4, 2, bias=False)
///         self.scale = nn.Parameter(torch.ones(4))
///         self.register_buffer("step", torch.zeros(()))
/// ```
#[derive(Module)]
struct Net {
    features: Sequential,
    blocks: Vec<Block>,
    proj: Option<Linear>,
    heads: ModuleDict,
    out: Linear,
    #[param]
    scale: Tensor,
    #[buffer]
    step: Tensor,
    hidden: usize,
    dtype: DType,
}

impl Net {
    fn new(dev: &Device) -> Result<Net> {
        let mut heads = ModuleDict::new();
        heads.insert("policy", Linear::new(4, 2, dev)?)?;
        heads.insert("value", Linear::new(4, 1, dev)?)?;
        Ok(Net {
            features: Sequential::new()
                .append(Conv2d::new(1, 4, 3, dev)?)
                .append(BatchNorm2d::new(4, dev)?)
                .append(ReLU::new())
                .append(MaxPool2d::new(2)),
            blocks: vec![Block::new(dev)?, Block::new(dev)?],
            proj: None,
            heads,
            out: Linear::with_options(4, 2, LinearOptions { bias: false }, dev)?,
            scale: Tensor::ones([4], dev)?.requires_grad_(true),
            step: Tensor::zeros([], dev)?,
            hidden: 4,
            dtype: DType::F32,
        })
    }
}

fn names(v: Vec<(String, Tensor)>) -> Vec<String> {
    v.into_iter().map(|(n, _)| n).collect()
}

#[test]
fn names_match_pytorch_for_an_equivalent_module() -> Result<()> {
    let net = Net::new(&Device::Cpu)?;
    assert_eq!(
        names(net.state_dict()),
        [
            "scale",
            "step",
            "features.0.weight",
            "features.0.bias",
            "features.1.weight",
            "features.1.bias",
            "features.1.running_mean",
            "features.1.running_var",
            "features.1.num_batches_tracked",
            "blocks.0.fc.weight",
            "blocks.0.fc.bias",
            "blocks.0.ln.weight",
            "blocks.0.ln.bias",
            "blocks.1.fc.weight",
            "blocks.1.fc.bias",
            "blocks.1.ln.weight",
            "blocks.1.ln.bias",
            "heads.policy.weight",
            "heads.policy.bias",
            "heads.value.weight",
            "heads.value.bias",
            "out.weight"
        ]
    );
    assert_eq!(
        names(net.named_buffers()),
        [
            "step",
            "features.1.running_mean",
            "features.1.running_var",
            "features.1.num_batches_tracked"
        ]
    );
    assert_eq!(net.named_parameters().len(), 18);
    let modules: Vec<String> = net.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        modules,
        [
            "",
            "features",
            "features.0",
            "features.1",
            "features.2",
            "features.3",
            "blocks",
            "blocks.0",
            "blocks.0.fc",
            "blocks.0.drop",
            "blocks.0.ln",
            "blocks.1",
            "blocks.1.fc",
            "blocks.1.drop",
            "blocks.1.ln",
            "heads",
            "heads.policy",
            "heads.value",
            "out"
        ]
    );
    let kids: Vec<String> = net.named_children().into_iter().map(|(n, _)| n).collect();
    assert_eq!(kids, ["features", "blocks", "heads", "out"]);
    assert_eq!(net.children().len(), 4);
    assert_eq!(net.modules().len(), 19);
    // Concrete layers are reachable from the listing.
    let nm = net.named_modules();
    assert!(nm[2].1.is::<Conv2d>() && nm[3].1.is::<BatchNorm2d>() && nm[5].1.is::<MaxPool2d>());
    assert!(nm[6].1.is::<Vec<Block>>() && nm[7].1.is::<Block>() && nm[15].1.is::<ModuleDict>());
    assert_eq!(nm[0].1.downcast_ref::<Net>().map(|n| n.hidden), Some(4));
    assert_eq!(net.dtype, DType::F32);
    Ok(())
}

#[derive(Module)]
struct Inner {
    drop: Dropout,
}
#[derive(Module)]
struct Mid {
    inner: Inner,
    fc: Linear,
}
#[derive(Module)]
struct Outer {
    mid: Mid,
}

#[test]
fn eval_reaches_a_dropout_three_levels_down() -> Result<()> {
    for dev in common::devices() {
        let mut m = Outer {
            mid: Mid {
                inner: Inner {
                    drop: Dropout::new(0.5)?,
                },
                fc: Linear::new(2, 2, &dev)?,
            },
        };
        let x = Tensor::ones([2000], &dev)?;
        let dropped = |m: &Outer| -> Result<Vec<f64>> { Ok(vals(&m.mid.inner.drop.forward(&x)?)) };
        assert_eq!(m.training(), Some(true));
        let y = dropped(&m)?;
        assert!(
            y.contains(&0.0) && y.contains(&2.0),
            "{dev:?}: dropout in training"
        );
        m.eval();
        assert_eq!(m.training(), Some(false));
        assert_eq!(
            dropped(&m)?,
            vec![1.0; 2000],
            "{dev:?}: identity after eval()"
        );
        m.train();
        assert!(
            dropped(&m)?.contains(&0.0),
            "{dev:?}: dropping again after train()"
        );
    }
    Ok(())
}

/// pytorch/examples' VAE: a forward that returns three tensors.
#[derive(Module)]
struct Vae {
    fc1: Linear,
    fc21: Linear,
    fc22: Linear,
    fc3: Linear,
    fc4: Linear,
}

impl Vae {
    fn new(dev: &Device) -> Result<Vae> {
        Ok(Vae {
            fc1: Linear::new(6, 5, dev)?,
            fc21: Linear::new(5, 2, dev)?,
            fc22: Linear::new(5, 2, dev)?,
            fc3: Linear::new(2, 5, dev)?,
            fc4: Linear::new(5, 6, dev)?,
        })
    }
    fn encode(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let h1 = self.fc1.forward(x)?.relu()?;
        Ok((self.fc21.forward(&h1)?, self.fc22.forward(&h1)?))
    }
    fn decode(&self, z: &Tensor) -> Result<Tensor> {
        self.fc4.forward(&self.fc3.forward(z)?.relu()?)?.sigmoid()
    }
    /// Deterministic "reparameterisation" (eps = 0.5) so the test can compare devices.
    fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (mu, logvar) = self.encode(x)?;
        let z = mu.add(&logvar.mul_scalar(0.5)?.exp()?.mul_scalar(0.5)?)?;
        Ok((self.decode(&z)?, mu, logvar))
    }
}

#[test]
fn a_derived_struct_keeps_a_tuple_returning_forward() -> Result<()> {
    let cpu = {
        let _g = common::seed_lock();
        wgtorch::manual_seed(3);
        Vae::new(&Device::Cpu)?
    };
    let x = Tensor::rand([3, 6], &Device::Cpu)?;
    let mut results = Vec::new();
    for dev in common::devices() {
        let mut vae = Vae::new(&Device::Cpu)?;
        vae.load_state_dict(&cpu.state_dict(), true)?;
        vae.to_device(&dev)?;
        let (recon, mu, logvar) = vae.forward(&x.to(&dev)?)?;
        assert_eq!(
            (recon.shape(), mu.shape()),
            (&[3usize, 6][..], &[3usize, 2][..])
        );
        // The VAE loss uses all three outputs; every parameter gets a gradient.
        let kld = logvar
            .add_scalar(1.0)?
            .sub(&mu.square()?)?
            .sub(&logvar.exp()?)?
            .sum_all()?
            .mul_scalar(-0.5)?;
        recon.sum_all()?.add(&kld)?.backward()?;
        assert!(vae.parameters().iter().all(|p| p.grad().is_some()));
        let g = vals(&vae.fc1.weight.grad().unwrap());
        vae.zero_grad();
        assert!(vae.parameters().iter().all(|p| p.grad().is_none()));
        results.push((vals(&recon), vals(&logvar), g));
    }
    if let [c, g] = &results[..] {
        assert_close("recon", &g.0, &c.0, 1e-4, 1e-5);
        assert_close("logvar", &g.1, &c.1, 1e-4, 1e-5);
        assert_close("fc1 grad", &g.2, &c.2, 1e-4, 1e-5);
    }
    Ok(())
}

/// Something that is neither a module nor configuration.
struct Cache {
    hits: usize,
}

#[derive(Module)]
struct Fields {
    #[param]
    taps: Vec<Tensor>,
    #[param]
    gate: Option<Tensor>,
    #[param]
    absent: Option<Tensor>,
    #[buffer]
    #[module(name = "running")]
    avg: Tensor,
    #[module(name = "encoder")]
    enc: Linear,
    maybe: Option<Linear>,
    nothing: Option<Linear>,
    list: ModuleList,
    #[module(skip)]
    cache: Cache,
    #[module(skip)]
    frozen_copy: Tensor,
    shape: (usize, [usize; 2]),
    name: String,
    tag: Option<&'static str>,
    dev: Device,
    #[module(training)]
    training: bool,
}

#[test]
fn params_buffers_options_vecs_renames_and_skips() -> Result<()> {
    let dev = Device::Cpu;
    let t = |n| Tensor::zeros([n], &dev);
    let mut m = Fields {
        taps: vec![t(1)?, t(2)?],
        gate: Some(t(3)?),
        absent: None,
        avg: t(4)?,
        enc: Linear::new(2, 2, &dev)?,
        maybe: Some(Linear::with_options(
            2,
            1,
            LinearOptions { bias: false },
            &dev,
        )?),
        nothing: None,
        list: ModuleList::new()
            .append(ReLU::new())
            .append(Linear::new(1, 1, &dev)?),
        cache: Cache { hits: 0 },
        frozen_copy: t(9)?,
        shape: (1, [2, 3]),
        name: "f".into(),
        tag: None,
        dev: Device::Cpu,
        training: true,
    };
    let mut kinds = Vec::new();
    m.visit(&mut |n, t, k| kinds.push((n.to_string(), t.numel(), k)));
    let p = Kind::Param;
    assert_eq!(
        kinds,
        [
            ("taps.0".to_string(), 1, p),
            ("taps.1".into(), 2, p),
            ("gate".into(), 3, p),
            ("running".into(), 4, Kind::Buffer),
            ("encoder.weight".into(), 4, p),
            ("encoder.bias".into(), 2, p),
            ("maybe.weight".into(), 2, p),
            ("list.1.weight".into(), 1, p),
            ("list.1.bias".into(), 1, p),
        ]
    );
    let kids: Vec<String> = m.named_children().into_iter().map(|(n, _)| n).collect();
    assert_eq!(kids, ["encoder", "maybe", "list"]);
    assert!(
        m.named_children()[1].1.is::<Linear>(),
        "an Option child is the module inside"
    );
    m.eval();
    assert!(!m.training && m.training() == Some(false));
    // visit_mut reaches the same slots: a dtype move converts all of them, and skips the rest.
    m.to_dtype(DType::F64)?;
    assert!(m.state_dict().iter().all(|(_, t)| t.dtype() == DType::F64));
    assert_eq!(m.frozen_copy.dtype(), DType::F32);
    assert_eq!(
        (m.cache.hits, m.shape.1[1], m.name.as_str(), m.tag),
        (0, 3, "f", None)
    );
    assert_eq!(m.dev, Device::Cpu);
    Ok(())
}

/// A module generic over its children, with bounds in a where-clause.
#[derive(Module)]
struct Residual<M, N>
where
    M: Forward,
    N: Module,
{
    body: M,
    extra: Vec<N>,
    #[module(skip)]
    _marker: PhantomData<fn() -> N>,
}

impl<M: Forward, N: Module> Residual<M, N> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.add(&self.body.forward(x)?)
    }
}

/// A generic without bounds on the struct: the derive adds `T: Module` for its child field.
#[derive(Module)]
struct Twice<T> {
    first: T,
    second: T,
}

#[test]
fn generics_and_where_clauses() -> Result<()> {
    let dev = Device::Cpu;
    let r = Residual {
        body: Linear::new(3, 3, &dev)?,
        extra: vec![ReLU::new(), ReLU::new()],
        _marker: PhantomData,
    };
    assert_eq!(names(r.state_dict()), ["body.weight", "body.bias"]);
    let mods: Vec<String> = r.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(mods, ["", "body", "extra", "extra.0", "extra.1"]);
    assert_eq!(r.forward(&Tensor::zeros([2, 3], &dev)?)?.shape(), &[2, 3]);
    let t = Twice {
        first: Linear::new(1, 2, &dev)?,
        second: Linear::new(2, 1, &dev)?,
    };
    assert_eq!(
        names(t.named_parameters()),
        ["first.weight", "first.bias", "second.weight", "second.bias"]
    );
    Ok(())
}

/// `#[module(forward)]`: a derived block is a layer of a Sequential.
#[derive(Module)]
#[module(forward)]
struct MlpBlock {
    fc: Linear,
    act: ReLU,
}

impl MlpBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.act.forward(&self.fc.forward(x)?)
    }
}

#[test]
fn module_forward_attribute_puts_a_derived_struct_in_a_sequential() -> Result<()> {
    let dev = Device::Cpu;
    let net = Sequential::new()
        .append(MlpBlock {
            fc: Linear::new(3, 4, &dev)?,
            act: ReLU::new(),
        })
        .append(Linear::new(4, 1, &dev)?);
    assert_eq!(
        names(net.state_dict()),
        ["0.fc.weight", "0.fc.bias", "1.weight", "1.bias"]
    );
    let y = net.forward(&Tensor::ones([5, 3], &dev)?)?;
    assert_eq!(y.shape(), &[5, 1]);
    Ok(())
}

#[test]
fn apply_visits_children_first_and_reaches_concrete_layers() -> Result<()> {
    let dev = Device::Cpu;
    let mut net = Sequential::new()
        .append(Linear::new(2, 3, &dev)?)
        .append(ReLU::new())
        .append(Sequential::new().append(Linear::new(3, 1, &dev)?));
    let mut order = Vec::new();
    net.apply(|m| {
        order.push(if m.is::<Linear>() {
            "Linear"
        } else if m.is::<ReLU>() {
            "ReLU"
        } else if m.is::<Sequential>() {
            "Sequential"
        } else {
            "?"
        });
        Ok(())
    })?;
    // PyTorch's apply: children (recursively) first, then the module itself.
    assert_eq!(
        order,
        ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]
    );
    // Re-initialise every Linear, as `model.apply(init_weights)`.
    net.apply(|m| {
        if let Some(fc) = m.downcast_mut::<Linear>() {
            init::constant_(&fc.weight, 0.25)?;
            if let Some(b) = &fc.bias {
                init::zeros_(b)?;
            }
        }
        Ok(())
    })?;
    for (n, p) in net.named_parameters() {
        let want = if n.ends_with("weight") { 0.25 } else { 0.0 };
        assert!(vals(&p).iter().all(|&v| v == want), "{n}");
    }
    // An error stops the walk and comes back.
    let mut seen = 0;
    let e = net.apply(|_| {
        seen += 1;
        Dropout::new(2.0).map(|_| ())
    });
    assert!(e.is_err_and(|e| e.to_string().contains("between 0 and 1")) && seen == 1);
    Ok(())
}

#[test]
fn downcasts_see_through_boxes() -> Result<()> {
    let dev = Device::Cpu;
    let b: Box<dyn Module> = Box::new(Linear::new(2, 3, &dev)?);
    assert_eq!(
        b.downcast_ref::<Linear>()
            .map(|l| l.weight.shape().to_vec()),
        Some(vec![3, 2])
    );
    assert!(b.downcast_ref::<Box<dyn Module>>().is_none());
    // A box of a box, and a box seen through `&dyn Module` (the auto-deref pitfall).
    let bb: Box<Box<dyn Module>> = Box::new(Box::new(ReLU::new()));
    let as_dyn: &dyn Module = &bb;
    assert!(as_dyn.is::<ReLU>() && as_dyn.downcast_ref::<ReLU>().is_some());
    let mut f: Box<dyn Forward> = Box::new(Linear::new(2, 2, &dev)?);
    assert!(f.downcast_mut::<Linear>().is_some() && f.is::<Linear>());
    // named_modules of a boxed model starts at the model inside.
    assert!(b.named_modules()[0].1.is::<Linear>());
    let list = ModuleList::new()
        .append(Linear::new(1, 1, &dev)?)
        .append(ReLU::new());
    assert!(list.children()[0].is::<Linear>() && list.children()[1].is::<ReLU>());
    let v: Vec<Box<dyn Module>> = vec![Box::new(ReLU::new())];
    assert!(v.children()[0].is::<ReLU>());
    Ok(())
}

#[test]
fn module_dict_keeps_insertion_order_and_replaces_in_place() -> Result<()> {
    let dev = Device::Cpu;
    let mut d = ModuleDict::new();
    d.insert("zeta", Linear::new(1, 1, &dev)?)?;
    d.insert("alpha", ReLU::new())?;
    d.insert("mid", Linear::new(2, 1, &dev)?)?;
    assert_eq!(d.keys().collect::<Vec<_>>(), ["zeta", "alpha", "mid"]);
    d.insert("zeta", Linear::new(3, 1, &dev)?)?;
    assert_eq!(d.keys().collect::<Vec<_>>(), ["zeta", "alpha", "mid"]);
    assert_eq!(
        names(d.state_dict()),
        ["zeta.weight", "zeta.bias", "mid.weight", "mid.bias"]
    );
    assert_eq!(d.state_dict()[0].1.shape(), &[1, 3]);
    assert!(d.get("alpha").is_some_and(|m| m.is::<ReLU>()) && d.get("beta").is_none());
    if let Some(fc) = d.get_mut("mid").and_then(|m| m.downcast_mut::<Linear>()) {
        fc.bias = None;
    }
    assert_eq!(d.state_dict().len(), 3);
    assert!(d.remove("alpha").is_some() && !d.contains_key("alpha") && d.len() == 2);
    for bad in ["", "a.b"] {
        let e = d.insert(bad, ReLU::new()).unwrap_err().to_string();
        assert!(
            e.contains("ModuleDict") && e.contains("can't contain"),
            "{e}"
        );
    }
    Ok(())
}

#[test]
fn derived_model_moves_to_the_gpu_with_every_tensor() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let mut cpu_net = Net::new(&Device::Cpu)?;
    let mut gpu_net = Net::new(&Device::Cpu)?;
    gpu_net.load_state_dict(&cpu_net.state_dict(), true)?;
    gpu_net.to_device(&gpu)?;
    assert!(gpu_net.state_dict().iter().all(|(_, t)| t.device() == gpu));
    cpu_net.eval();
    gpu_net.eval();
    let x = Tensor::rand([2, 1, 4, 4], &Device::Cpu)?;
    let run = |n: &Net, x: &Tensor| -> Result<Tensor> {
        let h = n.features.forward(x)?.flatten(1, -1)?; // [2, 4]
        let h = n.blocks[1]
            .ln
            .forward(&n.blocks[0].drop.forward(&n.blocks[0].fc.forward(&h)?)?)?;
        n.out.forward(&h.mul(&n.scale)?)
    };
    let (a, b) = (run(&cpu_net, &x)?, run(&gpu_net, &x.to(&gpu)?)?);
    assert_close("Net on gpu", &vals(&b), &vals(&a), 1e-4, 1e-5);
    Ok(())
}
