//! Neural-network building blocks: the [`Module`] and [`Forward`] traits with
//! `#[derive(Module)]`, layers, containers, initialisers and losses.
//!
//! `use wgtorch::nn::Module;` brings both the trait and the derive. A field holding a tensor
//! must say what it is:
//!
//! ```compile_fail
//! use wgtorch::nn::Module;
//! #[derive(Module)]
//! struct Scale {
//!     gain: wgtorch::Tensor, // error: mark it #[param], #[buffer] or #[module(skip)]
//! }
//! ```
//!
//! `#[module(forward)]` implements [`Forward`] with the struct's inherent `forward`; without
//! one it does not compile ("function cannot return without recursing", at the attribute):
//!
//! ```compile_fail
//! use wgtorch::nn::{Linear, Module};
//! #[derive(Module)]
//! #[module(forward)]
//! pub struct Head {
//!     fc: Linear,
//! }
//! ```

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
pub use container::{ModuleDict, ModuleList, Sequential};
pub use functional::Size2;
pub use layers::*;
pub use loss::*;
#[doc(hidden)]
pub use module::{join_name, ModuleBase};
pub use module::{
    visit_child, visit_child_mut, Forward, Kind, LoadReport, Module, ModuleExt, TensorSlots,
};
pub use norm::{BatchNorm1d, BatchNorm2d, BatchNormOptions, LayerNorm, LayerNormOptions};
pub use rnn::{Nonlinearity, RNNOptions, GRU, LSTM, RNN};
pub use transformer::{
    Activation, DecoderArgs, EncoderArgs, Transformer, TransformerArgs, TransformerDecoder,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerLayerOptions,
    TransformerOptions, TransformerStackOptions,
};
pub use wgtorch_derive::Module;
