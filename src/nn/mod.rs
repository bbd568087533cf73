//! Neural-network building blocks.

pub mod functional;
