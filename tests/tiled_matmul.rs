//! The shared-memory tiled matmul (what real GPUs run) checked on the CI adapter too: this test
//! binary forces it with WGTORCH_GPU_KERNELS before the GPU context exists.

mod common;

use wgtorch::{DType, Device, Result, Tensor};

#[test]
fn tiled_matmul_matches_cpu_for_every_float_storage() -> Result<()> {
    std::env::set_var("WGTORCH_GPU_KERNELS", "tiled");
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let ctx = wgtorch::backend::gpu::context(0)?;
    assert!(!ctx.is_cpu_adapter());
    wgtorch::manual_seed(2);
    for (m, k, n) in [(1, 1, 1), (33, 65, 17), (70, 130, 90)] {
        let a = Tensor::randn([3, m, k], &Device::Cpu)?;
        let b = Tensor::randn([3, n, k], &Device::Cpu)?.transpose(1, 2)?;
        let want = a.matmul(&b)?;
        for (dt, native, tol) in [
            (DType::F32, false, 1e-4),
            (DType::F16, true, 2e-2),
            (DType::F16, false, 2e-2),
            (DType::BF16, false, 8e-2),
        ] {
            ctx.set_native_f16(native);
            let got = a
                .to(&gpu)?
                .to_dtype(dt)?
                .matmul(&b.to(&gpu)?.to_dtype(dt)?)?
                .to_dtype(DType::F32)?;
            let w = want.to_dtype(dt)?.to_dtype(DType::F32)?;
            common::assert_close(
                &format!("{dt} native={native} {m}x{k}x{n}"),
                &common::vals(&got),
                &common::vals(&w),
                tol,
                tol * (k as f64).sqrt(),
            );
        }
    }
    Ok(())
}
