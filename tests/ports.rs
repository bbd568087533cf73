//! The ported PyTorch programs (examples/mnist.rs, vae.rs, word_language_model.rs, nanogpt.rs)
//! train as PyTorch does: 10 steps from PyTorch's initial weights, on the CPU and the GPU, give
//! PyTorch's losses (tests/golden/ports/, written by tools/ports/gen.py). Dropout is 0 in both
//! engines and the random draws PyTorch made (VAE noise, nanoGPT batch offsets) are replayed, as
//! the two engines' random streams differ.

mod common;

#[allow(dead_code)]
#[path = "../examples/mnist.rs"]
mod mnist;
#[allow(dead_code)]
#[path = "../examples/nanogpt.rs"]
mod nanogpt;
#[allow(dead_code)]
#[path = "../examples/vae.rs"]
mod vae;
#[allow(dead_code)]
#[path = "../examples/word_language_model.rs"]
mod word_lm;

use serde_json::Value;
use std::path::PathBuf;
use wgtorch::nn::{Dropout, Module, ModuleExt};
use wgtorch::optim::{Adadelta, Adam, LrScheduler, Optimizer, Schedule};
use wgtorch::{nn::functional as F, Device, Result, Tensor};

struct Golden {
    doc: Value,
    tensors: Vec<(String, Tensor)>,
}

impl Golden {
    fn load(name: &str, dev: &Device) -> Golden {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/ports");
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let tensors = wgtorch::io::load(dir.join(format!("{name}.safetensors")), dev).unwrap();
        Golden {
            doc: serde_json::from_str(&text).unwrap(),
            tensors,
        }
    }
    /// The `init.*` entries with the prefix removed: PyTorch's initial state_dict.
    fn init(&self) -> Vec<(String, Tensor)> {
        self.tensors
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("init.").map(|k| (k.to_string(), v.clone())))
            .collect()
    }
    fn get(&self, key: &str) -> Tensor {
        self.tensors
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("{key} missing"))
            .1
            .clone()
    }
    fn cfg(&self, key: &str) -> f64 {
        self.doc["config"][key].as_f64().unwrap()
    }
    fn usize(&self, key: &str) -> usize {
        self.doc["config"][key].as_u64().unwrap() as usize
    }
    /// Compare our losses with PyTorch's: relative 1e-4 (f32 rounding differs between engines
    /// and compounds over the steps), looser on the GPU's reassociated reductions.
    fn check(&self, what: &str, dev: &Device, got: &[f64]) {
        let want: Vec<f64> = self.doc["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got.len(), want.len());
        let rtol = if dev.is_gpu() { 1e-3 } else { 2e-4 };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= rtol * w.abs(),
                "{what} on {dev}: step {i} loss {g}, PyTorch {w} (all: {got:?} vs {want:?})"
            );
        }
    }
}

fn load_init(m: &mut dyn Module, g: &Golden) {
    let report = m.load_state_dict(&g.init(), true).unwrap();
    assert!(report.missing_keys.is_empty() && report.unexpected_keys.is_empty());
}

fn rows(t: &Tensor, start: usize, len: usize, dev: &Device) -> Result<Tensor> {
    t.narrow(0, start, len)?.to(dev)
}

#[test]
fn mnist_matches_pytorch() -> Result<()> {
    let (x, y) = wgtorch::data::Digits::load()?.tensors8()?;
    let x = (x - 0.1307) / 0.3081;
    for dev in common::devices() {
        let g = Golden::load("mnist", &dev);
        let mut model = mnist::Net::new(&dev)?;
        model.dropout1 = Dropout::new(0.0)?;
        model.dropout2 = Dropout::new(0.0)?;
        load_init(&mut model, &g);
        let mut opt = Adadelta::new(model.parameters(), g.cfg("lr"))?;
        let mut sched = LrScheduler::new(
            &opt,
            Schedule::StepLR {
                step_size: 1,
                gamma: g.cfg("gamma"),
            },
        )?;
        let bs = g.usize("batch_size");
        let mut losses = Vec::new();
        for step in 0..10 {
            let (data, target) = (
                rows(&x, step * bs, bs, &dev)?,
                rows(&y, step * bs, bs, &dev)?,
            );
            opt.zero_grad();
            let loss = F::nll_loss(&model.forward(&data)?, &target)?;
            loss.backward()?;
            opt.step()?;
            losses.push(loss.item()?);
            if step % 5 == 4 {
                sched.step()?;
            }
        }
        g.check("mnist", &dev, &losses);
    }
    Ok(())
}

#[test]
fn vae_matches_pytorch() -> Result<()> {
    let (x, _) = wgtorch::data::Digits::load()?.tensors8()?;
    for dev in common::devices() {
        let g = Golden::load("vae", &dev);
        let mut model = vae::VAE::new(&dev)?;
        load_init(&mut model, &g);
        let mut opt = Adam::new(model.parameters(), g.cfg("lr"))?;
        let bs = g.usize("batch_size");
        let mut losses = Vec::new();
        for step in 0..10 {
            let data = rows(&x, step * bs, bs, &dev)?.view([-1, vae::PIXELS as i32])?;
            opt.zero_grad();
            // model.forward with PyTorch's noise draw in place of randn_like.
            let (mu, logvar) = model.encode(&data)?;
            let eps = g.get(&format!("eps.{step}"));
            let z = &mu + &eps * (0.5 * &logvar).exp()?;
            let recon = model.decode(&z)?;
            let loss = vae::loss_function(&recon, &data, &mu, &logvar)?;
            loss.backward()?;
            opt.step()?;
            losses.push(loss.item()?);
        }
        g.check("vae", &dev, &losses);
    }
    Ok(())
}

fn word_lm(name: &str, rnn_type: &str) -> Result<()> {
    let mut dict = word_lm::Dictionary::default();
    let ids = dict.tokenize(word_lm::CORPUS)?;
    for dev in common::devices() {
        let g = Golden::load(name, &dev);
        assert_eq!(dict.len(), g.usize("ntokens"));
        let (emsize, nhid, nlayers) = (g.usize("emsize"), g.usize("nhid"), g.usize("nlayers"));
        let (bsz, bptt) = (g.usize("batch_size"), g.usize("bptt"));
        let mut model = if rnn_type == "Transformer" {
            word_lm::LanguageModel::Transformer(word_lm::TransformerModel::with_layer_dropout(
                dict.len(),
                emsize,
                g.usize("nhead"),
                nhid,
                nlayers,
                0.0,
                0.0,
                &dev,
            )?)
        } else {
            word_lm::LanguageModel::Rnn(word_lm::RNNModel::new(
                rnn_type,
                dict.len(),
                emsize,
                nhid,
                nlayers,
                0.0,
                g.doc["config"]["tied"].as_bool().unwrap(),
                &dev,
            )?)
        };
        load_init(model.module_mut(), &g);
        if let word_lm::LanguageModel::Rnn(m) = &model {
            if g.doc["config"]["tied"].as_bool().unwrap() {
                // Tied: one tensor under two names, updated once per step.
                assert_eq!(m.decoder.weight.id(), m.encoder.weight.id());
                assert_eq!(m.parameters().len(), m.state_dict().len() - 1);
            }
        }
        model.module_mut().train();
        let train_data = word_lm::batchify(&ids, bsz, &dev)?;
        let mut hidden = match &model {
            word_lm::LanguageModel::Rnn(m) => Some(m.init_hidden(bsz)?),
            _ => None,
        };
        let mut losses = Vec::new();
        for step in 0..10 {
            let (data, targets) = word_lm::get_batch(&train_data, step * bptt, bptt)?;
            let (loss, h) =
                word_lm::train_batch(&model, &data, &targets, hidden, g.cfg("lr"), g.cfg("clip"))?;
            hidden = h;
            losses.push(loss);
        }
        g.check(name, &dev, &losses);
    }
    Ok(())
}

#[test]
fn word_language_model_lstm_tied_matches_pytorch() -> Result<()> {
    word_lm("word_lm_lstm", "LSTM")
}

#[test]
fn word_language_model_gru_matches_pytorch() -> Result<()> {
    word_lm("word_lm_gru", "GRU")
}

#[test]
fn word_language_model_transformer_matches_pytorch() -> Result<()> {
    word_lm("word_lm_transformer", "Transformer")
}

#[test]
fn nanogpt_matches_pytorch() -> Result<()> {
    let (chars, data) = nanogpt::encode_corpus()?;
    let n = (0.9 * data.shape()[0] as f64) as usize;
    let train_data = data.narrow(0, 0, n)?;
    for dev in common::devices() {
        let g = Golden::load("nanogpt", &dev);
        assert_eq!(
            chars.iter().collect::<String>(),
            g.doc["chars"].as_str().unwrap()
        );
        let c = nanogpt::TrainConfig {
            gradient_accumulation_steps: g.usize("gradient_accumulation_steps"),
            batch_size: g.usize("batch_size"),
            block_size: g.usize("block_size"),
            n_layer: g.usize("n_layer"),
            n_head: g.usize("n_head"),
            n_embd: g.usize("n_embd"),
            dropout: 0.0,
            bias: g.doc["config"]["bias"].as_bool().unwrap(),
            learning_rate: g.cfg("learning_rate"),
            max_iters: 10,
            weight_decay: g.cfg("weight_decay"),
            beta1: g.cfg("beta1"),
            beta2: g.cfg("beta2"),
            grad_clip: g.cfg("grad_clip"),
            warmup_iters: g.usize("warmup_iters"),
            lr_decay_iters: g.usize("lr_decay_iters"),
            min_lr: g.cfg("min_lr"),
            eval_interval: 250,
            eval_iters: 1,
            log_interval: 1,
            seed: 1337,
            device: "cpu".into(),
            sample_tokens: 0,
        };
        let lrs = g.doc["lrs"].as_array().unwrap();
        for (it, lr) in lrs.iter().enumerate() {
            assert!((nanogpt::get_lr(&c, it) - lr.as_f64().unwrap()).abs() < 1e-12);
        }
        let config = nanogpt::GPTConfig {
            block_size: c.block_size,
            vocab_size: chars.len(),
            n_layer: c.n_layer,
            n_head: c.n_head,
            n_embd: c.n_embd,
            dropout: 0.0,
            bias: c.bias,
        };
        let mut model = nanogpt::GPT::new(config, &dev)?;
        load_init(&mut model, &g);
        // Tied: lm_head.weight and transformer.wte.weight are one parameter.
        assert_eq!(model.lm_head.weight.id(), model.transformer.wte.weight.id());
        let mut opt =
            model.configure_optimizers(c.weight_decay, c.learning_rate, (c.beta1, c.beta2))?;
        let mut draw = 0;
        let mut next = || -> Result<(Tensor, Tensor)> {
            let ix = g.get(&format!("ix.{draw}")).to_vec::<i64>()?;
            draw += 1;
            nanogpt::batch_at(&train_data, &ix, c.block_size, &dev)
        };
        let mut batch = next()?;
        let mut losses = Vec::new();
        for it in 0..10 {
            losses.push(nanogpt::train_iter(
                &model, &mut opt, &c, it, &mut batch, &mut next,
            )?);
        }
        g.check("nanogpt", &dev, &losses);
        // generate: top-k sampling appends valid token ids.
        model.eval();
        let start = Tensor::from_vec(vec![0i64, 1], [1, 2], &dev)?;
        let out = model.generate(&start, 5, 0.8, Some(3))?;
        assert_eq!(out.shape(), &[1, 7]);
        assert!(out
            .to_vec::<i64>()?
            .iter()
            .all(|&i| (i as usize) < chars.len()));
    }
    Ok(())
}
