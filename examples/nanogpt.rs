//! karpathy/nanoGPT (`model.py` + `train.py`), ported line by line: a character-level GPT with
//! tied input/output embeddings, AdamW with weight-decay groups, warm-up + cosine lr schedule,
//! gradient accumulation, gradient clipping, and `generate` with temperature and top-k. It trains
//! on the embedded `data/tiny_corpus.txt` (characters), train.py's defaults scaled to a CPU.
//!
//! `cargo run --release --example nanogpt -- --max-iters 200`
//!
//! `tests/ports.rs` checks 10 iterations against PyTorch's losses.

// PyTorch's class names (VAE, GPT, MLP), kept for line-by-line comparison.
#![allow(clippy::upper_case_acronyms)]

use clap::Parser;
use std::time::Instant;
use wgtorch::nn::{init, Dropout, Embedding, LayerNorm, LayerNormOptions, Linear, LinearOptions};
use wgtorch::optim::{AdamW, ParamGroup};
use wgtorch::prelude::*;

/// The embedded corpus.
pub const CORPUS: &str = include_str!("../data/tiny_corpus.txt");

/// model.py's `GPTConfig`.
#[derive(Clone, Debug)]
pub struct GPTConfig {
    pub block_size: usize,
    pub vocab_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_embd: usize,
    pub dropout: f64,
    /// True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster.
    pub bias: bool,
}

fn layer_norm(ndim: usize, bias: bool, dev: &Device) -> Result<LayerNorm> {
    LayerNorm::with_options(
        &[ndim],
        LayerNormOptions {
            bias,
            ..Default::default()
        },
        dev,
    )
}

fn linear(i: usize, o: usize, bias: bool, dev: &Device) -> Result<Linear> {
    Linear::with_options(i, o, LinearOptions { bias }, dev)
}

/// model.py's `CausalSelfAttention`.
#[derive(Module)]
pub struct CausalSelfAttention {
    /// key, query, value projections for all heads, but in a batch
    pub c_attn: Linear,
    /// output projection
    pub c_proj: Linear,
    pub attn_dropout: Dropout,
    pub resid_dropout: Dropout,
    pub n_head: usize,
    pub n_embd: usize,
    pub dropout: f64,
    #[module(training)]
    training: bool,
}

impl CausalSelfAttention {
    pub fn new(config: &GPTConfig, dev: &Device) -> Result<Self> {
        if !config.n_embd.is_multiple_of(config.n_head) {
            return Err(Error::msg("n_embd must be divisible by n_head"));
        }
        Ok(CausalSelfAttention {
            c_attn: linear(config.n_embd, 3 * config.n_embd, config.bias, dev)?,
            c_proj: linear(config.n_embd, config.n_embd, config.bias, dev)?,
            attn_dropout: Dropout::new(config.dropout)?,
            resid_dropout: Dropout::new(config.dropout)?,
            n_head: config.n_head,
            n_embd: config.n_embd,
            dropout: config.dropout,
            training: true,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, c) = (
            x.shape()[0] as i32,
            x.shape()[1] as i32,
            x.shape()[2] as i32,
        );
        let nh = self.n_head as i32;
        // calculate query, key, values for all heads in batch and move head forward to be the batch dim
        let qkv = self.c_attn.forward(x)?.split(self.n_embd, 2)?;
        let heads = |t_: &Tensor| t_.view([b, t, nh, c / nh])?.transpose(1, 2); // (B, nh, T, hs)
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        // causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        let y = F::scaled_dot_product_attention_with(
            &q,
            &k,
            &v,
            F::SdpaOptions {
                dropout_p: if self.training { self.dropout } else { 0.0 },
                is_causal: true,
                ..Default::default()
            },
        )?;
        let y = y.transpose(1, 2)?.contiguous()?.view([b, t, c])?; // re-assemble all head outputs side by side
                                                                   // output projection
        self.resid_dropout.forward(&self.c_proj.forward(&y)?)
    }
}

/// model.py's `MLP`.
#[derive(Module)]
pub struct MLP {
    pub c_fc: Linear,
    pub c_proj: Linear,
    pub dropout: Dropout,
}

impl MLP {
    pub fn new(config: &GPTConfig, dev: &Device) -> Result<Self> {
        Ok(MLP {
            c_fc: linear(config.n_embd, 4 * config.n_embd, config.bias, dev)?,
            c_proj: linear(4 * config.n_embd, config.n_embd, config.bias, dev)?,
            dropout: Dropout::new(config.dropout)?,
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.c_fc.forward(x)?.gelu()?;
        let x = self.c_proj.forward(&x)?;
        self.dropout.forward(&x)
    }
}

/// model.py's `Block`.
#[derive(Module)]
pub struct Block {
    pub ln_1: LayerNorm,
    pub attn: CausalSelfAttention,
    pub ln_2: LayerNorm,
    pub mlp: MLP,
}

impl Block {
    pub fn new(config: &GPTConfig, dev: &Device) -> Result<Self> {
        Ok(Block {
            ln_1: layer_norm(config.n_embd, config.bias, dev)?,
            attn: CausalSelfAttention::new(config, dev)?,
            ln_2: layer_norm(config.n_embd, config.bias, dev)?,
            mlp: MLP::new(config, dev)?,
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x + self.attn.forward(&self.ln_1.forward(x)?)?;
        Ok(&x + self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

/// The `transformer` ModuleDict of model.py's `GPT` (wte, wpe, drop, h, ln_f).
#[derive(Module)]
pub struct GPTTransformer {
    pub wte: Embedding,
    pub wpe: Embedding,
    pub drop: Dropout,
    pub h: Vec<Block>,
    pub ln_f: LayerNorm,
}

/// model.py's `GPT`.
#[derive(Module)]
pub struct GPT {
    pub transformer: GPTTransformer,
    pub lm_head: Linear,
    #[module(skip)]
    pub config: GPTConfig,
}

impl GPT {
    pub fn new(config: GPTConfig, dev: &Device) -> Result<GPT> {
        let mut model = GPT {
            transformer: GPTTransformer {
                wte: Embedding::new(config.vocab_size, config.n_embd, dev)?,
                wpe: Embedding::new(config.block_size, config.n_embd, dev)?,
                drop: Dropout::new(config.dropout)?,
                h: (0..config.n_layer)
                    .map(|_| Block::new(&config, dev))
                    .collect::<Result<_>>()?,
                ln_f: layer_norm(config.n_embd, config.bias, dev)?,
            },
            lm_head: linear(config.n_embd, config.vocab_size, false, dev)?,
            config,
        };
        // with weight tying when using torch.compile() some warnings get generated: "UserWarning:
        // functional_call was passed multiple values for tied weights." This behavior is deprecated.
        model.transformer.wte.weight = model.lm_head.weight.clone(); // https://paperswithcode.com/method/weight-tying
                                                                     // init all weights
        model.apply(|m| {
            if let Some(l) = m.downcast_ref::<Linear>() {
                init::normal_(&l.weight, 0.0, 0.02)?;
                if let Some(b) = &l.bias {
                    init::zeros_(b)?;
                }
            } else if let Some(e) = m.downcast_ref::<Embedding>() {
                init::normal_(&e.weight, 0.0, 0.02)?;
            }
            Ok(())
        })?;
        // apply special scaled init to the residual projections, per GPT-2 paper
        let std = 0.02 / (2.0 * model.config.n_layer as f64).sqrt();
        for (pn, p) in model.named_parameters() {
            if pn.ends_with("c_proj.weight") {
                init::normal_(&p, 0.0, std)?;
            }
        }
        Ok(model)
    }

    /// Logits `[b, t, vocab]` and the loss when `targets` are given; without targets only the
    /// last position's logits `[b, 1, vocab]` (inference-time mini-optimization).
    pub fn forward(
        &self,
        idx: &Tensor,
        targets: Option<&Tensor>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (b, t) = (idx.shape()[0], idx.shape()[1]);
        if t > self.config.block_size {
            return Err(Error::msg(format!(
                "Cannot forward sequence of length {t}, block size is only {}",
                self.config.block_size
            )));
        }
        let dev = idx.device();
        let pos = Tensor::arange_dtype(0.0, t as f64, 1.0, DType::I64, &dev)?; // shape (t)
                                                                               // forward the GPT model itself
        let tok_emb = self.transformer.wte.forward(idx)?; // token embeddings of shape (b, t, n_embd)
        let pos_emb = self.transformer.wpe.forward(&pos)?; // position embeddings of shape (t, n_embd)
        let mut x = self.transformer.drop.forward(&(tok_emb + pos_emb))?;
        for block in &self.transformer.h {
            x = block.forward(&x)?;
        }
        let x = self.transformer.ln_f.forward(&x)?;
        match targets {
            Some(targets) => {
                // if we are given some desired targets also calculate the loss
                let logits = self.lm_head.forward(&x)?;
                let v = logits.shape()[2] as i32;
                let loss = F::cross_entropy_with(
                    &logits.view([-1, v])?,
                    &targets.view([-1])?,
                    F::CrossEntropyOptions {
                        ignore_index: -1,
                        ..Default::default()
                    },
                )?;
                Ok((logits, Some(loss)))
            }
            None => {
                // note: using list [-1] to preserve the time dim
                let logits = self.lm_head.forward(&x.narrow(1, t - 1, 1)?)?;
                let _ = b;
                Ok((logits, None))
            }
        }
    }

    /// model.py's `configure_optimizers`: every 2-D+ parameter (matmul weights, embeddings)
    /// decays, biases and LayerNorm weights don't; AdamW.
    pub fn configure_optimizers(
        &self,
        weight_decay: f64,
        learning_rate: f64,
        betas: (f64, f64),
    ) -> Result<wgtorch::optim::Adam> {
        let params: Vec<(String, Tensor)> = self
            .named_parameters()
            .into_iter()
            .filter(|(_, p)| p.requires_grad())
            .collect();
        let decay: Vec<Tensor> = params
            .iter()
            .filter(|(_, p)| p.ndim() >= 2)
            .map(|(_, p)| p.clone())
            .collect();
        let nodecay: Vec<Tensor> = params
            .iter()
            .filter(|(_, p)| p.ndim() < 2)
            .map(|(_, p)| p.clone())
            .collect();
        let count = |v: &[Tensor]| v.iter().map(|p| p.numel()).sum::<usize>();
        println!(
            "num decayed parameter tensors: {}, with {} parameters",
            decay.len(),
            count(&decay)
        );
        println!(
            "num non-decayed parameter tensors: {}, with {} parameters",
            nodecay.len(),
            count(&nodecay)
        );
        let groups = vec![
            ParamGroup::new(decay).weight_decay(weight_decay),
            ParamGroup::new(nodecay).weight_decay(0.0),
        ];
        AdamW::with_options(
            groups,
            wgtorch::optim::AdamWOptions {
                lr: learning_rate,
                betas,
                weight_decay,
                ..Default::default()
            },
        )
    }

    /// Take a conditioning sequence of indices `idx` (`[b, t]` int64) and complete it
    /// `max_new_tokens` times, feeding the predictions back into the model each time.
    pub fn generate(
        &self,
        idx: &Tensor,
        max_new_tokens: usize,
        temperature: f64,
        top_k: Option<usize>,
    ) -> Result<Tensor> {
        let _g = no_grad();
        let mut idx = idx.clone();
        for _ in 0..max_new_tokens {
            // if the sequence context is growing too long we must crop it at block_size
            let t = idx.shape()[1];
            let bs = self.config.block_size;
            let idx_cond = if t <= bs {
                idx.clone()
            } else {
                idx.narrow(1, t - bs, bs)?
            };
            // forward the model to get the logits for the index in the sequence
            let (logits, _) = self.forward(&idx_cond, None)?;
            // pluck the logits at the final step and scale by desired temperature
            let mut logits = logits.squeeze_dim(1)? / temperature;
            // optionally crop the logits to only the top k options
            if let Some(k) = top_k {
                let k = k.min(logits.shape()[1]);
                let (v, _) = logits.topk(k)?;
                let kth = v.narrow(1, k - 1, 1)?;
                logits = logits.masked_fill(&logits.lt(&kth)?, f64::NEG_INFINITY)?;
            }
            // apply softmax to convert logits to (normalized) probabilities
            let probs = logits.softmax(-1)?;
            // sample from the distribution
            let idx_next = probs.multinomial(1, false)?;
            // append sampled index to the running sequence and continue
            idx = Tensor::cat(&[idx, idx_next], 1)?;
        }
        Ok(idx)
    }
}

/// train.py's hyperparameters that this port uses (its CPU defaults scaled to this corpus).
#[derive(Parser, Debug, Clone)]
#[command(about = "nanoGPT train.py on the embedded corpus (character level)")]
pub struct TrainConfig {
    #[arg(long, default_value_t = 2)]
    pub gradient_accumulation_steps: usize,
    #[arg(long, default_value_t = 12)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 64)]
    pub block_size: usize,
    #[arg(long, default_value_t = 4)]
    pub n_layer: usize,
    #[arg(long, default_value_t = 4)]
    pub n_head: usize,
    #[arg(long, default_value_t = 128)]
    pub n_embd: usize,
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f64,
    #[arg(long)]
    pub bias: bool,
    /// max learning rate
    #[arg(long, default_value_t = 1e-3)]
    pub learning_rate: f64,
    /// total number of training iterations
    #[arg(long, default_value_t = 2000)]
    pub max_iters: usize,
    #[arg(long, default_value_t = 1e-1)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = 0.9)]
    pub beta1: f64,
    #[arg(long, default_value_t = 0.99)]
    pub beta2: f64,
    /// clip gradients at this value, or disable if == 0.0
    #[arg(long, default_value_t = 1.0)]
    pub grad_clip: f64,
    /// how many steps to warm up for
    #[arg(long, default_value_t = 100)]
    pub warmup_iters: usize,
    /// should be ~= max_iters per Chinchilla
    #[arg(long, default_value_t = 2000)]
    pub lr_decay_iters: usize,
    /// minimum learning rate, should be ~= learning_rate/10 per Chinchilla
    #[arg(long, default_value_t = 1e-4)]
    pub min_lr: f64,
    #[arg(long, default_value_t = 250)]
    pub eval_interval: usize,
    #[arg(long, default_value_t = 20)]
    pub eval_iters: usize,
    #[arg(long, default_value_t = 10)]
    pub log_interval: usize,
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// cpu, gpu or auto
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// characters to sample after training
    #[arg(long, default_value_t = 200)]
    pub sample_tokens: usize,
}

/// learning rate decay scheduler (cosine with warmup), train.py's `get_lr`.
pub fn get_lr(c: &TrainConfig, it: usize) -> f64 {
    // 1) linear warmup for warmup_iters steps
    if it < c.warmup_iters {
        return c.learning_rate * (it + 1) as f64 / (c.warmup_iters + 1) as f64;
    }
    // 2) if it > lr_decay_iters, return min learning rate
    if it > c.lr_decay_iters {
        return c.min_lr;
    }
    // 3) in between, use cosine decay down to min learning rate
    let decay_ratio = (it - c.warmup_iters) as f64 / (c.lr_decay_iters - c.warmup_iters) as f64;
    let coeff = 0.5 * (1.0 + (std::f64::consts::PI * decay_ratio).cos()); // coeff ranges 0..1
    c.min_lr + coeff * (c.learning_rate - c.min_lr)
}

/// The character vocabulary and the encoded corpus (prepare.py of shakespeare_char).
pub fn encode_corpus() -> Result<(Vec<char>, Tensor)> {
    let mut chars: Vec<char> = CORPUS.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    let ids: Vec<i64> = CORPUS
        .chars()
        .map(|c| chars.binary_search(&c).map(|i| i as i64).unwrap_or(0))
        .collect();
    let n = ids.len();
    Ok((chars, Tensor::from_vec(ids, [n], &Device::Cpu)?))
}

/// train.py's `get_batch` for given offsets `ix` (train.py draws them with `torch.randint`).
pub fn batch_at(
    data: &Tensor,
    ix: &[i64],
    block_size: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    let rows = |off: usize| -> Result<Tensor> {
        let r: Vec<Tensor> = ix
            .iter()
            .map(|&i| data.narrow(0, i as usize + off, block_size))
            .collect::<Result<_>>()?;
        Tensor::stack(&r, 0)?.to(dev)
    };
    Ok((rows(0)?, rows(1)?))
}

/// One iteration of train.py's loop: set the lr, accumulate gradients over micro-steps (each
/// loss scaled by 1/accumulation), clip, step, zero. `next_batch` is called once per micro-step,
/// after the forward, as train.py prefetches. Returns the last micro-step's unscaled loss.
pub fn train_iter(
    model: &GPT,
    optimizer: &mut wgtorch::optim::Adam,
    c: &TrainConfig,
    it: usize,
    batch: &mut (Tensor, Tensor),
    next_batch: &mut dyn FnMut() -> Result<(Tensor, Tensor)>,
) -> Result<f64> {
    // determine and set the learning rate for this iteration
    let lr = get_lr(c, it);
    for g in optimizer.param_groups_mut() {
        g.lr.set(lr);
    }
    let mut last = 0.0;
    for _micro_step in 0..c.gradient_accumulation_steps {
        let (_, loss) = model.forward(&batch.0, Some(&batch.1))?;
        let loss =
            loss.ok_or_else(|| Error::msg("no loss"))? / c.gradient_accumulation_steps as f64;
        // immediately async prefetch next batch while model is doing the forward pass
        *batch = next_batch()?;
        loss.backward()?;
        last = loss.item()? * c.gradient_accumulation_steps as f64;
    }
    // clip the gradient
    if c.grad_clip != 0.0 {
        optim::clip_grad_norm_(&model.parameters(), c.grad_clip, 2.0)?;
    }
    // step the optimizer
    optimizer.step()?;
    // flush the gradients as soon as we can, no need for this memory anymore
    optimizer.zero_grad();
    Ok(last)
}

fn main() -> Result<()> {
    let c = TrainConfig::parse();
    manual_seed(c.seed);
    let dev = match c.device.as_str() {
        "cpu" => Device::Cpu,
        "gpu" => Device::gpu()?,
        _ => Device::best(),
    };
    let (chars, data) = encode_corpus()?;
    let n = (0.9 * data.shape()[0] as f64) as usize;
    let (train_data, val_data) = (
        data.narrow(0, 0, n)?,
        data.narrow(0, n, data.shape()[0] - n)?,
    );
    let get_batch = |split: &Tensor| -> Result<(Tensor, Tensor)> {
        let ix = Tensor::randint(
            0,
            (split.shape()[0] - c.block_size) as i64,
            [c.batch_size],
            &Device::Cpu,
        )?;
        batch_at(split, &ix.to_vec::<i64>()?, c.block_size, &dev)
    };
    let model_args = GPTConfig {
        block_size: c.block_size,
        vocab_size: chars.len(),
        n_layer: c.n_layer,
        n_head: c.n_head,
        n_embd: c.n_embd,
        dropout: c.dropout,
        bias: c.bias,
    };
    let mut model = GPT::new(model_args, &dev)?;
    println!(
        "number of parameters: {:.2}M",
        model.num_parameters() as f64 / 1e6
    );
    let mut optimizer =
        model.configure_optimizers(c.weight_decay, c.learning_rate, (c.beta1, c.beta2))?;

    // helps estimate an arbitrarily accurate loss over either split using many batches
    let estimate_loss = |model: &mut GPT| -> Result<(f64, f64)> {
        model.eval();
        let mut out = [0.0; 2];
        for (k, split) in [&train_data, &val_data].into_iter().enumerate() {
            let _g = no_grad();
            for _ in 0..c.eval_iters {
                let (x, y) = get_batch(split)?;
                let (_, loss) = model.forward(&x, Some(&y))?;
                out[k] += loss.ok_or_else(|| Error::msg("no loss"))?.item()? / c.eval_iters as f64;
            }
        }
        model.train();
        Ok((out[0], out[1]))
    };

    let mut batch = get_batch(&train_data)?; // fetch the very first batch
    let mut t0 = Instant::now();
    for iter_num in 0..=c.max_iters {
        // evaluate the loss on train/val sets
        if iter_num % c.eval_interval == 0 {
            let (train, val) = estimate_loss(&mut model)?;
            println!("step {iter_num}: train loss {train:.4}, val loss {val:.4}");
        }
        if iter_num == c.max_iters {
            break;
        }
        let lossf = train_iter(
            &model,
            &mut optimizer,
            &c,
            iter_num,
            &mut batch,
            &mut || get_batch(&train_data),
        )?;
        if iter_num % c.log_interval == 0 {
            let dt = t0.elapsed().as_secs_f64();
            t0 = Instant::now();
            println!(
                "iter {iter_num}: loss {lossf:.4}, time {:.2}ms",
                dt * 1000.0
            );
        }
    }

    // sample.py: generate from a newline
    model.eval();
    let start = chars.binary_search(&'\n').unwrap_or(0) as i64;
    let x = Tensor::from_vec(vec![start], [1, 1], &dev)?;
    let y = model.generate(&x, c.sample_tokens, 0.8, Some(20))?;
    let text: String = y
        .to_vec::<i64>()?
        .iter()
        .map(|&i| chars[i as usize])
        .collect();
    println!("---------------\n{text}\n---------------");
    Ok(())
}
