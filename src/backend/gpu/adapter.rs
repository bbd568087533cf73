//! Finding adapters and opening a device on one, asynchronously (the browser cannot block).

use super::GpuContext;

fn instance() -> wgpu::Instance {
    #[cfg(target_arch = "wasm32")]
    let backends = wgpu::Backends::BROWSER_WEBGPU;
    #[cfg(not(target_arch = "wasm32"))]
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// Adapters that can run compute shaders, best first: native APIs before GL, discrete before
/// integrated before software.
async fn adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    #[cfg(target_arch = "wasm32")]
    let mut list: Vec<wgpu::Adapter> = instance
        .request_adapter(&Default::default())
        .await
        .into_iter()
        .collect();
    #[cfg(not(target_arch = "wasm32"))]
    let mut list = instance.enumerate_adapters(wgpu::Backends::all()).await;
    let rank = |a: &wgpu::Adapter| {
        let i = a.get_info();
        let b = match i.backend {
            wgpu::Backend::Vulkan
            | wgpu::Backend::Metal
            | wgpu::Backend::Dx12
            | wgpu::Backend::BrowserWebGpu => 0,
            _ => 1,
        };
        let t = match i.device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Cpu => 3,
            wgpu::DeviceType::Other => 4,
        };
        (b, t)
    };
    list.sort_by_key(rank);
    list.retain(|a| {
        a.get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
    });
    list
}

/// Open adapter `ordinal` with its real limits and SHADER_F16 when it has it.
pub(crate) async fn create(ordinal: usize) -> std::result::Result<GpuContext, String> {
    let instance = instance();
    let list = adapters(&instance).await;
    let adapter = list.get(ordinal).ok_or_else(|| {
        if cfg!(target_arch = "wasm32") {
            "this browser offers no WebGPU adapter".to_string()
        } else {
            format!(
                "wgpu found {} adapter(s) with compute support, so gpu:{ordinal} does not exist (on Linux, install a Vulkan driver such as Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)",
                list.len()
            )
        }
    })?;
    let info = adapter.get_info();
    let native_ok = std::env::var("WGTORCH_NO_NATIVE_F16").is_err();
    let has_f16 = adapter.features().contains(wgpu::Features::SHADER_F16) && native_ok;
    let required = if has_f16 {
        wgpu::Features::SHADER_F16
    } else {
        wgpu::Features::empty()
    };
    let limits = adapter.limits();
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("wgtorch"),
            required_features: required,
            required_limits: limits.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("adapter \"{}\" refused a device: {e}", info.name))?;
    Ok(GpuContext::new(device, queue, info, limits, has_f16))
}
