//! # wgtorch
//!
//! PyTorch's way of working, in Rust, on any GPU (wgpu + WGSL) and on the CPU (rayon).
//!
//! ```
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu; // or Device::best()
//! wgtorch::manual_seed(0);
//! let x = Tensor::randn([4, 3], &dev)?.requires_grad_(true);
//! let y = x.square()?.sum_all()?;
//! y.backward()?;
//! let g = x.grad().unwrap().to_vec::<f32>()?;
//! let xv = x.to_vec::<f32>()?;
//! assert!((g[0] - 2.0 * xv[0]).abs() < 1e-6);
//! # Ok::<(), wgtorch::Error>(())
//! ```

// `::wgtorch` paths (what `#[derive(Module)]` generates) also work inside the crate.
extern crate self as wgtorch;

pub mod amp;
pub mod autograd;
pub mod backend;
pub mod data;
mod device;
pub mod dtype;
mod error;
pub mod io;
pub mod models;
pub mod nn;
pub mod ops;
pub mod optim;
mod rng;
pub mod shape;
mod tensor;

pub use autograd::{enable_grad, is_grad_enabled, no_grad};
pub use device::Device;
pub use dtype::{DType, Scalar};
pub use error::{Error, Result};
pub use rng::{manual_seed, with_default_generator, Generator};
pub use tensor::Tensor;
