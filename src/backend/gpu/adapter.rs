//! Finding adapters and opening a device on one, asynchronously (the browser cannot block).

use super::GpuContext;

/// The backends to look on: WebGPU in the browser, natively those `WGPU_BACKEND` names, or all.
fn wanted() -> wgpu::Backends {
    #[cfg(target_arch = "wasm32")]
    let backends = wgpu::Backends::BROWSER_WEBGPU;
    #[cfg(not(target_arch = "wasm32"))]
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    backends
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// Keeps Mesa's Vulkan device-selection layer (an implicit layer installed with Mesa's drivers)
/// out of wgtorch's instance while it lives. The layer looks for the display's GPU: wgpu enables
/// the Wayland surface extension, so the layer connects to Wayland, and without a session
/// libwayland prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment." twice on
/// every start. wgtorch ranks adapters itself, so the layer has nothing to add here. The loader
/// reads the layer's off switch, `NODEVICE_SELECT=1`, when the instance is created; it is set
/// only for that moment (and left alone when the user set it).
struct QuietDeviceSelect(bool);

impl QuietDeviceSelect {
    const VAR: &'static str = "NODEVICE_SELECT";
    fn new() -> QuietDeviceSelect {
        let set = cfg!(target_os = "linux") && std::env::var_os(Self::VAR).is_none();
        if set {
            std::env::set_var(Self::VAR, "1");
        }
        QuietDeviceSelect(set)
    }
}

impl Drop for QuietDeviceSelect {
    fn drop(&mut self) {
        if self.0 {
            std::env::remove_var(Self::VAR);
        }
    }
}

/// Whether wgtorch runs its kernels through this backend. wgpu's GL backend translates WGSL to
/// GLSL, where NaN comparisons and the remainder of negative integers are left to the driver: on
/// Mesa's llvmpipe through GL, relu(NaN) was 0 and integer remainder/fmod with negative operands
/// were wrong (14 of PyTorch's golden cases), where the same adapter through Vulkan passes them
/// all. A wrong number is worse than the CPU device, so GL adapters are passed over and named in
/// the error when no other adapter is found.
fn runs_kernels(backend: wgpu::Backend) -> bool {
    matches!(
        backend,
        wgpu::Backend::Vulkan
            | wgpu::Backend::Metal
            | wgpu::Backend::Dx12
            | wgpu::Backend::BrowserWebGpu
    )
}

/// Adapters with compute shaders on `backends`, best first (discrete before integrated before
/// software).
async fn adapters(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    let instance = instance(backends);
    #[cfg(target_arch = "wasm32")]
    let mut list: Vec<wgpu::Adapter> = instance
        .request_adapter(&Default::default())
        .await
        .into_iter()
        .collect();
    #[cfg(not(target_arch = "wasm32"))]
    let mut list = instance.enumerate_adapters(wgpu::Backends::all()).await;
    list.retain(|a| {
        a.get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
    });
    list.sort_by_key(|a| match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    });
    list
}

/// The adapters wgtorch runs on, and when there are none, the descriptions of those it passed
/// over for their backend (GL is opened only then: starting it costs EGL's start-up).
async fn usable_adapters() -> (Vec<wgpu::Adapter>, Vec<String>) {
    let _quiet = QuietDeviceSelect::new();
    let wanted = wanted();
    let mut list = adapters(wanted.difference(wgpu::Backends::GL)).await;
    list.retain(|a| runs_kernels(a.get_info().backend));
    let passed = if list.is_empty() && wanted.contains(wgpu::Backends::GL) {
        let gl = adapters(wgpu::Backends::GL).await;
        gl.iter()
            .map(|a| {
                let i = a.get_info();
                format!("\"{}\" ({:?})", i.name, i.backend)
            })
            .collect()
    } else {
        Vec::new()
    };
    (list, passed)
}

/// The error for a missing `gpu:{ordinal}` when `found` adapters can run the kernels and the
/// adapters in `passed` were passed over for their backend.
fn missing_adapter(ordinal: usize, found: usize, passed: &[String]) -> String {
    let mut e = format!(
        "wgpu found {found} adapter(s) wgtorch can run on, so gpu:{ordinal} does not exist"
    );
    if !passed.is_empty() {
        e.push_str(&format!(
            "; passed over: {} (through OpenGL, NaN and negative integer remainders are left \
             to the driver and gave wrong numbers; wgtorch needs Vulkan, Metal, DX12 or WebGPU)",
            passed.join(", ")
        ));
    }
    if found == 0 {
        e.push_str(
            " (on Linux, install a Vulkan driver such as Mesa's lavapipe: apt-get install \
             mesa-vulkan-drivers libvulkan1; or use the CPU device)",
        );
    }
    e
}

/// The kernels' fixed needs: 256-invocation workgroups (elementwise, reductions, 16x16 GEMM tiles),
/// 8 KiB of workgroup memory (the default shared GEMM tile's two 16x64 f32 blocks; larger tiles
/// are offered where they fit) and 6 storage buffers (scatter_add's
/// params, four tensors and the index-check flag). WebGPU guarantees both; an adapter
/// below them is refused by name rather than failing at its first dispatch.
fn check_limits(name: &str, l: &wgpu::Limits) -> std::result::Result<(), String> {
    let needs = [
        (
            "max_compute_invocations_per_workgroup",
            l.max_compute_invocations_per_workgroup,
            256,
        ),
        (
            "max_compute_workgroup_size_x",
            l.max_compute_workgroup_size_x,
            256,
        ),
        (
            "max_compute_workgroup_size_y",
            l.max_compute_workgroup_size_y,
            16,
        ),
        (
            "max_compute_workgroup_storage_size",
            l.max_compute_workgroup_storage_size,
            8192,
        ),
        (
            "max_storage_buffers_per_shader_stage",
            l.max_storage_buffers_per_shader_stage,
            6,
        ),
    ];
    match needs.iter().find(|(_, have, need)| have < need) {
        Some((limit, have, need)) => Err(format!(
            "adapter \"{name}\" has {limit} = {have}, below the {need} wgtorch's kernels need; use the CPU device"
        )),
        None => Ok(()),
    }
}

/// Open adapter `ordinal` with its real limits, and SHADER_F16 and TIMESTAMP_QUERY when it has
/// them.
pub(crate) async fn create(ordinal: usize) -> std::result::Result<GpuContext, String> {
    let (list, passed) = usable_adapters().await;
    let adapter = list.get(ordinal).ok_or_else(|| {
        if cfg!(target_arch = "wasm32") {
            "this browser offers no WebGPU adapter".to_string()
        } else {
            missing_adapter(ordinal, list.len(), &passed)
        }
    })?;
    let info = adapter.get_info();
    let native_ok = std::env::var("WGTORCH_NO_NATIVE_F16").is_err();
    let has_f16 = adapter.features().contains(wgpu::Features::SHADER_F16) && native_ok;
    // Timestamp queries time kernels for the profiler; WGTORCH_NO_TIMESTAMPS opens the device
    // without them (to see the profiler on an adapter that has none).
    let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY)
        && std::env::var("WGTORCH_NO_TIMESTAMPS").is_err();
    // Subgroup operations for reductions and the GEMM tiles that share a side;
    // WGTORCH_NO_SUBGROUPS opens the device without them.
    // Natively only: no browser this project tests in offers them, so the page keeps the
    // portable kernels.
    let subgroups = adapter.features().contains(wgpu::Features::SUBGROUP)
        && std::env::var("WGTORCH_NO_SUBGROUPS").is_err()
        && cfg!(not(target_arch = "wasm32"));
    let mut required = wgpu::Features::empty();
    required.set(wgpu::Features::SHADER_F16, has_f16);
    required.set(wgpu::Features::TIMESTAMP_QUERY, timestamps);
    required.set(wgpu::Features::SUBGROUP, subgroups);
    let limits = adapter.limits();
    check_limits(&info.name, &limits)?;
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("wgtorch"),
            required_features: required,
            required_limits: limits.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("adapter \"{}\" refused a device: {e}", info.name))?;
    Ok(GpuContext::new(
        ordinal, device, queue, info, limits, has_f16,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn adapters_below_the_kernels_needs_are_refused_by_name() {
        let ok = wgpu::Limits::default();
        assert!(super::check_limits("x", &ok).is_ok());
        let low = wgpu::Limits {
            max_compute_workgroup_storage_size: 4096,
            ..ok
        };
        let e = super::check_limits("tiny", &low).unwrap_err();
        assert!(
            e.contains("\"tiny\"") && e.contains("max_compute_workgroup_storage_size = 4096"),
            "{e}"
        );
    }

    #[test]
    fn gl_adapters_are_passed_over_and_named() {
        use wgpu::Backend::*;
        for b in [Vulkan, Metal, Dx12, BrowserWebGpu] {
            assert!(super::runs_kernels(b), "{b:?}");
        }
        for b in [Gl, Noop] {
            assert!(!super::runs_kernels(b), "{b:?}");
        }
        let gl = ["\"llvmpipe (LLVM 15.0.6, 256 bits)\" (Gl)".to_string()];
        let e = super::missing_adapter(0, 0, &gl);
        assert!(
            e.contains("gpu:0 does not exist")
                && e.contains("passed over: \"llvmpipe (LLVM 15.0.6, 256 bits)\" (Gl)")
                && e.contains("OpenGL")
                && e.contains("mesa-vulkan-drivers"),
            "{e}"
        );
        let e = super::missing_adapter(1, 1, &[]);
        assert!(
            e.contains("gpu:1 does not exist")
                && !e.contains("passed over")
                && !e.contains("install"),
            "{e}"
        );
    }
}
