//! The op registry. Elementwise ops are enums declared once in [`elementwise`]; heavier ops sit
//! one family per file with their backward rules beside them; composite ops are written with
//! other ops and so get both backends and autograd for free.

mod clamp;
mod conv;
mod einsum;
pub(crate) mod elementwise;
mod finite;
mod index;
mod inplace;
mod logical;
mod loss;
mod matmul;
mod movement;
mod norm;
mod pointwise;
mod reduce;
mod roll;
mod sort;
mod tri;

pub use conv::*;
pub use elementwise::{BinaryOp, UnaryOp};
pub use finite::NanToNumOptions;
pub use loss::*;
pub use norm::*;
pub use reduce::ReduceOp;
pub use sort::{SortOptions, TopkOptions};
