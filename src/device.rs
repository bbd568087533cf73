//! Devices: the CPU and the GPU adapters found by wgpu.

use std::fmt;

/// Where a tensor lives.
///
/// ```
/// use wgtorch::Device;
/// let dev = Device::Cpu;
/// assert_eq!(dev.to_string(), "cpu");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory, computed with rayon.
    Cpu,
    /// GPU adapter `n` in wgtorch's order: native backends before GL, then discrete, integrated,
    /// virtual and software adapters; adapters without compute shaders are left out.
    Gpu(usize),
}

impl Device {
    /// Adapter 0 if it is a hardware GPU (its context is created on first use), else the CPU;
    /// later adapters are not tried. Software adapters (Mesa's lavapipe, SwiftShader) are slower than the CPU backend on
    /// the same cores, so they are only chosen when asked for: `WGTORCH_DEVICE=gpu` picks the
    /// first adapter whatever its kind, `WGTORCH_DEVICE=cpu` forces the CPU.
    pub fn best() -> Device {
        let want = std::env::var("WGTORCH_DEVICE").unwrap_or_default();
        if want == "cpu" {
            return Device::Cpu;
        }
        match crate::backend::gpu::context(0) {
            Ok(ctx) if want == "gpu" || !ctx.is_software() => Device::Gpu(0),
            _ => Device::Cpu,
        }
    }
    /// The first GPU, or an error saying why there is none.
    pub fn gpu() -> crate::Result<Device> {
        crate::backend::gpu::context(0).map(|_| Device::Gpu(0))
    }
    /// A human-readable description: the adapter's name, type and backend for a GPU.
    pub fn describe(&self) -> String {
        match self {
            Device::Cpu => format!("cpu ({} threads, rayon)", rayon::current_num_threads()),
            Device::Gpu(n) => match crate::backend::gpu::context(*n) {
                Ok(ctx) => format!("gpu:{n} ({})", ctx.describe()),
                Err(e) => format!("gpu:{n} (unavailable: {e})"),
            },
        }
    }
    /// True for a GPU device.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Device::Gpu(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Gpu(n) => write!(f, "gpu:{n}"),
        }
    }
}
