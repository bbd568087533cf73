//! pytorch/examples `word_language_model` (main.py, model.py, data.py), ported line by line:
//! an RNN (LSTM, GRU, RNN_TANH, RNN_RELU) or Transformer language model trained with truncated
//! backpropagation through time, plain SGD with gradient clipping and lr annealing. It reads
//! the embedded `data/tiny_corpus.txt` (a synthetic stand-in for Wikitext-2) split 80/10/10.
//!
//! `cargo run --release --example word_language_model -- --model LSTM --tied --epochs 3`
//!
//! `tests/ports.rs` checks 10 training batches (LSTM tied, GRU, Transformer) against PyTorch.

use clap::Parser;
use std::collections::HashMap;
use std::time::Instant;
use wgtorch::nn::{
    init, Dropout, Embedding, Linear, Nonlinearity, RNNOptions, Transformer, TransformerEncoder,
    TransformerEncoderLayer, TransformerLayerOptions, TransformerStackOptions, GRU, LSTM, RNN,
};
use wgtorch::nn::{Kind, LayerNorm};
use wgtorch::prelude::*;

/// The embedded corpus.
pub const CORPUS: &str = include_str!("../data/tiny_corpus.txt");

/// data.py's `Dictionary` + `Corpus.tokenize`: words split on whitespace, `<eos>` after each
/// line, ids in order of first appearance.
#[derive(Default)]
pub struct Dictionary {
    pub word2idx: HashMap<String, usize>,
    pub idx2word: Vec<String>,
}

impl Dictionary {
    pub fn add_word(&mut self, word: &str) -> usize {
        if let Some(&i) = self.word2idx.get(word) {
            return i;
        }
        self.idx2word.push(word.to_string());
        self.word2idx
            .insert(word.to_string(), self.idx2word.len() - 1);
        self.idx2word.len() - 1
    }
    pub fn len(&self) -> usize {
        self.idx2word.len()
    }
    pub fn is_empty(&self) -> bool {
        self.idx2word.is_empty()
    }
    /// The ids of `text` (`[n]` int64).
    pub fn tokenize(&mut self, text: &str) -> Result<Tensor> {
        let mut ids = Vec::new();
        for line in text.lines() {
            for w in line.split_whitespace().chain(["<eos>"]) {
                ids.push(self.add_word(w) as i64);
            }
        }
        let n = ids.len();
        Tensor::from_vec(ids, [n], &Device::Cpu)
    }
}

/// main.py's `batchify`: `[n]` -> `[n / bsz, bsz]` (columns are independent streams).
pub fn batchify(data: &Tensor, bsz: usize, dev: &Device) -> Result<Tensor> {
    let nbatch = data.shape()[0] / bsz;
    data.narrow(0, 0, nbatch * bsz)?
        .view([bsz, nbatch])?
        .t()?
        .contiguous()?
        .to(dev)
}

/// main.py's `get_batch`: `(source[i:i+seq_len], source[i+1:i+1+seq_len].view(-1))`.
pub fn get_batch(source: &Tensor, i: usize, bptt: usize) -> Result<(Tensor, Tensor)> {
    let seq_len = bptt.min(source.shape()[0] - 1 - i);
    let data = source.narrow(0, i, seq_len)?;
    let target = source.narrow(0, i + 1, seq_len)?.reshape([-1])?;
    Ok((data, target))
}

/// The recurrent module of `RNNModel` (`getattr(nn, rnn_type)` or `nn.RNN(nonlinearity=..)`).
pub enum Recurrent {
    Lstm(LSTM),
    Gru(GRU),
    Rnn(RNN),
}

/// One module under the name `rnn`, whichever kind it is.
impl Module for Recurrent {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        match self {
            Recurrent::Lstm(m) => m.visit(f),
            Recurrent::Gru(m) => m.visit(f),
            Recurrent::Rnn(m) => m.visit(f),
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        match self {
            Recurrent::Lstm(m) => m.visit_mut(f),
            Recurrent::Gru(m) => m.visit_mut(f),
            Recurrent::Rnn(m) => m.visit_mut(f),
        }
    }
    fn set_training(&mut self, on: bool) {
        match self {
            Recurrent::Lstm(m) => m.set_training(on),
            Recurrent::Gru(m) => m.set_training(on),
            Recurrent::Rnn(m) => m.set_training(on),
        }
    }
}

/// The hidden state: `(h, c)` for an LSTM, `h` otherwise.
#[derive(Clone)]
pub enum Hidden {
    Lstm(Tensor, Tensor),
    Other(Tensor),
}

impl Hidden {
    /// main.py's `repackage_hidden`: the same values, cut from their history.
    pub fn repackage(&self) -> Hidden {
        match self {
            Hidden::Lstm(h, c) => Hidden::Lstm(h.detach(), c.detach()),
            Hidden::Other(h) => Hidden::Other(h.detach()),
        }
    }
}

/// model.py's `RNNModel`: encoder, recurrent module, decoder.
#[derive(Module)]
pub struct RNNModel {
    pub drop: Dropout,
    pub encoder: Embedding,
    pub rnn: Recurrent,
    pub decoder: Linear,
    pub ntoken: usize,
    pub nhid: usize,
    pub nlayers: usize,
}

impl RNNModel {
    /// model.py's `RNNModel(rnn_type, ntoken, ninp, nhid, nlayers, dropout, tie_weights)`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rnn_type: &str,
        ntoken: usize,
        ninp: usize,
        nhid: usize,
        nlayers: usize,
        dropout: f64,
        tie_weights: bool,
        dev: &Device,
    ) -> Result<RNNModel> {
        let opts = RNNOptions {
            num_layers: nlayers,
            dropout,
            ..Default::default()
        };
        let rnn = match rnn_type {
            "LSTM" => Recurrent::Lstm(LSTM::with_options(ninp, nhid, opts, dev)?),
            "GRU" => Recurrent::Gru(GRU::with_options(ninp, nhid, opts, dev)?),
            "RNN_TANH" | "RNN_RELU" => {
                let nonlinearity = if rnn_type == "RNN_TANH" {
                    Nonlinearity::Tanh
                } else {
                    Nonlinearity::Relu
                };
                let opts = RNNOptions { nonlinearity, ..opts };
                Recurrent::Rnn(RNN::with_options(ninp, nhid, opts, dev)?)
            }
            _ => return Err(Error::msg("An invalid option for `--model` was supplied, options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']")),
        };
        let mut model = RNNModel {
            drop: Dropout::new(dropout)?,
            encoder: Embedding::new(ntoken, ninp, dev)?,
            rnn,
            decoder: Linear::new(nhid, ntoken, dev)?,
            ntoken,
            nhid,
            nlayers,
        };
        // Optionally tie weights as in "Using the Output Embedding to Improve Language Models"
        // (Press & Wolf 2016) and "Tying Word Vectors and Word Classifiers" (Inan et al. 2016).
        if tie_weights {
            if nhid != ninp {
                return Err(Error::msg(
                    "When using the tied flag, nhid must be equal to emsize",
                ));
            }
            model.decoder.weight = model.encoder.weight.clone();
        }
        model.init_weights()?;
        Ok(model)
    }

    fn init_weights(&self) -> Result<()> {
        let initrange = 0.1;
        init::uniform_(&self.encoder.weight, -initrange, initrange)?;
        if let Some(b) = &self.decoder.bias {
            init::zeros_(b)?;
        }
        init::uniform_(&self.decoder.weight, -initrange, initrange)
    }

    /// Log-probabilities `[seq * batch, ntoken]` and the new hidden state.
    pub fn forward(&self, input: &Tensor, hidden: &Hidden) -> Result<(Tensor, Hidden)> {
        let emb = self.drop.forward(&self.encoder.forward(input)?)?;
        let (output, hidden) = match (&self.rnn, hidden) {
            (Recurrent::Lstm(m), Hidden::Lstm(h, c)) => {
                let (o, (h, c)) = m.forward_with_state(&emb, Some((h, c)))?;
                (o, Hidden::Lstm(h, c))
            }
            (Recurrent::Gru(m), Hidden::Other(h)) => {
                let (o, h) = m.forward_with_state(&emb, Some(h))?;
                (o, Hidden::Other(h))
            }
            (Recurrent::Rnn(m), Hidden::Other(h)) => {
                let (o, h) = m.forward_with_state(&emb, Some(h))?;
                (o, Hidden::Other(h))
            }
            _ => return Err(Error::msg("RNNModel: hidden state of the wrong kind")),
        };
        let output = self.drop.forward(&output)?;
        let decoded = self.decoder.forward(&output)?;
        let decoded = decoded.view([-1, self.ntoken as i32])?;
        Ok((decoded.log_softmax(1)?, hidden))
    }

    pub fn init_hidden(&self, bsz: usize) -> Result<Hidden> {
        let weight = &self.parameters()[0];
        let z = || weight.new_zeros([self.nlayers, bsz, self.nhid]);
        Ok(match self.rnn {
            Recurrent::Lstm(_) => Hidden::Lstm(z()?, z()?),
            _ => Hidden::Other(z()?),
        })
    }
}

/// model.py's `PositionalEncoding`: sines and cosines added to the embeddings.
#[derive(Module)]
pub struct PositionalEncoding {
    pub dropout: Dropout,
    #[buffer]
    pub pe: Tensor,
}

impl PositionalEncoding {
    pub fn new(d_model: usize, dropout: f64, max_len: usize, dev: &Device) -> Result<Self> {
        let position = Tensor::arange(0.0, max_len as f64, 1.0, dev)?.unsqueeze(1)?;
        let div_term = (Tensor::arange(0.0, d_model as f64, 2.0, dev)?
            * (-(10000f64).ln() / d_model as f64))
            .exp()?;
        let angles = position.matmul(&div_term.unsqueeze(0)?)?; // [max_len, d_model / 2]
                                                                // pe[:, 0::2] = sin, pe[:, 1::2] = cos: interleave along a new last dim.
        let pe = Tensor::stack(&[angles.sin()?, angles.cos()?], -1)?
            .reshape([max_len, d_model])?
            .unsqueeze(0)?
            .transpose(0, 1)?
            .contiguous()?;
        Ok(PositionalEncoding {
            dropout: Dropout::new(dropout)?,
            pe,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x + &self.pe.narrow(0, 0, x.shape()[0])?;
        self.dropout.forward(&x)
    }
}

/// model.py's `TransformerModel` (an `nn.Transformer` whose `decoder` attribute is replaced by
/// the output Linear, so only the encoder stack and its final norm remain).
#[derive(Module)]
pub struct TransformerModel {
    pub encoder: TransformerEncoder,
    pub pos_encoder: PositionalEncoding,
    pub input_emb: Embedding,
    pub decoder: Linear,
    pub ninp: usize,
}

impl TransformerModel {
    pub fn new(
        ntoken: usize,
        ninp: usize,
        nhead: usize,
        nhid: usize,
        nlayers: usize,
        dropout: f64,
        dev: &Device,
    ) -> Result<TransformerModel> {
        // super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers):
        // the layers keep nn.Transformer's default dropout (0.1) unless `layer_dropout` says otherwise.
        Self::with_layer_dropout(ntoken, ninp, nhead, nhid, nlayers, dropout, 0.1, dev)
    }

    /// As `new`, with the encoder layers' dropout given (the golden run sets it to 0).
    #[allow(clippy::too_many_arguments)]
    pub fn with_layer_dropout(
        ntoken: usize,
        ninp: usize,
        nhead: usize,
        nhid: usize,
        nlayers: usize,
        dropout: f64,
        layer_dropout: f64,
        dev: &Device,
    ) -> Result<TransformerModel> {
        let layer = TransformerEncoderLayer::with_options(
            ninp,
            nhead,
            TransformerLayerOptions {
                dim_feedforward: nhid,
                dropout: layer_dropout,
                ..Default::default()
            },
            dev,
        )?;
        let norm = LayerNorm::new(&[ninp], dev)?;
        let encoder = TransformerEncoder::with_options(
            layer,
            nlayers,
            TransformerStackOptions { norm: Some(norm) },
        )?;
        let model = TransformerModel {
            encoder,
            pos_encoder: PositionalEncoding::new(ninp, dropout, 5000, dev)?,
            input_emb: Embedding::new(ntoken, ninp, dev)?,
            decoder: Linear::new(ninp, ntoken, dev)?,
            ninp,
        };
        let initrange = 0.1;
        init::uniform_(&model.input_emb.weight, -initrange, initrange)?;
        if let Some(b) = &model.decoder.bias {
            init::zeros_(b)?;
        }
        init::uniform_(&model.decoder.weight, -initrange, initrange)?;
        Ok(model)
    }

    /// Log-probabilities `[seq, batch, ntoken]`.
    pub fn forward(&self, src: &Tensor, has_mask: bool) -> Result<Tensor> {
        let mask = if has_mask {
            Some(Transformer::generate_square_subsequent_mask(
                src.shape()[0],
                &src.device(),
            )?)
        } else {
            None
        };
        let src = self.input_emb.forward(src)? * (self.ninp as f64).sqrt();
        let src = self.pos_encoder.forward(&src)?;
        let args = wgtorch::nn::EncoderArgs {
            src_mask: mask.as_ref(),
            ..Default::default()
        };
        let output = self.encoder.forward(&src, args)?;
        let output = self.decoder.forward(&output)?;
        output.log_softmax(-1)
    }
}

/// Either model of main.py.
pub enum LanguageModel {
    Rnn(RNNModel),
    Transformer(TransformerModel),
}

impl LanguageModel {
    pub fn module(&self) -> &dyn Module {
        match self {
            LanguageModel::Rnn(m) => m,
            LanguageModel::Transformer(m) => m,
        }
    }
    pub fn module_mut(&mut self) -> &mut dyn Module {
        match self {
            LanguageModel::Rnn(m) => m,
            LanguageModel::Transformer(m) => m,
        }
    }
}

/// One batch of main.py's `train()`: forward, NLL loss, backward, `clip_grad_norm_`, then the
/// hand-written SGD update `p.data.add_(p.grad, alpha=-lr)`. Returns the loss and the hidden state.
pub fn train_batch(
    model: &LanguageModel,
    data: &Tensor,
    targets: &Tensor,
    hidden: Option<Hidden>,
    lr: f64,
    clip: f64,
) -> Result<(f64, Option<Hidden>)> {
    let params = model.module().parameters();
    model.module().zero_grad();
    let (output, hidden) = match (model, hidden) {
        (LanguageModel::Transformer(m), _) => {
            let ntokens = m.decoder.weight.shape()[0];
            (m.forward(data, true)?.view([-1, ntokens as i32])?, None)
        }
        (LanguageModel::Rnn(m), Some(h)) => {
            // Starting each batch, we detach the hidden state from how it was previously produced.
            let (o, h) = m.forward(data, &h.repackage())?;
            (o, Some(h))
        }
        (LanguageModel::Rnn(_), None) => return Err(Error::msg("an RNN needs a hidden state")),
    };
    let loss = F::nll_loss(&output, targets)?;
    loss.backward()?;
    // `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
    optim::clip_grad_norm_(&params, clip, 2.0)?;
    {
        let _g = no_grad();
        for p in &params {
            if let Some(g) = p.grad() {
                p.sub_(&(&g * lr))?;
            }
        }
    }
    Ok((loss.item()?, hidden))
}

#[derive(Parser, Debug)]
#[command(
    about = "PyTorch Wikitext-2 RNN/LSTM/GRU/Transformer Language Model (on the embedded corpus)"
)]
struct Args {
    /// type of network (RNN_TANH, RNN_RELU, LSTM, GRU, Transformer)
    #[arg(long, default_value = "LSTM")]
    model: String,
    /// size of word embeddings
    #[arg(long, default_value_t = 200)]
    emsize: usize,
    /// number of hidden units per layer
    #[arg(long, default_value_t = 200)]
    nhid: usize,
    /// number of layers
    #[arg(long, default_value_t = 2)]
    nlayers: usize,
    /// initial learning rate
    #[arg(long, default_value_t = 20.0)]
    lr: f64,
    /// gradient clipping
    #[arg(long, default_value_t = 0.25)]
    clip: f64,
    /// upper epoch limit
    #[arg(long, default_value_t = 40)]
    epochs: usize,
    /// batch size
    #[arg(long, default_value_t = 20)]
    batch_size: usize,
    /// sequence length
    #[arg(long, default_value_t = 35)]
    bptt: usize,
    /// dropout applied to layers (0 = no dropout)
    #[arg(long, default_value_t = 0.2)]
    dropout: f64,
    /// tie the word embedding and softmax weights
    #[arg(long)]
    tied: bool,
    /// random seed
    #[arg(long, default_value_t = 1111)]
    seed: u64,
    /// use the CPU even if a GPU is present
    #[arg(long)]
    no_accel: bool,
    /// report interval
    #[arg(long, default_value_t = 20)]
    log_interval: usize,
    /// path to save the final model
    #[arg(long, default_value = "model.safetensors")]
    save: String,
    /// the number of heads in the encoder/decoder of the transformer model
    #[arg(long, default_value_t = 2)]
    nhead: usize,
    /// verify the code and the model
    #[arg(long)]
    dry_run: bool,
}

fn evaluate(
    model: &mut LanguageModel,
    data_source: &Tensor,
    args: &Args,
    eval_bsz: usize,
) -> Result<f64> {
    // Turn on evaluation mode which disables dropout.
    model.module_mut().eval();
    let _g = no_grad();
    let mut total_loss = 0.0;
    let mut hidden = match model {
        LanguageModel::Rnn(m) => Some(m.init_hidden(eval_bsz)?),
        LanguageModel::Transformer(_) => None,
    };
    let n = data_source.shape()[0];
    for i in (0..n - 1).step_by(args.bptt) {
        let (data, targets) = get_batch(data_source, i, args.bptt)?;
        let output = match (&*model, &hidden) {
            (LanguageModel::Transformer(m), _) => {
                let ntokens = m.decoder.weight.shape()[0];
                m.forward(&data, true)?.view([-1, ntokens as i32])?
            }
            (LanguageModel::Rnn(m), Some(h)) => {
                let (o, h) = m.forward(&data, h)?;
                hidden = Some(h.repackage());
                o
            }
            _ => return Err(Error::msg("an RNN model needs its hidden state")),
        };
        total_loss += data.shape()[0] as f64 * F::nll_loss(&output, &targets)?.item()?;
    }
    Ok(total_loss / (n - 1) as f64)
}

fn main() -> Result<()> {
    let args = Args::parse();
    // Set the random seed manually for reproducibility.
    manual_seed(args.seed);
    let device = if args.no_accel {
        Device::Cpu
    } else {
        Device::best()
    };
    println!("Using device: {}", device.describe());

    // Load data: the corpus split 80/10/10 by lines into train/valid/test.
    let lines: Vec<&str> = CORPUS.lines().collect();
    let (a, b) = (lines.len() * 8 / 10, lines.len() * 9 / 10);
    let mut dict = Dictionary::default();
    let train = dict.tokenize(&lines[..a].join("\n"))?;
    let valid = dict.tokenize(&lines[a..b].join("\n"))?;
    let test = dict.tokenize(&lines[b..].join("\n"))?;
    let eval_batch_size = 10;
    let train_data = batchify(&train, args.batch_size, &device)?;
    let val_data = batchify(&valid, eval_batch_size, &device)?;
    let test_data = batchify(&test, eval_batch_size, &device)?;

    // Build the model.
    let ntokens = dict.len();
    let mut model = if args.model == "Transformer" {
        LanguageModel::Transformer(TransformerModel::new(
            ntokens,
            args.emsize,
            args.nhead,
            args.nhid,
            args.nlayers,
            args.dropout,
            &device,
        )?)
    } else {
        LanguageModel::Rnn(RNNModel::new(
            &args.model,
            ntokens,
            args.emsize,
            args.nhid,
            args.nlayers,
            args.dropout,
            args.tied,
            &device,
        )?)
    };

    let mut lr = args.lr;
    let mut best_val_loss: Option<f64> = None;
    for epoch in 1..=args.epochs {
        let epoch_start_time = Instant::now();
        // train()
        model.module_mut().train();
        let mut total_loss = 0.0;
        let mut start_time = Instant::now();
        let mut hidden = match &model {
            LanguageModel::Rnn(m) => Some(m.init_hidden(args.batch_size)?),
            LanguageModel::Transformer(_) => None,
        };
        let n = train_data.shape()[0];
        for (batch, i) in (0..n - 1).step_by(args.bptt).enumerate() {
            let (data, targets) = get_batch(&train_data, i, args.bptt)?;
            let (loss, h) = train_batch(&model, &data, &targets, hidden, lr, args.clip)?;
            hidden = h;
            total_loss += loss;
            if batch % args.log_interval == 0 && batch > 0 {
                let cur_loss = total_loss / args.log_interval as f64;
                let elapsed = start_time.elapsed().as_secs_f64();
                println!(
                    "| epoch {epoch:3} | {batch:5}/{:5} batches | lr {lr:02.2} | ms/batch {:5.2} | loss {cur_loss:5.2} | ppl {:8.2}",
                    n / args.bptt,
                    elapsed * 1000.0 / args.log_interval as f64,
                    cur_loss.exp()
                );
                total_loss = 0.0;
                start_time = Instant::now();
            }
            if args.dry_run {
                break;
            }
        }
        let val_loss = evaluate(&mut model, &val_data, &args, eval_batch_size)?;
        println!("{}", "-".repeat(89));
        println!(
            "| end of epoch {epoch:3} | time: {:5.2}s | valid loss {val_loss:5.2} | valid ppl {:8.2}",
            epoch_start_time.elapsed().as_secs_f64(),
            val_loss.exp()
        );
        println!("{}", "-".repeat(89));
        // Save the model if the validation loss is the best we've seen so far.
        if best_val_loss.is_none_or(|b| val_loss < b) {
            wgtorch::io::save(&args.save, &model.module().state_dict())?;
            best_val_loss = Some(val_loss);
        } else {
            // Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0;
        }
    }

    // Load the best saved model and run on test data.
    let best = wgtorch::io::load(&args.save, &device)?;
    model.module_mut().load_state_dict(&best, true)?;
    let test_loss = evaluate(&mut model, &test_data, &args, eval_batch_size)?;
    println!("{}", "=".repeat(89));
    println!(
        "| End of training | test loss {test_loss:5.2} | test ppl {:8.2}",
        test_loss.exp()
    );
    println!("{}", "=".repeat(89));
    Ok(())
}
