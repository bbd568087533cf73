//! Bad input, faults and long runs: every entry point gives a correct result or a clear `Err`
//! naming the op, the shapes/dtype/device and the limit — never a wrong number, a panic, an abort
//! or a hang. One test binary (one link, one shared GPU context); one module per defect family.

#[path = "../common/mod.rs"]
mod common;

mod autograd_saved;
mod data_loading;
mod gpu_index_checks;
mod gpu_limits;
mod io_fuzz;
mod leaks;
mod loop_cap;
mod matrix;
mod numerics;
mod shapes_alloc;
