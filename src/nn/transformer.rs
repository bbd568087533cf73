//! Transformer layers as PyTorch's: `TransformerEncoderLayer`, `TransformerDecoderLayer`, their
//! stacks `TransformerEncoder` / `TransformerDecoder` (`layers.0.*`, `norm.*`) and `Transformer`,
//! post-norm or `norm_first`, relu or gelu, with PyTorch's parameter names.

use super::attention::{
    bool_bias, causal_keep, MhaArgs, MultiheadAttention, MultiheadAttentionOptions,
};
use super::init;
use super::layers::{Dropout, Linear, LinearOptions};
use super::module::{Forward, ModuleExt};
use super::norm::{LayerNorm, LayerNormOptions};
use super::Module;
use crate::{Device, Error, Result, Tensor};

/// The feed-forward activation of the transformer layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// `relu` (PyTorch's default).
    #[default]
    Relu,
    /// `gelu` (exact, erf form).
    Gelu,
}

/// Keyword arguments of `nn.TransformerEncoderLayer` and `nn.TransformerDecoderLayer` after
/// `(d_model, nhead)`; `Default` is PyTorch's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerLayerOptions {
    /// Hidden width of the feed-forward block (default 2048).
    pub dim_feedforward: usize,
    /// Dropout after attention, inside and after the feed-forward block (default 0.1).
    pub dropout: f64,
    /// Feed-forward activation (default relu).
    pub activation: Activation,
    /// LayerNorm epsilon (default 1e-5).
    pub layer_norm_eps: f64,
    /// `[batch, seq, feature]` inputs (default false: `[seq, batch, feature]`).
    pub batch_first: bool,
    /// Pre-norm (`x + f(norm(x))`) instead of post-norm (`norm(x + f(x))`) (default false).
    pub norm_first: bool,
    /// Biases in the linear layers, the attention projections and the LayerNorms (default true).
    pub bias: bool,
}

impl Default for TransformerLayerOptions {
    fn default() -> Self {
        TransformerLayerOptions {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

/// Arguments of the encoder's forward after `src`; `Default` is PyTorch's.
/// (`TransformerEncoder` calls `src_mask` `mask`.)
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderArgs<'a> {
    /// `[S, S]` or `[N * nhead, S, S]` (bool: `true` = may not attend; or a float bias).
    pub src_mask: Option<&'a Tensor>,
    /// `[N, S]` (bool: `true` = padding).
    pub src_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `src_mask` is the causal mask.
    pub is_causal: bool,
}

/// Arguments of the decoder's forward after `(tgt, memory)`; `Default` is PyTorch's.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderArgs<'a> {
    /// `[T, T]` self-attention mask.
    pub tgt_mask: Option<&'a Tensor>,
    /// `[T, S]` mask over the memory.
    pub memory_mask: Option<&'a Tensor>,
    /// `[N, T]` padding of the targets.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]` padding of the memory.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `tgt_mask` is the causal mask.
    pub tgt_is_causal: bool,
    /// A hint that `memory_mask` is the causal mask.
    pub memory_is_causal: bool,
}

/// Arguments of [`Transformer::forward`] after `(src, tgt)`; `Default` is PyTorch's.
#[derive(Clone, Copy, Debug, Default)]
pub struct TransformerArgs<'a> {
    /// Encoder self-attention mask.
    pub src_mask: Option<&'a Tensor>,
    /// Decoder self-attention mask.
    pub tgt_mask: Option<&'a Tensor>,
    /// Decoder attention over the memory.
    pub memory_mask: Option<&'a Tensor>,
    /// `[N, S]` padding of the sources.
    pub src_key_padding_mask: Option<&'a Tensor>,
    /// `[N, T]` padding of the targets.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]` padding of the memory.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `src_mask` is causal.
    pub src_is_causal: bool,
    /// A hint that `tgt_mask` is causal.
    pub tgt_is_causal: bool,
    /// A hint that `memory_mask` is causal.
    pub memory_is_causal: bool,
}

fn layer_norm(d_model: usize, o: &TransformerLayerOptions, dev: &Device) -> Result<LayerNorm> {
    let lo = LayerNormOptions {
        eps: o.layer_norm_eps,
        bias: o.bias,
        ..Default::default()
    };
    LayerNorm::with_options(&[d_model], lo, dev)
}

fn linear(i: usize, o: usize, opts: &TransformerLayerOptions, dev: &Device) -> Result<Linear> {
    Linear::with_options(i, o, LinearOptions { bias: opts.bias }, dev)
}

fn attention(
    d_model: usize,
    nhead: usize,
    o: &TransformerLayerOptions,
    dev: &Device,
) -> Result<MultiheadAttention> {
    let mo = MultiheadAttentionOptions {
        dropout: o.dropout,
        batch_first: o.batch_first,
        bias: o.bias,
        ..Default::default()
    };
    MultiheadAttention::with_options(d_model, nhead, mo, dev)
}

/// The feed-forward block `dropout(linear2(dropout(act(linear1(x)))))` (the outer dropout passed in).
fn feed_forward(
    l1: &Linear,
    drop: &Dropout,
    l2: &Linear,
    act: Activation,
    x: &Tensor,
) -> Result<Tensor> {
    let h = l1.forward(x)?;
    let h = match act {
        Activation::Relu => h.relu()?,
        Activation::Gelu => h.gelu()?,
    };
    l2.forward(&drop.forward(&h)?)
}

/// `x + f(norm(x))` (norm_first) or `norm(x + f(x))`.
fn residual(
    norm_first: bool,
    norm: &LayerNorm,
    x: &Tensor,
    f: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if norm_first {
        x.add(&f(&norm.forward(x)?)?)
    } else {
        norm.forward(&x.add(&f(x)?)?)
    }
}

fn mha_args<'a>(mask: Option<&'a Tensor>, pad: Option<&'a Tensor>, is_causal: bool) -> MhaArgs<'a> {
    MhaArgs {
        attn_mask: mask,
        key_padding_mask: pad,
        need_weights: false,
        is_causal,
        ..Default::default()
    }
}

/// A fresh module with the same configuration, dtype and values (PyTorch's `copy.deepcopy` in
/// `_get_clones`).
fn duplicate<M: Module>(
    m: &M,
    fresh: impl FnOnce(&Device) -> Result<M>,
    training: bool,
) -> Result<M> {
    let state = m.state_dict();
    let Some((_, t)) = state.first() else {
        return Err(Error::arg(
            "Transformer",
            "a layer without parameters cannot be cloned",
        ));
    };
    let mut c = fresh(&t.device())?;
    c.to_dtype(t.dtype())?;
    c.load_state_dict(&state, true)?;
    c.set_training(training);
    Ok(c)
}

/// Self-attention then feed-forward, each with a residual connection and LayerNorm (PyTorch's
/// `nn.TransformerEncoderLayer`).
///
/// ```
/// use wgtorch::nn::{EncoderArgs, TransformerEncoderLayer, TransformerLayerOptions};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let opts = TransformerLayerOptions { dim_feedforward: 16, dropout: 0.0, batch_first: true, ..Default::default() };
/// let layer = TransformerEncoderLayer::with_options(8, 2, opts, &dev)?;
/// let y = layer.forward(&Tensor::randn([3, 5, 8], &dev)?, EncoderArgs::default())?;
/// assert_eq!(y.shape(), &[3, 5, 8]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct TransformerEncoderLayer {
    /// Self-attention.
    pub self_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// Norm of the attention block.
    pub norm1: LayerNorm,
    /// Norm of the feed-forward block.
    pub norm2: LayerNorm,
    /// Dropout after attention.
    pub dropout1: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout2: Dropout,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub nhead: usize,
    /// The options it was built with.
    #[module(skip)]
    pub options: TransformerLayerOptions,
    #[module(training)]
    training: bool,
}

impl TransformerEncoderLayer {
    /// A layer with PyTorch's defaults (dim_feedforward 2048, dropout 0.1, relu, post-norm).
    pub fn new(d_model: usize, nhead: usize, dev: &Device) -> Result<TransformerEncoderLayer> {
        TransformerEncoderLayer::with_options(d_model, nhead, Default::default(), dev)
    }
    /// Every option.
    pub fn with_options(
        d_model: usize,
        nhead: usize,
        options: TransformerLayerOptions,
        dev: &Device,
    ) -> Result<TransformerEncoderLayer> {
        let o = &options;
        Ok(TransformerEncoderLayer {
            self_attn: attention(d_model, nhead, o, dev)?,
            linear1: linear(d_model, o.dim_feedforward, o, dev)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: linear(o.dim_feedforward, d_model, o, dev)?,
            norm1: layer_norm(d_model, o, dev)?,
            norm2: layer_norm(d_model, o, dev)?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            options,
            training: true,
        })
    }
    /// `src` `[S, N, E]` (`[N, S, E]` with batch_first; unbatched `[S, E]`) -> the same shape.
    pub fn forward(&self, src: &Tensor, args: EncoderArgs) -> Result<Tensor> {
        let o = &self.options;
        let sa = |x: &Tensor| {
            let a = mha_args(args.src_mask, args.src_key_padding_mask, args.is_causal);
            self.dropout1
                .forward(&self.self_attn.forward(x, x, x, a)?.0)
        };
        let ff = |x: &Tensor| {
            self.dropout2.forward(&feed_forward(
                &self.linear1,
                &self.dropout,
                &self.linear2,
                o.activation,
                x,
            )?)
        };
        let x = residual(o.norm_first, &self.norm1, src, sa)?;
        residual(o.norm_first, &self.norm2, &x, ff)
    }
    fn duplicate(&self) -> Result<TransformerEncoderLayer> {
        duplicate(
            self,
            |dev| {
                TransformerEncoderLayer::with_options(self.d_model, self.nhead, self.options, dev)
            },
            self.training,
        )
    }
}

/// Self-attention, attention over the encoder's memory, then feed-forward, each with a residual
/// connection and LayerNorm (PyTorch's `nn.TransformerDecoderLayer`).
#[derive(Module)]
pub struct TransformerDecoderLayer {
    /// Self-attention over the targets.
    pub self_attn: MultiheadAttention,
    /// Attention over the memory.
    pub multihead_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// Norm of the self-attention block.
    pub norm1: LayerNorm,
    /// Norm of the memory-attention block.
    pub norm2: LayerNorm,
    /// Norm of the feed-forward block.
    pub norm3: LayerNorm,
    /// Dropout after self-attention.
    pub dropout1: Dropout,
    /// Dropout after memory attention.
    pub dropout2: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout3: Dropout,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub nhead: usize,
    /// The options it was built with.
    #[module(skip)]
    pub options: TransformerLayerOptions,
    #[module(training)]
    training: bool,
}

impl TransformerDecoderLayer {
    /// A layer with PyTorch's defaults.
    pub fn new(d_model: usize, nhead: usize, dev: &Device) -> Result<TransformerDecoderLayer> {
        TransformerDecoderLayer::with_options(d_model, nhead, Default::default(), dev)
    }
    /// Every option.
    pub fn with_options(
        d_model: usize,
        nhead: usize,
        options: TransformerLayerOptions,
        dev: &Device,
    ) -> Result<TransformerDecoderLayer> {
        let o = &options;
        Ok(TransformerDecoderLayer {
            self_attn: attention(d_model, nhead, o, dev)?,
            multihead_attn: attention(d_model, nhead, o, dev)?,
            linear1: linear(d_model, o.dim_feedforward, o, dev)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: linear(o.dim_feedforward, d_model, o, dev)?,
            norm1: layer_norm(d_model, o, dev)?,
            norm2: layer_norm(d_model, o, dev)?,
            norm3: layer_norm(d_model, o, dev)?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            dropout3: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            options,
            training: true,
        })
    }
    /// `tgt` `[T, N, E]` attending over `memory` `[S, N, E]` -> `[T, N, E]` (batch first when so built).
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs) -> Result<Tensor> {
        let o = &self.options;
        let sa = |x: &Tensor| {
            let a = mha_args(args.tgt_mask, args.tgt_key_padding_mask, args.tgt_is_causal);
            self.dropout1
                .forward(&self.self_attn.forward(x, x, x, a)?.0)
        };
        let ca = |x: &Tensor| {
            let a = mha_args(
                args.memory_mask,
                args.memory_key_padding_mask,
                args.memory_is_causal,
            );
            self.dropout2
                .forward(&self.multihead_attn.forward(x, memory, memory, a)?.0)
        };
        let ff = |x: &Tensor| {
            self.dropout3.forward(&feed_forward(
                &self.linear1,
                &self.dropout,
                &self.linear2,
                o.activation,
                x,
            )?)
        };
        let x = residual(o.norm_first, &self.norm1, tgt, sa)?;
        let x = residual(o.norm_first, &self.norm2, &x, ca)?;
        residual(o.norm_first, &self.norm3, &x, ff)
    }
    fn duplicate(&self) -> Result<TransformerDecoderLayer> {
        duplicate(
            self,
            |dev| {
                TransformerDecoderLayer::with_options(self.d_model, self.nhead, self.options, dev)
            },
            self.training,
        )
    }
}

/// Options of [`TransformerEncoder`] / [`TransformerDecoder`] after `(layer, num_layers)`.
#[derive(Default)]
pub struct TransformerStackOptions {
    /// A final LayerNorm (`norm.*`; default none).
    pub norm: Option<LayerNorm>,
}

/// `num_layers` copies of an encoder layer (PyTorch's `nn.TransformerEncoder`: `layers.0.*`, ...).
#[derive(Module)]
pub struct TransformerEncoder {
    /// The layers (each a copy of the one given, same initial values, as PyTorch's deep copies).
    pub layers: Vec<TransformerEncoderLayer>,
    /// Final norm.
    pub norm: Option<LayerNorm>,
}

/// `num_layers` copies of a decoder layer (PyTorch's `nn.TransformerDecoder`).
#[derive(Module)]
pub struct TransformerDecoder {
    /// The layers.
    pub layers: Vec<TransformerDecoderLayer>,
    /// Final norm.
    pub norm: Option<LayerNorm>,
}

/// `layer` and `n - 1` duplicates of it (none for `n = 0`), as PyTorch's `_get_clones`.
fn clones<L>(layer: L, n: usize, duplicate: impl Fn(&L) -> Result<L>) -> Result<Vec<L>> {
    let mut layers = (1..n)
        .map(|_| duplicate(&layer))
        .collect::<Result<Vec<_>>>()?;
    if n > 0 {
        layers.insert(0, layer);
    }
    Ok(layers)
}

impl TransformerEncoder {
    /// `num_layers` copies of `encoder_layer`, no final norm.
    pub fn new(
        encoder_layer: TransformerEncoderLayer,
        num_layers: usize,
    ) -> Result<TransformerEncoder> {
        TransformerEncoder::with_options(encoder_layer, num_layers, Default::default())
    }
    /// With a final norm. The copies are built fresh (so they draw from the default generator)
    /// and then take `encoder_layer`'s values, dtype and training mode.
    pub fn with_options(
        encoder_layer: TransformerEncoderLayer,
        num_layers: usize,
        options: TransformerStackOptions,
    ) -> Result<TransformerEncoder> {
        let layers = clones(encoder_layer, num_layers, |l| l.duplicate())?;
        Ok(TransformerEncoder {
            layers,
            norm: options.norm,
        })
    }
    /// Run every layer with `args` (`src_mask` is PyTorch's `mask`), then the norm.
    pub fn forward(&self, src: &Tensor, args: EncoderArgs) -> Result<Tensor> {
        let mut x = src.clone();
        for l in &self.layers {
            x = l.forward(&x, args)?;
        }
        self.norm.as_ref().map_or(Ok(x.clone()), |n| n.forward(&x))
    }
}

impl TransformerDecoder {
    /// `num_layers` copies of `decoder_layer`, no final norm.
    pub fn new(
        decoder_layer: TransformerDecoderLayer,
        num_layers: usize,
    ) -> Result<TransformerDecoder> {
        TransformerDecoder::with_options(decoder_layer, num_layers, Default::default())
    }
    /// With a final norm.
    pub fn with_options(
        decoder_layer: TransformerDecoderLayer,
        num_layers: usize,
        options: TransformerStackOptions,
    ) -> Result<TransformerDecoder> {
        let layers = clones(decoder_layer, num_layers, |l| l.duplicate())?;
        Ok(TransformerDecoder {
            layers,
            norm: options.norm,
        })
    }
    /// Run every layer over `memory` with `args`, then the norm.
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs) -> Result<Tensor> {
        let mut x = tgt.clone();
        for l in &self.layers {
            x = l.forward(&x, memory, args)?;
        }
        self.norm.as_ref().map_or(Ok(x.clone()), |n| n.forward(&x))
    }
}

/// Keyword arguments of `nn.Transformer` after `(d_model, nhead)`; `Default` is PyTorch's
/// (6 + 6 layers, the layer defaults of [`TransformerLayerOptions`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerOptions {
    /// Encoder layers (default 6).
    pub num_encoder_layers: usize,
    /// Decoder layers (default 6).
    pub num_decoder_layers: usize,
    /// Everything the layers take (dim_feedforward, dropout, activation, layer_norm_eps,
    /// batch_first, norm_first).
    pub layer: TransformerLayerOptions,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions {
            num_encoder_layers: 6,
            num_decoder_layers: 6,
            layer: Default::default(),
        }
    }
}

/// Encoder-decoder transformer (PyTorch's `nn.Transformer`): `encoder.layers.*`, `encoder.norm`,
/// `decoder.layers.*`, `decoder.norm`; every matrix re-initialised xavier-uniform.
///
/// ```
/// use wgtorch::nn::{Transformer, TransformerArgs, TransformerLayerOptions, TransformerOptions};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let layer = TransformerLayerOptions { dim_feedforward: 16, dropout: 0.0, ..Default::default() };
/// let opts = TransformerOptions { num_encoder_layers: 1, num_decoder_layers: 1, layer };
/// let model = Transformer::with_options(8, 2, opts, &dev)?;
/// let (src, tgt) = (Tensor::randn([5, 2, 8], &dev)?, Tensor::randn([3, 2, 8], &dev)?);
/// let mask = Transformer::generate_square_subsequent_mask(3, &dev)?;
/// let args = TransformerArgs { tgt_mask: Some(&mask), ..Default::default() };
/// assert_eq!(model.forward(&src, &tgt, args)?.shape(), &[3, 2, 8]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct Transformer {
    /// The encoder stack (with its final norm).
    pub encoder: TransformerEncoder,
    /// The decoder stack (with its final norm).
    pub decoder: TransformerDecoder,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub nhead: usize,
    /// `[N, S, E]` inputs.
    pub batch_first: bool,
}

impl Transformer {
    /// PyTorch's defaults (6 + 6 layers, dim_feedforward 2048, dropout 0.1).
    pub fn new(d_model: usize, nhead: usize, dev: &Device) -> Result<Transformer> {
        Transformer::with_options(d_model, nhead, Default::default(), dev)
    }
    /// Every option.
    pub fn with_options(
        d_model: usize,
        nhead: usize,
        options: TransformerOptions,
        dev: &Device,
    ) -> Result<Transformer> {
        let o = options.layer;
        let norm = |_| Some(layer_norm(d_model, &o, dev)).transpose();
        let enc = TransformerEncoderLayer::with_options(d_model, nhead, o, dev)?;
        let encoder = TransformerEncoder::with_options(
            enc,
            options.num_encoder_layers,
            TransformerStackOptions { norm: norm(0)? },
        )?;
        let dec = TransformerDecoderLayer::with_options(d_model, nhead, o, dev)?;
        let decoder = TransformerDecoder::with_options(
            dec,
            options.num_decoder_layers,
            TransformerStackOptions { norm: norm(1)? },
        )?;
        let t = Transformer {
            encoder,
            decoder,
            d_model,
            nhead,
            batch_first: o.batch_first,
        };
        for p in t.parameters() {
            if p.ndim() > 1 {
                init::xavier_uniform_(&p, 1.0)?;
            }
        }
        Ok(t)
    }
    /// Encode `src` `[S, N, E]`, decode `tgt` `[T, N, E]` over it -> `[T, N, E]` (batch first
    /// when so built; unbatched `[S, E]` / `[T, E]` too).
    pub fn forward(&self, src: &Tensor, tgt: &Tensor, args: TransformerArgs) -> Result<Tensor> {
        let batched = src.ndim() == 3;
        let bdim = usize::from(!self.batch_first);
        if batched && tgt.ndim() == 3 && src.shape()[bdim] != tgt.shape()[bdim] {
            return Err(Error::shape(
                "Transformer",
                format!(
                    "the batch number of src and tgt must be equal (src {:?}, tgt {:?})",
                    src.shape(),
                    tgt.shape()
                ),
            ));
        }
        if src.shape().last() != Some(&self.d_model) || tgt.shape().last() != Some(&self.d_model) {
            return Err(Error::shape("Transformer", format!("the feature number of src and tgt must be equal to d_model ({}), got src {:?} and tgt {:?}", self.d_model, src.shape(), tgt.shape())));
        }
        let enc = EncoderArgs {
            src_mask: args.src_mask,
            src_key_padding_mask: args.src_key_padding_mask,
            is_causal: args.src_is_causal,
        };
        let memory = self.encoder.forward(src, enc)?;
        let dec = DecoderArgs {
            tgt_mask: args.tgt_mask,
            memory_mask: args.memory_mask,
            tgt_key_padding_mask: args.tgt_key_padding_mask,
            memory_key_padding_mask: args.memory_key_padding_mask,
            tgt_is_causal: args.tgt_is_causal,
            memory_is_causal: args.memory_is_causal,
        };
        self.decoder.forward(tgt, &memory, dec)
    }
    /// `[sz, sz]` f32: `-inf` above the diagonal, 0 elsewhere (a causal float mask).
    pub fn generate_square_subsequent_mask(sz: usize, dev: &Device) -> Result<Tensor> {
        bool_bias(&causal_keep(sz, sz, dev)?, &Tensor::zeros([], dev)?)
    }
}

/// The encoder layer with PyTorch's defaults for the masks (none) and `is_causal` (false).
impl Forward for TransformerEncoderLayer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        TransformerEncoderLayer::forward(self, x, Default::default())
    }
}

/// The encoder stack with PyTorch's defaults for the masks (none) and `is_causal` (false).
impl Forward for TransformerEncoder {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        TransformerEncoder::forward(self, x, Default::default())
    }
}
