//! Neural-network building blocks: the [`Module`] trait, layers, initialisers and losses.

mod container;
pub mod functional;
pub mod init;
mod layers;
mod loss;
mod module;
mod norm;
mod rnn;

pub use container::{ModuleList, Sequential};
pub use layers::*;
pub use loss::*;
pub use module::{Kind, LoadReport, Module, ModuleExt};
pub use norm::{BatchNorm1d, BatchNorm2d, LayerNorm};
pub use rnn::Lstm;
