//! `bench -- --compile`: the SimpleCNN's inference (batch 64, evaluation mode, no_grad) eager
//! and through `wgtorch::compile::compile_module`, alternating call by call in one process so
//! that the host's noise falls on both alike; GPU dispatches per call for each. Then training
//! steps (forward, loss, backward, optimizer) with the module eager and compiled, alternating
//! step by step, with the first compiled step's time, dispatches and the GPU pool's peak: the
//! SimpleCNN, a word-LM LSTM, minGPT's MLP block (its `NewGELU` written as ops, as minGPT writes
//! it) and a 2-layer transformer encoder classifier. Then the same CPU steps in PyTorch, eager and
//! `torch.compile`d, when `import torch` works (`bench/pytorch_bench.py --compile-steps`).

use super::{median, pytorch_with, sync};
use std::time::Instant;
use wgtorch::compile::compile_module;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{
    functional as F, init, Activation, Embedding, Forward, Linear, Module, ModuleExt, RNNOptions,
    TransformerEncoderLayer, TransformerLayerOptions, LSTM,
};
use wgtorch::optim::{clip_grad_norm_, Adam, Optimizer, Sgd};
use wgtorch::{Device, Result, Tensor};

fn dispatches_of(dev: &Device) -> Result<u64> {
    Ok(match dev {
        Device::Gpu(n) => wgtorch::backend::gpu::context(*n)?.stats().dispatches,
        Device::Cpu => 0,
    })
}

pub fn compile_bench(
    devs: &[Device],
    reps: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    inference_rows(devs, reps, json)?;
    train_rows(devs, json)
}

fn inference_rows(
    devs: &[Device],
    reps: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    println!(
        "\nCompiled inference, SimpleCNN, batch 64 (eval, no_grad): medians of {reps} calls each, eager and compiled alternating"
    );
    println!("| device | eager (ms) | compiled (ms) | time ratio | dispatches per call, eager / compiled |");
    println!("|---|---|---|---|---|");
    for dev in devs {
        wgtorch::manual_seed(0);
        let mut cnn = SimpleCnn::new(dev)?;
        cnn.eval();
        let fast = compile_module(&cnn);
        let x = Tensor::randn([64, 3, 32, 32], dev)?;
        let _ng = wgtorch::no_grad();
        let diff = fast
            .forward(&x)?
            .sub(&cnn.forward(&x)?)?
            .abs()?
            .amax([0, 1], false)?
            .item()?;
        let (mut eager, mut compiled) = (Vec::new(), Vec::new());
        let (mut de, mut dc) = (0, 0);
        for _ in 0..reps {
            for (is_compiled, ts, d) in
                [(false, &mut eager, &mut de), (true, &mut compiled, &mut dc)]
            {
                sync(dev)?;
                let d0 = dispatches_of(dev)?;
                let t0 = Instant::now();
                let y = if is_compiled {
                    fast.forward(&x)?
                } else {
                    cnn.forward(&x)?
                };
                sync(dev)?;
                ts.push(t0.elapsed().as_secs_f64());
                *d = dispatches_of(dev)? - d0;
                drop(y);
            }
        }
        let (e, c) = (median(eager) * 1e3, median(compiled) * 1e3);
        let d = if dev.is_gpu() {
            format!("{de} / {dc}")
        } else {
            "-".into()
        };
        println!(
            "| {} | {e:.2} | {c:.2} | {:.2} | {d} |",
            dev.describe(),
            c / e
        );
        let s = fast.stats();
        assert_eq!(s.graphs, 1, "one signature, one graph");
        json.insert(
            format!(
                "compile_simple_cnn_{}",
                if dev.is_gpu() { "gpu" } else { "cpu" }
            ),
            serde_json::json!({
                "eager_ms": e, "compiled_ms": c, "max_abs_diff": diff,
                "dispatches_eager": de, "dispatches_compiled": dc,
                "cache_hits": s.cache_hits,
            }),
        );
    }
    Ok(())
}

/// minGPT's `MLP` block with its residual: `x + c_proj(NewGELU(c_fc(x)))`, NewGELU written as
/// minGPT writes it, `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`: nine elementwise ops that a
/// compiled graph runs as one kernel forward and one per input backward.
#[derive(Module)]
struct MinGptMlp {
    c_fc: Linear,
    c_proj: Linear,
}

impl Forward for MinGptMlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.c_fc.forward(x)?;
        let inner = h
            .add(&h.pow_scalar(3.0)?.mul_scalar(0.044715)?)?
            .mul_scalar((2.0 / std::f64::consts::PI).sqrt())?;
        let gelu = h.mul_scalar(0.5)?.mul(&inner.tanh()?.add_scalar(1.0)?)?;
        x.add(&self.c_proj.forward(&gelu)?)
    }
}

/// Two post-norm encoder layers (d 128, 4 heads, feed-forward 512, no dropout, batch first) and a
/// linear head on the mean over the sequence.
#[derive(Module)]
struct EncoderClassifier {
    l1: TransformerEncoderLayer,
    l2: TransformerEncoderLayer,
    head: Linear,
}

impl Forward for EncoderClassifier {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.l1.forward(x, Default::default())?;
        let y = self.l2.forward(&y, Default::default())?;
        self.head.forward(&y.mean_dims([1], false)?)
    }
}

/// `word_lm_step`'s model (`bench --seq`) as one module: pytorch/examples' word_language_model
/// without dropout, its decoder tied to the embedding.
#[derive(Module)]
struct WordLm {
    enc: Embedding,
    lstm: LSTM,
    #[param]
    dec_bias: Tensor,
}

impl WordLm {
    fn new(vocab: usize, emsize: usize, dev: &Device) -> Result<WordLm> {
        let enc = Embedding::new(vocab, emsize, dev)?;
        init::uniform_(&enc.weight, -0.1, 0.1)?;
        let opts = RNNOptions {
            num_layers: 2,
            ..Default::default()
        };
        Ok(WordLm {
            enc,
            lstm: LSTM::with_options(emsize, emsize, opts, dev)?,
            dec_bias: Tensor::zeros([vocab], dev)?.requires_grad_(true),
        })
    }
}

impl Forward for WordLm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let out = self.lstm.forward(&self.enc.forward(x)?)?;
        let emsize = out.shape()[2] as isize;
        out.reshape([-1, emsize])?
            .linear(&self.enc.weight, Some(&self.dec_bias))
    }
}

/// One model's training step, eager or compiled, and its compiled module's account.
struct Case<'a> {
    key: &'static str,
    what: String,
    /// One step (forward, loss, backward, optional `clip_grad_norm_`, optimizer step), compiled
    /// or eager; the loss.
    step: Box<dyn FnMut(bool) -> Result<f64> + 'a>,
    /// `(graphs, eager calls, explain())` of the compiled module.
    account: Box<dyn Fn() -> (usize, usize, String) + 'a>,
    /// The first compiled step (trace, compile, the eager check, loss, backward, step).
    first_step_s: f64,
    /// Eager's and the first compiled call's loss on the same weights.
    first_loss_diff: f64,
}

fn case<'a, M: Forward + Module>(
    key: &'static str,
    what: String,
    model: &'a M,
    x: &'a Tensor,
    loss: impl Fn(&Tensor) -> Result<Tensor> + 'a,
    mut opt: impl Optimizer + 'a,
    clip: Option<f64>,
) -> Result<Case<'a>> {
    let dev = x.device();
    let eager_loss = model.forward(x).and_then(|y| loss(&y)?.item())?;
    let fast = std::rc::Rc::new(compile_module(model));
    let params = model.parameters();
    let compiled = fast.clone();
    let mut step = move |use_compiled: bool| -> Result<f64> {
        opt.zero_grad();
        let y = if use_compiled {
            compiled.forward(x)?
        } else {
            model.forward(x)?
        };
        let l = loss(&y)?;
        l.backward()?;
        if let Some(max_norm) = clip {
            clip_grad_norm_(&params, max_norm, 2.0)?;
        }
        opt.step()?;
        l.item()
    };
    sync(&dev)?;
    let t0 = Instant::now();
    let compiled_loss = step(true)?;
    let first_step_s = t0.elapsed().as_secs_f64();
    Ok(Case {
        key,
        what,
        step: Box::new(step),
        account: Box::new(move || {
            let s = fast.stats();
            (s.graphs, s.eager_calls, fast.explain().to_string())
        }),
        first_step_s,
        first_loss_diff: (eager_loss - compiled_loss).abs(),
    })
}

/// What [`measure`] gives, eager first, compiled second.
struct Measured {
    /// Seconds per step.
    times: [Vec<f64>; 2],
    /// GPU dispatches of the last step (0 on the CPU).
    dispatches: [u64; 2],
    /// GPU pool peak of the last step, bytes (0 on the CPU).
    peak: [u64; 2],
}

/// `reps` steps each of `c`, eager and compiled alternating, after one untimed step each (the
/// GEMM tuner's first trials).
fn measure(c: &mut Case, dev: &Device, reps: usize) -> Result<Measured> {
    let ctx = match dev {
        Device::Gpu(n) => Some(wgtorch::backend::gpu::context(*n)?),
        Device::Cpu => None,
    };
    let (mut times, mut dispatches, mut peak) = ([Vec::new(), Vec::new()], [0; 2], [0; 2]);
    for rep in 0..=reps {
        for k in 0..2 {
            sync(dev)?;
            if let Some(ctx) = &ctx {
                ctx.reset_peak();
            }
            let stats = || ctx.as_ref().map(|ctx| ctx.stats());
            let d0 = stats().map_or(0, |s| s.dispatches);
            let t0 = Instant::now();
            (c.step)(k == 1)?;
            sync(dev)?;
            if rep > 0 {
                times[k].push(t0.elapsed().as_secs_f64());
            }
            let after = stats();
            dispatches[k] = after.map_or(0, |s| s.dispatches) - d0;
            peak[k] = after.map_or(0, |s| s.peak_bytes);
        }
    }
    let (graphs, eager_calls, explain) = (c.account)();
    assert_eq!((graphs, eager_calls), (1, 0), "{explain}");
    Ok(Measured {
        times,
        dispatches,
        peak,
    })
}

fn train_rows(
    devs: &[Device],
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let rounds = 3;
    for dev in devs {
        let gpu = dev.is_gpu();
        wgtorch::manual_seed(0);
        let cnn = SimpleCnn::new(dev)?;
        let images = Tensor::randn([64, 3, 32, 32], dev)?;
        let digits = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64], dev)?;
        // The word LM at pytorch/examples' shapes scaled to this machine (`bench --seq`); on a
        // GPU adapter with a tenth of the vocabulary: on lavapipe the 10k-word decoder's GEMMs
        // alone take seconds a step.
        let vocab = if gpu { 1_000 } else { 10_000 };
        let lm = WordLm::new(vocab, 200, dev)?;
        let tokens = |seed: usize| -> Result<Tensor> {
            let t: Vec<i32> = (0..35 * 20)
                .map(|i| ((i * 7919 + seed) % vocab) as i32)
                .collect();
            Tensor::from_vec(t, [35, 20], dev)
        };
        let (words, next) = (tokens(0)?, tokens(17)?.reshape([-1])?);
        let mlp = MinGptMlp {
            c_fc: Linear::new(128, 512, dev)?,
            c_proj: Linear::new(512, 128, dev)?,
        };
        let x = Tensor::randn([512, 128], dev)?;
        let target = Tensor::randn([512, 128], dev)?;
        let opts = TransformerLayerOptions {
            dim_feedforward: 512,
            dropout: 0.0,
            batch_first: true,
            activation: Activation::Gelu,
            ..Default::default()
        };
        let enc = EncoderClassifier {
            l1: TransformerEncoderLayer::with_options(128, 4, opts, dev)?,
            l2: TransformerEncoderLayer::with_options(128, 4, opts, dev)?,
            head: Linear::new(128, 10, dev)?,
        };
        let seqs = Tensor::randn([32, 64, 128], dev)?;
        let labels = Tensor::from_vec((0..32).map(|i| i % 10).collect::<Vec<i64>>(), [32], dev)?;
        let mut cases = vec![
            case(
                "simple_cnn",
                "SimpleCNN, batch 64 (Adam)".into(),
                &cnn,
                &images,
                |y| F::cross_entropy(y, &digits),
                Adam::new(cnn.parameters(), 1e-3)?,
                None,
            )?,
            case(
                "word_lm",
                format!("word-LM LSTM, vocab {vocab}, 2×200, bptt 35, batch 20 (SGD, clip 0.25)"),
                &lm,
                &words,
                |y| F::cross_entropy(y, &next),
                Sgd::new(lm.parameters(), 20.0)?,
                Some(0.25),
            )?,
            case(
                "mingpt_mlp",
                "minGPT MLP block [512, 128] (SGD)".into(),
                &mlp,
                &x,
                |y| F::mse_loss(y, &target),
                Sgd::new(mlp.parameters(), 1e-3)?,
                None,
            )?,
            case(
                "encoder_classifier",
                "transformer encoder classifier [32, 64, 128] (SGD)".into(),
                &enc,
                &seqs,
                |y| F::cross_entropy(y, &labels),
                Sgd::new(enc.parameters(), 1e-3)?,
                None,
            )?,
        ];
        if gpu {
            gpu_rows(dev, &mut cases, json)?;
        } else {
            cpu_rows(&mut cases, rounds, json)?;
        }
    }
    Ok(())
}

/// On the GPU adapter: three steps each, eager and compiled alternating, once.
fn gpu_rows(
    dev: &Device,
    cases: &mut [Case],
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let reps = 3;
    println!(
        "\nCompiled training steps on {} (forward, loss, backward, optimizer), eager and compiled alternating on one model: medians of {reps}",
        dev.describe()
    );
    println!("| model | eager (ms) | compiled (ms) | time ratio | first compiled step (s) | dispatches per step, eager / compiled | pool peak (MiB), eager / compiled | first loss, difference |");
    println!("|---|---|---|---|---|---|---|---|");
    for c in cases {
        let Measured {
            times: [e, k],
            dispatches: d,
            peak: p,
        } = measure(c, dev, reps)?;
        let (e, k) = (median(e) * 1e3, median(k) * 1e3);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "| {} | {e:.1} | {k:.1} | {:.2} | {:.2} | {} / {} | {:.1} / {:.1} | {:.1e} |",
            c.what,
            k / e,
            c.first_step_s,
            d[0],
            d[1],
            mib(p[0]),
            mib(p[1]),
            c.first_loss_diff
        );
        json.insert(
            format!("compile_train_{}_gpu", c.key),
            serde_json::json!({
                "what": c.what, "eager_ms": e, "compiled_ms": k,
                "first_compiled_step_s": c.first_step_s,
                "dispatches_eager": d[0], "dispatches_compiled": d[1],
                "pool_peak_bytes_eager": p[0], "pool_peak_bytes_compiled": p[1],
                "first_loss_diff": c.first_loss_diff,
            }),
        );
    }
    Ok(())
}

/// On the CPU: `rounds` rounds, each of five steps per model eager and compiled alternating, then
/// the same steps in PyTorch eager and `torch.compile`d (`pytorch_bench.py --compile-steps`, its
/// own process at the same thread count), so that both see the same machine load. Medians over
/// the rounds of each round's median.
fn cpu_rows(
    cases: &mut [Case],
    rounds: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let threads = rayon::current_num_threads();
    // Per case: wgtorch eager, wgtorch compiled, PyTorch eager, torch.compile; one entry a round.
    let mut ms = vec![[(); 4].map(|_| Vec::new()); cases.len()];
    let mut pt_first = vec![Vec::new(); cases.len()];
    let mut torch = None;
    for _ in 0..rounds {
        for (c, m) in cases.iter_mut().zip(&mut ms) {
            let [e, k] = measure(c, &Device::Cpu, 5)?.times;
            m[0].push(median(e) * 1e3);
            m[1].push(median(k) * 1e3);
        }
        let Some(pt) = pytorch_with(&["--compile-steps", "--reps", "5"]) else {
            continue;
        };
        for ((c, m), first) in cases.iter().zip(&mut ms).zip(&mut pt_first) {
            let r = &pt["models"][c.key];
            if let (Some(e), Some(k)) = (r["eager_ms"].as_f64(), r["compiled_ms"].as_f64()) {
                m[2].push(e);
                m[3].push(k);
            }
            first.extend(r["compile_first_call_s"].as_f64());
        }
        torch = Some(pt["torch"].clone());
    }
    let peer = torch.is_some() && ms.iter().all(|m| m[2].len() == rounds);
    println!(
        "\nCompiled training steps on the CPU ({threads} threads; forward, loss, backward, optimizer), eager and compiled alternating on one model, {}: medians of {rounds} rounds of 5 steps",
        match &torch {
            Some(v) if peer => format!("then PyTorch {} eager and torch.compile(model) (inductor) in its own process at {threads} threads", v.as_str().unwrap_or("?")),
            _ => "PyTorch skipped".into(),
        }
    );
    println!("| model | eager (ms) | compiled (ms) | time ratio | first compiled step (s) | first loss, difference | PyTorch eager (ms) | torch.compile (ms) | torch.compile first step (s) | compiled / PyTorch's best, per round |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for ((c, m), first) in cases.iter().zip(ms).zip(pt_first) {
        let [e, k] = [median(m[0].clone()), median(m[1].clone())];
        let mut row = format!(
            "| {} | {e:.1} | {k:.1} | {:.2} | {:.2} | {:.1e} |",
            c.what,
            k / e,
            c.first_step_s,
            c.first_loss_diff
        );
        let mut entry = serde_json::json!({
            "what": c.what, "eager_ms": e, "compiled_ms": k,
            "first_compiled_step_s": c.first_step_s, "first_loss_diff": c.first_loss_diff,
            "rounds": rounds,
        });
        if peer {
            let (pe, pk) = (median(m[2].clone()), median(m[3].clone()));
            let per_round: Vec<String> = (0..rounds)
                .map(|r| format!("{:.2}", m[1][r] / m[2][r].min(m[3][r])))
                .collect();
            let firsts: Vec<String> = first.iter().map(|s| format!("{s:.1}")).collect();
            row += &format!(
                " {pe:.1} | {pk:.1} | {} | {} |",
                firsts.join(", "),
                per_round.join(", ")
            );
            entry["pytorch_eager_ms"] = pe.into();
            entry["torch_compile_ms"] = pk.into();
        } else {
            row += " - | - | - | - |";
        }
        println!("{row}");
        json.insert(format!("compile_train_{}_cpu", c.key), entry);
    }
    Ok(())
}
