//! The GEMM tiles (lavapipe in CI) and their tuner (`backend/gpu/tune.rs`): every tile the
//! tuner may pick on a CPU adapter or a real GPU, forced in turn and checked against the CPU on
//! matmuls of every layout and storage type and the three convolution products, and the third
//! block shape; then
//! the tuner's choice, its disk cache (written, read back, corrupted, from another identity) and
//! `WGTORCH_CACHE_DIR=none`. One lock orders the tests: the tile policy is per process.

mod common;

use wgtorch::backend::gpu::kernels::{GpuType, Tile};
use wgtorch::backend::gpu::{self, tune};
use wgtorch::nn::functional::{self as F, Conv2dFuncOptions};
use wgtorch::profiler::{profile, ProfileOptions, ProfilerActivity};
use wgtorch::{DType, Device, Result, Tensor};

/// The GPU when it is a CPU adapter (the only kind with tiles), else `None`.
fn cpu_adapter() -> Option<Device> {
    let gpu = common::gpu()?;
    gpu::context(0).ok()?.is_cpu_adapter().then_some(gpu)
}

/// Non-aligned matmuls (the strided GEMM) in each float storage, and a convolution's forward
/// and both gradients, on `gpu` against the CPU.
fn check_direct(gpu: &Device, what: &str) -> Result<()> {
    let cpu = Device::Cpu;
    for (b, m, k, n) in [
        (1, 33, 65, 17),
        (2, 9, 7, 70),
        (1, 1, 3, 1),
        (1, 133, 20, 131),
    ] {
        let a = Tensor::randn([b, m, k], &cpu)?;
        let w = Tensor::randn([b, k, n], &cpu)?;
        let want = a.matmul(&w)?;
        for (dt, tol) in [(DType::F32, 1e-4), (DType::F16, 2e-2), (DType::BF16, 8e-2)] {
            let got = a.to(gpu)?.to_dtype(dt)?.matmul(&w.to(gpu)?.to_dtype(dt)?)?;
            let w = want.to_dtype(dt)?.to_dtype(DType::F32)?;
            common::assert_close(
                &format!("{what}: {dt} {b}x{m}x{k}x{n}"),
                &common::vals(&got.to_dtype(DType::F32)?),
                &common::vals(&w),
                tol,
                tol * (k as f64).sqrt(),
            );
        }
    }
    let x = Tensor::randn([3, 5, 9, 7], &cpu)?;
    let w = Tensor::randn([22, 5, 3, 3], &cpu)?;
    let bias = Tensor::randn([22], &cpu)?;
    let run = |dev: &Device| -> Result<Vec<Vec<f64>>> {
        let leaf = |t: &Tensor| -> Result<Tensor> { Ok(t.to(dev)?.detach().requires_grad_(true)) };
        let (x, w, bias) = (leaf(&x)?, leaf(&w)?, leaf(&bias)?);
        let opts = Conv2dFuncOptions {
            stride: [2, 1].into(),
            padding: [1, 1].into(),
            ..Default::default()
        };
        let y = F::conv2d_with(&x, &w, Some(&bias), opts)?;
        y.mul(&y)?.sum_all()?.backward()?;
        Ok(vec![
            common::vals(&y),
            common::vals(&x.grad().unwrap()),
            common::vals(&w.grad().unwrap()),
        ])
    };
    let (c, g) = (run(&cpu)?, run(gpu)?);
    for (i, (c, g)) in c.iter().zip(&g).enumerate() {
        common::assert_close(&format!("{what}: conv2d #{i}"), g, c, 1e-4, 1e-3);
    }
    Ok(())
}

#[test]
fn every_tile_matches_the_cpu() -> Result<()> {
    let _lock = common::seed_lock();
    let Some(gpu) = cpu_adapter() else {
        return Ok(());
    };
    wgtorch::manual_seed(5);
    let ctx = gpu::context(0)?;
    let lavapipe = ctx.adapter_name().contains("llvmpipe");
    if lavapipe && ctx.adapter_name().contains("256 bits") && ctx.subgroups() {
        assert_eq!(
            ctx.gemm_tiles(GpuType::F32),
            &Tile::WITH_SUBGROUPS[..],
            "lavapipe's subgroups are 8 wide: the subgroup tiles go untested"
        );
    }
    // The subgroup tiles run with subgroups where offered, and as their portable shapes too.
    let had = ctx.subgroups();
    let mut portable_done = false;
    for subgroups in [true, false] {
        if ctx.set_subgroups(subgroups) != subgroups {
            continue;
        }
        for tile in Tile::WITH_SUBGROUPS {
            if portable_done && !tile.subgroup {
                continue;
            }
            tune::force_gemm_tile(Some(tile));
            common::check_matmul_layouts(&gpu)?;
            check_direct(&gpu, &format!("{tile} (subgroups {subgroups})"))?;
        }
        portable_done = true;
    }
    ctx.set_subgroups(had);
    // The shared-memory tiles of real GPUs run here too (any tile runs on any adapter).
    // Those staging f16 stage it in the native f16 GEMMs (check_direct's f16, where the
    // adapter has SHADER_F16).
    let shared = Tile::SHARED_CANDIDATES
        .iter()
        .chain(&Tile::SHARED_HALF_CANDIDATES);
    for &tile in shared {
        tune::force_gemm_tile(Some(tile));
        common::check_matmul_layouts(&gpu)?;
        check_direct(&gpu, &tile.to_string())?;
    }
    // The third block shape the generator writes (not a candidate: its kernels compile for
    // seconds on llvmpipe), on the vec4 kernel and the strided one, edges included.
    tune::force_gemm_tile(Some("4x8/8x4".parse().unwrap()));
    for (m, k, n) in [(70, 36, 44), (9, 7, 13)] {
        let a = Tensor::randn([m, k], &Device::Cpu)?;
        let b = Tensor::randn([k, n], &Device::Cpu)?;
        let got = a.to(&gpu)?.matmul(&b.to(&gpu)?)?;
        let want = a.matmul(&b)?;
        let what = format!("4x8/8x4 {m}x{k}x{n}");
        common::assert_close(&what, &common::vals(&got), &common::vals(&want), 1e-4, 1e-4);
    }
    // Past llvmpipe's loop cap K is split into launches (whole steps of K in a shared tile):
    // exact on small integers.
    let ints = |r: usize, c: usize, s: usize| -> Result<Tensor> {
        // -1, 0, 1: every sum of products stays inside f16's range.
        let v: Vec<f32> = (0..r * c).map(|i| ((i * 7 + s) % 3) as f32 - 1.0).collect();
        Tensor::from_vec(v, [r, c], &Device::Cpu)
    };
    let split = [
        (Tile::CANDIDATES[3], 70_001, 5),
        (Tile::CANDIDATES[3], 70_004, 8),
    ];
    // A shared tile runs some 30 to 90 loop iterations per k: K = 5,004 passes the cap in each.
    let shared = Tile::SHARED_CANDIDATES.map(|t| (t, 5_004, 8));
    let half = Tile::SHARED_HALF_CANDIDATES.map(|t| (t, 5_004, 8));
    for (tile, k, n) in split.into_iter().chain(shared).chain(half) {
        tune::force_gemm_tile(Some(tile));
        let (a, b) = (ints(9, k, 1)?, ints(k, n, 2)?);
        let want = a.matmul(&b)?;
        let (ag, bg) = (a.to(&gpu)?, b.to(&gpu)?);
        let got = common::vals(&ag.matmul(&bg)?);
        assert!(
            common::vals(&want) == got,
            "{tile}, K = {k}: the GPU differs from the CPU"
        );
        // In f16 each launch after the first adds to the stored (rounded) partial sum.
        let h = |t: &Tensor| t.to_dtype(DType::F16);
        let got = h(&ag)?.matmul(&h(&bg)?)?.to_dtype(DType::F32)?;
        let what = format!("{tile}, f16, K = {k}");
        common::assert_close(&what, &common::vals(&got), &common::vals(&want), 1e-2, 1.0);
    }
    tune::force_gemm_tile(None);
    Ok(())
}

/// The bucket key of the matmul below, and the product itself against the CPU.
fn tuned_matmul(gpu: &Device) -> Result<String> {
    let a = Tensor::randn([40, 64], &Device::Cpu)?;
    let b = Tensor::randn([64, 48], &Device::Cpu)?;
    let got = a.to(gpu)?.matmul(&b.to(gpu)?)?;
    common::assert_close(
        "tuned matmul",
        &common::vals(&got),
        &common::vals(&a.matmul(&b)?),
        1e-4,
        1e-4,
    );
    // Tuned with subgroup tiles apart from without.
    let tiles = gpu::context(0)?.gemm_tiles(GpuType::F32).to_vec();
    let sg = if tiles.iter().any(|t| t.subgroup) {
        "|s"
    } else {
        ""
    };
    Ok(format!("matmul_nn_f32_vec4|64|64|64|1{sg}"))
}

fn tiles() -> Vec<(String, tune::Tuned)> {
    tune::tuned_gemm_tiles(0)
}

#[test]
fn the_tuner_picks_caches_and_reads_back() -> Result<()> {
    // Before the adapter: the other test sets the environment under this lock.
    let _lock = common::seed_lock();
    let Some(gpu) = cpu_adapter() else {
        return Ok(());
    };
    wgtorch::manual_seed(6);
    let dir = std::env::temp_dir().join(format!("wgtorch-tune-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("WGTORCH_CACHE_DIR", &dir);
    tune::force_gemm_tile(None);

    // With no budget left nothing is tuned (the default tile runs) and nothing is written.
    tune::set_tuning_budget(std::time::Duration::ZERO);
    tune::reset_gemm_tuning();
    tuned_matmul(&gpu)?;
    assert!(tiles().is_empty() && !dir.exists());
    // Room for compiling every candidate on a machine without Mesa's shader cache.
    tune::set_tuning_budget(std::time::Duration::from_secs(120));
    tune::reset_gemm_tuning();

    // The first use of a bucket runs the default and queues nothing; the second queues the
    // candidates for the background compiler and runs the default; the next once they are
    // compiled tunes (as does any use once they are, e.g. by the other test): every candidate
    // timed and agreeing, the fastest chosen.
    let key = tuned_matmul(&gpu)?;
    for _ in 0..2 {
        tune::wait_for_compiles(0)?;
        tuned_matmul(&gpu)?;
    }
    let t = tiles();
    let (_, tuned) = t
        .iter()
        .find(|(k, _)| *k == key)
        .expect("the bucket is tuned");
    let candidates = gpu::context(0)?.gemm_tiles(GpuType::F32).to_vec();
    assert_eq!(tuned.times_us.len(), candidates.len());
    assert!(
        tuned.times_us.iter().all(|(_, us)| us.is_some()),
        "{tuned:?}"
    );
    let best = tuned
        .times_us
        .iter()
        .min_by(|a, b| a.1.unwrap().total_cmp(&b.1.unwrap()))
        .unwrap()
        .0;
    assert_eq!(tuned.tile, best);
    // lavapipe has timestamp queries: the kernels' own times, not the wall clock's.
    if gpu::context(0)?.adapter_name().contains("llvmpipe")
        && std::env::var_os("WGTORCH_NO_TIMESTAMPS").is_none()
    {
        assert!(tuned.timestamps, "{tuned:?}");
    }
    // The strided kernel in each storage, on outputs of odd length (a packed half output ends
    // in half a word of padding): every candidate agrees with the default.
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let a = Tensor::randn([5, 9], &Device::Cpu)?;
        let b = Tensor::randn([9, 7], &Device::Cpu)?;
        let want = a.matmul(&b)?.to_dtype(dt)?.to_dtype(DType::F32)?;
        let (a, b) = (a.to(&gpu)?.to_dtype(dt)?, b.to(&gpu)?.to_dtype(dt)?);
        for call in ["first", "second", "tuning"] {
            let got = a.matmul(&b)?.to_dtype(DType::F32)?;
            common::assert_close(
                &format!("{call} call, {dt}"),
                &common::vals(&got),
                &common::vals(&want),
                8e-2,
                0.3,
            );
            tune::wait_for_compiles(0)?;
        }
    }
    let t = tiles();
    let direct: Vec<_> = t.iter().filter(|(k, _)| k.starts_with("matmul_")).collect();
    assert_eq!(direct.len(), 4, "{t:?}");
    for (k, tuned) in direct {
        assert!(
            tuned.times_us.iter().all(|(_, us)| us.is_some()),
            "{k}: {tuned:?}"
        );
    }

    // The background compiler's path, on a kernel the other test never compiles (packed f16,
    // whose candidates cannot be compiled yet): the first GEMM of the bucket queues nothing, the
    // second queues the candidates and runs the default, the first once they are compiled tunes.
    let ctx = gpu::context(0)?;
    let native = ctx.native_f16();
    ctx.set_native_f16(false);
    let a = Tensor::randn([6, 10], &Device::Cpu)?;
    let b = Tensor::randn([10, 3], &Device::Cpu)?;
    let want = a.matmul(&b)?;
    let h = |t: &Tensor| t.to(&gpu)?.to_dtype(DType::F16);
    let (ah, bh) = (h(&a)?, h(&b)?);
    let before = tiles().len();
    for (call, tuned) in [("first", false), ("second", false), ("third", true)] {
        let got = ah.matmul(&bh)?.to_dtype(DType::F32)?;
        let what = format!("packed f16, {call} call");
        common::assert_close(&what, &common::vals(&got), &common::vals(&want), 2e-2, 5e-2);
        assert_eq!(
            tiles().len(),
            before + usize::from(tuned),
            "{what}: {:?}",
            tiles()
        );
        tune::wait_for_compiles(0)?;
    }
    ctx.set_native_f16(native);

    // On disk: the identity, then one line per bucket.
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one cache file");
    let path = files[0].path();
    let text = std::fs::read_to_string(&path).unwrap();
    let header = text.lines().next().unwrap().to_string();
    assert!(
        header.starts_with("wgtorch ") && header.contains("adapter "),
        "{header}"
    );
    assert!(text.contains(&format!("{key}\t{}\n", tuned.tile)), "{text}");

    // A new process reads it (a non-default tile, so that it shows), skipping lines that do not
    // parse and tiles that are not candidates.
    let pick = Tile::CANDIDATES[3];
    let planted = format!(
        "{header}\n{key}\t{pick}\nnot a line\nmatmul_x|1|1|1|1\t3x3/8x8\nmatmul_y|1|1|1|1\t16x16/16x16\n"
    );
    std::fs::write(&path, planted).unwrap();
    tune::reset_gemm_tuning();
    // The second call compiles the tile read in the background, unless it is compiled already.
    for _ in 0..2 {
        tuned_matmul(&gpu)?;
        tune::wait_for_compiles(0)?;
    }
    let prof = profile(
        ProfileOptions {
            activities: &[ProfilerActivity::Gpu],
            ..Default::default()
        },
        |_| tuned_matmul(&gpu).map(drop),
    )?;
    let t = tiles();
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!((t[0].0.as_str(), t[0].1.tile), (key.as_str(), pick));
    assert!(t[0].1.times_us.is_empty(), "read, not tuned");
    // ... and runs it (when the adapter times kernels).
    let ran: Vec<String> = prof
        .gpu_kernels()
        .iter()
        .map(|k| k.name.to_string())
        .filter(|n| n.starts_with("matmul_"))
        .collect();
    if prof.gpu_time_unavailable().is_empty() {
        let (r, c, x, y) = (pick.rows, pick.cols, pick.wx, pick.wy);
        assert_eq!(ran, [format!("matmul_nn_f32_vec4_{r}x{c}_{x}x{y}")]);
    }

    // A file for another adapter, driver or version is ignored: tuned again, and rewritten.
    std::fs::write(
        &path,
        format!("wgtorch 0.0.0 gemm tiles\tadapter x\n{key}\t{pick}\n"),
    )
    .unwrap();
    tune::reset_gemm_tuning();
    tuned_matmul(&gpu)?;
    assert_eq!(tiles()[0].1.times_us.len(), candidates.len());
    assert!(std::fs::read_to_string(&path).unwrap().starts_with(&header));

    // A bucket timed in part (a process's budget ran out) goes on from there: the candidates
    // timed before keep their times, the rest are timed, and the bucket is tuned; the line of
    // the part is replaced by the tuned one.
    let clock = if tiles()[0].1.timestamps {
        "stamps"
    } else {
        "wall"
    };
    let (last, earlier) = candidates[1..].split_last().unwrap();
    let planted: Vec<String> = earlier
        .iter()
        .map(|t| format!("{t}=1000000000.0"))
        .collect();
    std::fs::write(
        &path,
        format!("{header}\n{key}\tpartial\t{clock}\t{}\n", planted.join(";")),
    )
    .unwrap();
    tune::reset_gemm_tuning();
    for _ in 0..3 {
        tuned_matmul(&gpu)?;
        tune::wait_for_compiles(0)?;
    }
    let t = tiles();
    assert_eq!(t.len(), 1, "{t:?}");
    let times = &t[0].1.times_us;
    assert_eq!(times.len(), candidates.len(), "{times:?}");
    for (tile, us) in times {
        let kept = earlier.contains(tile);
        assert_eq!(*us == Some(1e9), kept, "{tile}: {times:?}");
    }
    assert!([Tile::DEFAULT, *last].contains(&t[0].1.tile), "{times:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("{key}\t{}\n", t[0].1.tile)) && !text.contains("partial"),
        "{text}"
    );

    // No directory: tuned in memory only.
    std::fs::remove_dir_all(&dir).unwrap();
    std::env::set_var("WGTORCH_CACHE_DIR", "none");
    tune::reset_gemm_tuning();
    tuned_matmul(&gpu)?;
    assert_eq!(tiles().len(), 1);
    assert!(!dir.exists());
    std::env::remove_var("WGTORCH_CACHE_DIR");
    tune::set_tuning_budget(tune::BUDGET);
    Ok(())
}
