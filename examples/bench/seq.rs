//! The bench's sequence-model rows on the CPU: log_softmax over a word LM's decoder output, a
//! word-LM LSTM training step and a nanoGPT-sized transformer step, next to PyTorch in
//! interleaved rounds (`bench --seq`, `--seq-case`).

use super::{median, pytorch_with, time};
use wgtorch::nn::{
    functional as F, init, Embedding, Forward, LayerNorm, Linear, Module, ModuleExt, RNNOptions,
    LSTM,
};
use wgtorch::optim::{clip_grad_norm_, AdamW, Optimizer, Sgd};
use wgtorch::{Device, Result, Tensor};

/// `log_softmax` over `[700, 18328]` (a word LM's decoder output) forward and backward, on `dev`.
pub(crate) fn log_softmax_case(dev: &Device, reps: usize) -> Result<f64> {
    wgtorch::manual_seed(0);
    let x = Tensor::randn([700, 18328], dev)?.requires_grad_(true);
    let g = Tensor::randn([700, 18328], dev)?;
    time(dev, reps, || {
        x.log_softmax(1)?.backward_with(Some(&g), false, false)?;
        x.set_grad(None);
        Ok(())
    })
}

/// One training step of pytorch/examples' word_language_model scaled to this machine: vocab 10k,
/// emsize = nhid = 200, 2-layer LSTM, bptt 35, batch 20, decoder tied to the encoder and applied
/// to the flattened `[700, 200]` outputs, cross_entropy, backward, clip_grad_norm 0.25, SGD (lr 20).
/// No dropout (as `pytorch_bench.py`).
pub(crate) fn word_lm_step(dev: &Device, reps: usize) -> Result<f64> {
    const V: usize = 10_000;
    const E: usize = 200;
    const T: usize = 35;
    const B: usize = 20;
    wgtorch::manual_seed(0);
    let enc = Embedding::new(V, E, dev)?;
    init::uniform_(&enc.weight, -0.1, 0.1)?;
    let opts = RNNOptions {
        num_layers: 2,
        ..Default::default()
    };
    let lstm = LSTM::with_options(E, E, opts, dev)?;
    let dec_bias = Tensor::zeros([V], dev)?.requires_grad_(true);
    let mut params = enc.parameters();
    params.extend(lstm.parameters());
    params.push(dec_bias.clone());
    let mut opt = Sgd::new(params.clone(), 20.0)?;
    let tokens = |seed: usize| (0..T * B).map(move |i| ((i * 7919 + seed) % V) as i32);
    let x = Tensor::from_vec(tokens(0).collect(), [T, B], dev)?;
    let y = Tensor::from_vec(tokens(17).collect(), [T * B], dev)?;
    time(dev, reps, || {
        let out = lstm.forward(&enc.forward(&x)?)?; // [T, B, E]
        let logits = out
            .reshape([-1, E as isize])?
            .linear(&enc.weight, Some(&dec_bias))?;
        let loss = F::cross_entropy(&logits, &y)?;
        opt.zero_grad();
        loss.backward()?;
        clip_grad_norm_(&params, 0.25, 2.0)?;
        opt.step()?;
        loss.item()?;
        Ok(())
    })
}

/// One nanoGPT block: pre-norm causal self-attention (matmul, masked_fill, softmax) and a GELU MLP.
struct GptBlock {
    ln1: LayerNorm,
    attn: Linear,
    proj: Linear,
    ln2: LayerNorm,
    fc: Linear,
    fc2: Linear,
}

/// One training step of nanoGPT's CPU configuration (n_layer 4, n_head 4, n_embd 128, block 64,
/// batch 12, vocab 65, dropout 0): token + position embeddings, pre-norm blocks, final LayerNorm,
/// head tied to the token embedding, cross_entropy, backward, clip_grad_norm 1.0, AdamW (lr 1e-3).
pub(crate) fn gpt_step(dev: &Device, reps: usize) -> Result<f64> {
    const L: usize = 4;
    const H: usize = 4;
    const C: usize = 128;
    const T: usize = 64;
    const B: usize = 12;
    const V: usize = 65;
    wgtorch::manual_seed(0);
    let wte = Embedding::new(V, C, dev)?;
    let wpe = Embedding::new(T, C, dev)?;
    let blocks = (0..L)
        .map(|_| {
            Ok(GptBlock {
                ln1: LayerNorm::new(&[C], dev)?,
                attn: Linear::new(C, 3 * C, dev)?,
                proj: Linear::new(C, C, dev)?,
                ln2: LayerNorm::new(&[C], dev)?,
                fc: Linear::new(C, 4 * C, dev)?,
                fc2: Linear::new(4 * C, C, dev)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ln_f = LayerNorm::new(&[C], dev)?;
    let mut params = wte.parameters();
    params.extend(wpe.parameters());
    for b in &blocks {
        for m in [
            &b.ln1 as &dyn Module,
            &b.attn,
            &b.proj,
            &b.ln2,
            &b.fc,
            &b.fc2,
        ] {
            let mut f = |_: &str, t: &Tensor, _| params.push(t.clone());
            m.visit(&mut f);
        }
    }
    params.extend(ln_f.parameters());
    let mut opt = AdamW::new(params.clone(), 1e-3)?;
    // True above the diagonal: the future a position may not attend to.
    let mask: Vec<bool> = (0..T * T).map(|i| i % T > i / T).collect();
    let mask = Tensor::from_vec(mask, [T, T], dev)?;
    let pos = Tensor::from_vec((0..T as i32).collect(), [T], dev)?;
    let tokens = |seed: usize| (0..B * T).map(move |i| ((i * 31 + seed) % V) as i32);
    let idx = Tensor::from_vec(tokens(0).collect(), [B, T], dev)?;
    let tgt = Tensor::from_vec(tokens(1).collect(), [B * T], dev)?;
    let (b_, t_, h_, d_) = (B as isize, T as isize, H as isize, (C / H) as isize);
    let heads = |t: &Tensor| t.reshape([b_, t_, h_, d_])?.transpose(1, 2); // [B, H, T, D]
    time(dev, reps, || {
        let mut x = wte.forward(&idx)?.add(&wpe.forward(&pos)?)?; // [B, T, C]
        for b in &blocks {
            let qkv = b.attn.forward(&b.ln1.forward(&x)?)?.split(C, 2)?;
            let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
            let att = q
                .matmul(&k.transpose(-2, -1)?)?
                .mul_scalar(1.0 / (C as f64 / H as f64).sqrt())?
                .masked_fill(&mask, f64::NEG_INFINITY)?
                .softmax(-1)?;
            let y = att
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape([b_, t_, C as isize])?;
            x = x.add(&b.proj.forward(&y)?)?;
            let m = b.fc2.forward(&b.fc.forward(&b.ln2.forward(&x)?)?.gelu()?)?;
            x = x.add(&m)?;
        }
        let logits = ln_f.forward(&x)?.linear(&wte.weight, None)?;
        let loss = F::cross_entropy(&logits.reshape([-1, V as isize])?, &tgt)?;
        opt.zero_grad();
        loss.backward()?;
        clip_grad_norm_(&params, 1.0, 2.0)?;
        opt.step()?;
        loss.item()?;
        Ok(())
    })
}

/// The sequence-model rows: log_softmax `[700, 18328]` forward+backward, the word-LM step and the
/// nanoGPT step on the CPU, each round timing wgtorch and then PyTorch (`pytorch_bench.py --seq`,
/// same thread count), so both see the same machine load. Prints per-case medians over the rounds
/// and the median of the per-round time ratios (wgtorch / PyTorch: below 1 is faster).
pub(crate) fn seq_bench(
    rounds: usize,
    json: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let dev = Device::Cpu;
    let cases = [
        ("log_softmax_ms", "log_softmax [700, 18328] fwd+bwd"),
        (
            "word_lm_step_ms",
            "word LM step (2-layer LSTM 200, bptt 35, batch 20, vocab 10k, SGD)",
        ),
        (
            "nanogpt_step_ms",
            "nanoGPT step (4 layers, 4 heads, 128, block 64, batch 12, AdamW)",
        ),
    ];
    let (mut ours, mut theirs) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
    for _ in 0..rounds {
        let o = [
            log_softmax_case(&dev, 5)?,
            word_lm_step(&dev, 5)?,
            gpt_step(&dev, 5)?,
        ];
        let pt = pytorch_with(&["--seq"]);
        for (i, (key, _)) in cases.iter().enumerate() {
            ours[i].push(o[i] * 1e3);
            if let Some(t) = pt.as_ref().and_then(|p| p[*key].as_f64()) {
                theirs[i].push(t);
            }
        }
    }
    let threads = rayon::current_num_threads();
    println!("\nsequence models on the CPU ({threads} threads; PyTorch at {threads} threads, interleaved; medians of {rounds} rounds)");
    println!("| case | wgtorch (ms) | PyTorch (ms) | time ratio | per-round ratios |");
    println!("|---|---|---|---|---|");
    let mut rec = serde_json::Map::new();
    for (i, (key, label)) in cases.iter().enumerate() {
        let o = median(ours[i].clone());
        rec.insert(key.to_string(), o.into());
        if theirs[i].len() == ours[i].len() {
            let ratios: Vec<f64> = ours[i].iter().zip(&theirs[i]).map(|(a, b)| a / b).collect();
            let t = median(theirs[i].clone());
            let r = median(ratios.clone());
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "| {label} | {o:.1} | {t:.1} | {r:.2} | {} |",
                each.join(", ")
            );
            rec.insert(key.replace("_ms", "_pytorch_ms"), t.into());
            rec.insert(key.replace("_ms", "_ratio"), r.into());
        } else {
            println!("| {label} | {o:.1} | - | - | - |");
        }
    }
    json.insert("cpu sequence models".into(), rec.into());
    Ok(())
}
