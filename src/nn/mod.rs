//! Neural-network building blocks: the [`Module`] trait, layers, initialisers and losses.

mod attention;
mod container;
pub mod functional;
pub mod init;
mod layers;
mod loss;
mod module;
mod norm;
mod rnn;
mod transformer;

pub use attention::{MhaArgs, MultiheadAttention, MultiheadAttentionOptions};
pub use container::{ModuleList, Sequential};
pub use layers::*;
pub use loss::*;
pub use module::{Kind, LoadReport, Module, ModuleExt};
pub use norm::{BatchNorm1d, BatchNorm2d, LayerNorm};
pub use rnn::{Nonlinearity, RNNOptions, GRU, LSTM, RNN};
pub use transformer::{
    Activation, DecoderArgs, EncoderArgs, Transformer, TransformerArgs, TransformerDecoder,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerLayerOptions,
    TransformerOptions, TransformerStackOptions,
};
