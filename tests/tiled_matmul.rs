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
    // The f16 path is the process's: the other tests hold the lock too.
    let _seed = common::seed_lock();
    let ctx = wgtorch::backend::gpu::context(0)?;
    assert!(!ctx.is_cpu_adapter());
    let had = ctx.native_f16();
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
    ctx.set_native_f16(had);
    Ok(())
}

/// The implicit-GEMM convolution kernels on the tiled path: forward with bias, the input
/// gradient (stride 1 as a flipped forward, stride 2 through its own operands) and the weight
/// gradient split over the batch, against the CPU.
#[test]
fn tiled_conv_matches_cpu() -> Result<()> {
    std::env::set_var("WGTORCH_GPU_KERNELS", "tiled");
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    assert!(!wgtorch::backend::gpu::context(0)?.is_cpu_adapter());
    let _seed = common::seed_lock();
    wgtorch::manual_seed(3);
    for (stride, pad, dil) in [([1, 1], [1, 1], [1, 1]), ([2, 1], [1, 0], [1, 2])] {
        let x = Tensor::randn([5, 3, 9, 8], &Device::Cpu)?;
        let w = Tensor::randn([70, 3, 3, 3], &Device::Cpu)?;
        let b = Tensor::randn([70], &Device::Cpu)?;
        let run = |dev: &Device| -> Result<Vec<Vec<f64>>> {
            let leaf =
                |t: &Tensor| -> Result<Tensor> { Ok(t.to(dev)?.detach().requires_grad_(true)) };
            let (x, w, b) = (leaf(&x)?, leaf(&w)?, leaf(&b)?);
            let y = wgtorch::nn::functional::conv2d_with(
                &x,
                &w,
                Some(&b),
                wgtorch::nn::functional::Conv2dFuncOptions {
                    stride: stride.into(),
                    padding: pad.into(),
                    dilation: dil.into(),
                    ..Default::default()
                },
            )?;
            y.mul(&y)?.sum_all()?.backward()?;
            Ok(vec![
                common::vals(&y),
                common::vals(&x.grad().unwrap()),
                common::vals(&w.grad().unwrap()),
                common::vals(&b.grad().unwrap()),
            ])
        };
        let (c, g) = (run(&Device::Cpu)?, run(&gpu)?);
        for (i, (c, g)) in c.iter().zip(&g).enumerate() {
            common::assert_close(&format!("{stride:?} #{i}"), g, c, 1e-4, 1e-3);
        }
    }
    Ok(())
}

/// The shared-memory vec4 matmul (`matmul.wgsl` with the vec4 tile fill) over every operand
/// layout pair.
#[test]
fn tiled_vec4_matmul_layouts_match_cpu() -> Result<()> {
    std::env::set_var("WGTORCH_GPU_KERNELS", "tiled");
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    assert!(!wgtorch::backend::gpu::context(0)?.is_cpu_adapter());
    let _seed = common::seed_lock();
    common::check_matmul_layouts(&gpu)
}

/// The tiled bodies past llvmpipe's loop cap (65,535 iterations per invocation, reached near
/// K = 2,500 by their inner loops): K split into launches, strided and vec4 layouts, exact on
/// small integers.
#[test]
fn tiled_matmul_k_past_loop_cap() -> Result<()> {
    std::env::set_var("WGTORCH_GPU_KERNELS", "tiled");
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let _seed = common::seed_lock();
    let ints = |r: usize, c: usize, s: usize| -> Result<Tensor> {
        let v: Vec<f32> = (0..r * c).map(|i| ((i * 7 + s) % 5) as f32 - 2.0).collect();
        Tensor::from_vec(v, [r, c], &Device::Cpu)
    };
    for k in [70_001, 70_004] {
        let (a, b) = (ints(3, k, 1)?, ints(k, 4, 2)?);
        let want = common::vals(&a.matmul(&b)?);
        let got = common::vals(&a.to(&gpu)?.matmul(&b.to(&gpu)?)?);
        assert!(want == got, "K = {k}: the GPU differs from the CPU");
    }
    Ok(())
}

/// The tuner on a real GPU's kernels: a bucket is tuned among the shared-memory tiles that fit
/// the adapter, every candidate timed and agreeing with the default, the fastest chosen, and
/// read back from the disk cache by a later process; a native f16 bucket among those staging
/// f16 too.
#[test]
fn the_tuner_picks_a_shared_tile() -> Result<()> {
    use wgtorch::backend::gpu::kernels::{GpuType, Tile};
    use wgtorch::backend::gpu::{self, tune};
    std::env::set_var("WGTORCH_GPU_KERNELS", "tiled");
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let _seed = common::seed_lock();
    let ctx = gpu::context(0)?;
    // WebGPU's 16 KiB of workgroup memory fits them all.
    if ctx.limits().max_compute_workgroup_storage_size >= 16384 {
        assert_eq!(ctx.gemm_tiles(GpuType::F32), &Tile::SHARED_CANDIDATES[..]);
    }
    // A cache of this process's own, read afresh; room for compiling every candidate.
    let dir = std::env::temp_dir().join(format!("wgtorch-shared-tune-{}", std::process::id()));
    std::env::set_var("WGTORCH_CACHE_DIR", &dir);
    tune::set_tuning_budget(std::time::Duration::from_secs(120));
    tune::reset_gemm_tuning();
    wgtorch::manual_seed(7);
    let a = Tensor::randn([40, 64], &Device::Cpu)?;
    let b = Tensor::randn([64, 48], &Device::Cpu)?;
    let want = common::vals(&a.matmul(&b)?);
    let native = ctx.native_f16();
    let mut cases = vec![(
        "matmul_nn_f32_tiled_vec4|64|64|64|1",
        DType::F32,
        GpuType::F32,
    )];
    if ctx.set_native_f16(true) {
        cases.push(("matmul_f16_tiled|64|64|64|1", DType::F16, GpuType::F16));
    }
    let find = |key: &str| {
        tune::tuned_gemm_tiles(0)
            .into_iter()
            .find(|(k, _)| k == key)
    };
    for (key, dt, ty) in cases {
        let (ag, bg) = (a.to(&gpu)?.to_dtype(dt)?, b.to(&gpu)?.to_dtype(dt)?);
        let tol = if dt == DType::F16 { 2e-2 } else { 1e-4 };
        // First call: the default; second: the candidates queued; tuned once they are compiled
        // and no other test is tuning.
        for call in 0..20 {
            let got = common::vals(&ag.matmul(&bg)?.to_dtype(DType::F32)?);
            common::assert_close(&format!("{dt} call {call}"), &got, &want, tol, tol);
            if find(key).is_some() {
                break;
            }
            tune::wait_for_compiles(0)?;
        }
        let (_, t) = find(key).expect("the bucket is tuned");
        let tiles = ctx.gemm_tiles(ty);
        assert_eq!(t.times_us.len(), tiles.len(), "{t:?}");
        assert_eq!(tiles.iter().any(|t| t.half), ty == GpuType::F16);
        assert!(t.times_us.iter().all(|(_, us)| us.is_some()), "{t:?}");
        let best = t
            .times_us
            .iter()
            .min_by(|x, y| x.1.unwrap().total_cmp(&y.1.unwrap()))
            .unwrap()
            .0;
        assert_eq!(t.tile, best);
        // Written to the cache, and read back as a new process would.
        tune::reset_gemm_tuning();
        ag.matmul(&bg)?;
        let (_, read) = find(key).expect("read from the cache");
        assert_eq!(read.tile, t.tile);
        assert!(read.times_us.is_empty(), "read, not tuned: {read:?}");
    }
    ctx.set_native_f16(native);
    // The other tests' tuning writes nowhere from here on.
    std::env::set_var("WGTORCH_CACHE_DIR", "none");
    let _ = std::fs::remove_dir_all(&dir);
    tune::set_tuning_budget(tune::BUDGET);
    Ok(())
}
