//! Neural-network building blocks (PyTorch's `torch.nn`): the [`Module`] and [`Forward`] traits
//! with `#[derive(Module)]`, layers, containers ([`Sequential`], [`ModuleList`], [`ModuleDict`]),
//! initialisers ([`init`]), losses as modules ([`CrossEntropyLoss`], ...) and their functional
//! forms ([`functional`], imported as `F`).
//!
//! A model is a struct of layers with `#[derive(Module)]` and its own `forward`;
//! [`ModuleExt`] gives it PyTorch's `parameters`, `state_dict`, `load_state_dict`, `train` and
//! `eval`:
//!
//! ```
//! use wgtorch::nn::{functional as F, Dropout, Linear, Module, ModuleExt, ReLU, Sequential};
//! use wgtorch::{Device, Result, Tensor};
//!
//! #[derive(Module)]
//! struct Mlp {
//!     body: Sequential, // children named `body.0`, `body.1`
//!     drop: Dropout,
//!     head: Linear,
//! }
//!
//! impl Mlp {
//!     fn new(dev: &Device) -> Result<Mlp> {
//!         let body = Sequential::new().append(Linear::new(4, 16, dev)?).append(ReLU::new());
//!         Ok(Mlp { body, drop: Dropout::new(0.2)?, head: Linear::new(16, 3, dev)? })
//!     }
//!     fn forward(&self, x: &Tensor) -> Result<Tensor> {
//!         self.head.forward(&self.drop.forward(&self.body.forward(x)?)?)
//!     }
//! }
//!
//! let dev = Device::Cpu;
//! wgtorch::manual_seed(0);
//! let mut model = Mlp::new(&dev)?;
//! let names: Vec<String> = model.state_dict().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["body.0.weight", "body.0.bias", "head.weight", "head.bias"]);
//! assert_eq!(model.num_parameters(), 4 * 16 + 16 + 16 * 3 + 3);
//!
//! // A training forward pass and a loss (dropout is active: modules start in training mode).
//! assert_eq!(model.training(), Some(true));
//! let x = Tensor::randn([8, 4], &dev)?;
//! let target = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2, 0, 1], [8], &dev)?;
//! let loss = F::cross_entropy(&model.forward(&x)?, &target)?;
//! loss.backward()?;
//! assert!(model.parameters().iter().all(|p| p.grad().is_some()));
//!
//! // Evaluation mode reaches the Dropout; a second model loads the first one's weights.
//! model.eval();
//! let mut copy = Mlp::new(&dev)?;
//! let report = copy.load_state_dict(&model.state_dict(), true)?;
//! assert!(report.missing_keys.is_empty() && report.unexpected_keys.is_empty());
//! copy.eval();
//! let (a, b) = (model.forward(&x)?, copy.forward(&x)?);
//! assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
//! # Ok::<(), wgtorch::Error>(())
//! ```
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
