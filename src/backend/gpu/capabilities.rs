//! What a GPU context's adapter is and offers, and which kernel variants it runs: its name and
//! API, limits, whether it is a software adapter, native f16 and subgroups (and the switches for
//! both), and the GEMM tiles the tuner times on it.

use super::kernels::{GpuType, Tile};
use super::GpuContext;
use std::sync::atomic::Ordering;

impl GpuContext {
    /// "name (type, backend)".
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}{})",
            if self.info.name.is_empty() {
                "unnamed adapter"
            } else {
                &self.info.name
            },
            self.info.device_type,
            self.info.backend,
            if self.has_f16 { ", shader-f16" } else { "" }
        )
    }
    /// The graphics API the adapter is driven through: "Vulkan", "Metal", "Dx12", "Gl" or
    /// "BrowserWebGpu". One GPU can appear twice (Vulkan and GL); the native API comes first.
    pub fn backend(&self) -> String {
        format!("{:?}", self.info.backend)
    }
    /// The device's limits (the adapter's own: wgtorch asks for all it has).
    ///
    /// ```
    /// if let Ok(ctx) = wgtorch::backend::gpu::context(0) {
    ///     assert!(ctx.limits().max_compute_workgroup_storage_size >= 8192);
    /// }
    /// ```
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }
    /// True for software adapters (lavapipe, SwiftShader: wgpu reports device type Cpu).
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }
    /// Whether to run the CPU-friendly kernel variants: on software adapters, unless
    /// `WGTORCH_GPU_KERNELS` asks for the real-GPU ones.
    pub fn is_cpu_adapter(&self) -> bool {
        self.is_software() && std::env::var("WGTORCH_GPU_KERNELS").is_err()
    }
    /// How many iterations of a kernel's main loop one invocation may run on this adapter (`None`:
    /// no limit). Below `loop_cap` by a margin for the kernel's other loops, which count too.
    pub(crate) fn loop_budget(&self) -> Option<usize> {
        self.loop_cap.map(|c| c as usize - 256)
    }
    /// Whether the adapter has `SHADER_F16` (native f16 kernels are possible).
    ///
    /// ```
    /// if let Ok(ctx) = wgtorch::backend::gpu::context(0) {
    ///     assert!(ctx.has_shader_f16() || !ctx.native_f16());
    /// }
    /// ```
    pub fn has_shader_f16(&self) -> bool {
        self.has_f16
    }
    /// Whether f16 tensors run on native `f16` kernels (else the packed path).
    pub fn native_f16(&self) -> bool {
        self.native_f16.load(Ordering::Relaxed)
    }
    /// Choose the f16 path: native kernels need the adapter's SHADER_F16 (asking for them without
    /// it keeps the packed path). f16 tensors keep their bytes either way, so this is safe to flip
    /// while tensors exist. Returns the path now in force.
    pub fn set_native_f16(&self, on: bool) -> bool {
        let v = on && self.has_f16;
        self.native_f16.store(v, Ordering::Relaxed);
        v
    }
    /// Whether kernels use subgroup operations: the reductions (else workgroup memory alone)
    /// and, where subgroups are 8 wide, the GEMM tiles that share a side ([`Self::gemm_tiles`]).
    pub fn subgroups(&self) -> bool {
        self.subgroups.load(Ordering::Relaxed)
    }
    /// The tiles the tuner times for a GEMM of storage type `ty` on this adapter, its default
    /// first: on a CPU adapter [`Tile::CANDIDATES`], then [`Tile::SUBGROUP_CANDIDATES`] where
    /// subgroups are on and the adapter's are 8 lanes wide, no more and no fewer (lavapipe on
    /// AVX2), or in the browser (SwiftShader, untuned) [`Tile::BROWSER_CPU_DEFAULT`] alone; on a
    /// real GPU those of [`Tile::SHARED_CANDIDATES`] that fit its workgroup memory
    /// (all do in WebGPU's 16 KiB; the default needs 8 KiB, which the context requires), and
    /// for native f16 GEMMs ([`GpuType::F16`]: autocast's, where the adapter has `SHADER_F16`)
    /// those of [`Tile::SHARED_HALF_CANDIDATES`] too.
    ///
    /// ```
    /// use wgtorch::backend::gpu::kernels::{GpuType, Tile};
    /// if let Ok(ctx) = wgtorch::backend::gpu::context(0) {
    ///     let had = ctx.subgroups();
    ///     ctx.set_subgroups(false);
    ///     let want = match ctx.is_cpu_adapter() {
    ///         true => &Tile::CANDIDATES[..],
    ///         false => &Tile::SHARED_CANDIDATES[..],
    ///     };
    ///     assert_eq!(ctx.gemm_tiles(GpuType::F32), want);
    ///     ctx.set_subgroups(had);
    /// }
    /// ```
    pub fn gemm_tiles(&self, ty: GpuType) -> &[Tile] {
        if !self.is_cpu_adapter() {
            return match ty {
                GpuType::F16 => &self.shared_tiles_f16,
                _ => &self.shared_tiles,
            };
        }
        if self.info.backend == wgpu::Backend::BrowserWebGpu {
            return std::slice::from_ref(&Tile::BROWSER_CPU_DEFAULT);
        }
        let eight = (self.info.subgroup_min_size, self.info.subgroup_max_size) == (8, 8);
        match self.subgroups() && eight {
            true => &Tile::WITH_SUBGROUPS,
            false => &Tile::CANDIDATES,
        }
    }
    /// Choose whether kernels use subgroup operations: they need the device's `SUBGROUP`
    /// (asking for them without it keeps the portable kernels). Returns the choice now in force.
    ///
    /// ```
    /// if let Ok(ctx) = wgtorch::backend::gpu::context(0) {
    ///     let had = ctx.subgroups();
    ///     assert!(!ctx.set_subgroups(false)); // the portable kernels
    ///     ctx.set_subgroups(had);
    /// }
    /// ```
    pub fn set_subgroups(&self, on: bool) -> bool {
        let v = on && self.has_subgroups;
        self.subgroups.store(v, Ordering::Relaxed);
        v
    }
    /// Adapter name.
    pub fn adapter_name(&self) -> &str {
        &self.info.name
    }
}
