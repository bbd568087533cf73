//! Fused elementwise programs (`wgtorch::ops::fused`): every unary and arithmetic binary op in a
//! program over a transposed view, a broadcast row and a 0-d tensor equals the ops run one by
//! one, bit for bit on the CPU and within 2e-5 on the GPU; NaN and infinities pass as the ops
//! pass them; one program is one kernel; so are its generated gradients, which equal eager
//! autograd's; what cannot fuse runs the ops; bad programs are errors.

use wgtorch::autograd::gradcheck;
use wgtorch::ops::fused::{FusedInstr, FusedProgram, MAX_FUSED_INPUTS};
use wgtorch::ops::{BinaryOp, UnaryOp};
use wgtorch::profiler::{self, ProfileOptions, ProfilerActivity};
use wgtorch::{DType, Device, Result, Tensor};

/// Bits, NaN of any payload as one value.
fn bits(t: &Tensor) -> Vec<u64> {
    let v = t.to(&Device::Cpu).unwrap().to_dtype(DType::F64).unwrap();
    let v = v.to_vec::<f64>().unwrap();
    v.iter()
        .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
        .collect()
}

/// `[a (a transposed view), b (a row, broadcast), c (0-d)]` on `dev`, from fixed values: a in
/// [0.25, 1.75] (every op's domain), b in [-1, 1], with NaN, ±inf and -0 when `specials`.
fn inputs(dev: &Device, dt: DType, specials: bool) -> Result<[Tensor; 3]> {
    let mut av: Vec<f32> = (0..35)
        .map(|i| 0.25 + (i * 17 % 31) as f32 / 20.0)
        .collect();
    let mut bv: Vec<f32> = (0..7).map(|i| (i as f32 - 3.0) / 3.0).collect();
    if specials {
        (av[3], av[10], av[20]) = (f32::NAN, f32::INFINITY, -0.0);
        (bv[1], bv[5]) = (f32::NEG_INFINITY, f32::NAN);
    }
    let a = Tensor::from_vec(av, [7, 5], dev)?.to_dtype(dt)?.t()?; // [5, 7], strides [1, 5]
    let b = Tensor::from_vec(bv, [7], dev)?.to_dtype(dt)?;
    let c = Tensor::scalar(0.75f32, dev)?.to_dtype(dt)?;
    Ok([a, b, c])
}

/// One program per op: `(u(a) + b) * c` for a unary op, `(a op b) * c` for a binary one.
fn programs() -> Result<Vec<FusedProgram>> {
    let mut out = Vec::new();
    for &op in UnaryOp::ALL {
        let mut p = FusedProgram::new(3)?;
        let u = p.unary(op, 0)?;
        let s = p.binary(BinaryOp::Add, u, 1)?;
        p.binary(BinaryOp::Mul, s, 2)?;
        out.push(p);
    }
    for &op in BinaryOp::ALL.iter().filter(|op| !op.is_comparison()) {
        let mut p = FusedProgram::new(3)?;
        let r = p.binary(op, 0, 1)?;
        p.binary(BinaryOp::Mul, r, 2)?;
        out.push(p);
    }
    Ok(out)
}

#[test]
fn every_op_fused_equals_its_ops() -> Result<()> {
    for specials in [false, true] {
        for dt in [DType::F32, DType::F64] {
            let [a, b, c] = inputs(&Device::Cpu, dt, specials)?;
            for p in programs()? {
                let fused = p.run(&[&a, &b, &c])?;
                let ops = p.eager(&[&a, &b, &c])?;
                assert_eq!((fused.shape(), fused.dtype()), (&[5usize, 7][..], dt));
                assert_eq!(bits(&fused), bits(&ops), "{} {dt} on the CPU", p.name());
            }
        }
    }
    let Some(gpu) = super::common::gpu() else {
        return Ok(());
    };
    for specials in [false, true] {
        let [a, b, c] = inputs(&gpu, DType::F32, specials)?;
        let cpu = inputs(&Device::Cpu, DType::F32, specials)?;
        for p in programs()? {
            let fused = p.run(&[&a, &b, &c])?;
            assert_eq!(fused.device(), gpu);
            let ops = p.eager(&[&a, &b, &c])?;
            let on_cpu = p.run(&[&cpu[0], &cpu[1], &cpu[2]])?;
            let (f, o, h) = (
                fused.to_vec::<f32>()?,
                ops.to_vec::<f32>()?,
                on_cpu.to_vec::<f32>()?,
            );
            for i in 0..f.len() {
                for (other, what) in [(o[i], "the GPU's ops"), (h[i], "the CPU")] {
                    let ok = (f[i].is_nan() && other.is_nan())
                        || f[i] == other
                        || (f[i] - other).abs() <= 2e-5 * (1.0 + other.abs());
                    assert!(
                        ok,
                        "{} element {i}: fused {} vs {what} {other}",
                        p.name(),
                        f[i]
                    );
                }
            }
        }
    }
    Ok(())
}

/// An op reading one register twice (`t - t`, `t / t`) gives IEEE's values where `t` is
/// infinite or zero (NaN), as the ops do: a shader compiler that folded `x - x` to 0 would not.
#[test]
fn an_op_reading_one_register_twice_keeps_ieee_values() -> Result<()> {
    for dev in super::common::devices() {
        let x = Tensor::from_vec(vec![100.0f32, 0.0, f32::NEG_INFINITY, 1.0], [4], &dev)?;
        for op in [BinaryOp::Sub, BinaryOp::Div] {
            let mut p = FusedProgram::new(1)?;
            let t = p.unary(UnaryOp::Exp, 0)?; // inf, 1, 0, e
            let u = p.binary(op, t, t)?;
            p.binary(op, u, 0)?; // and the input twice through two registers' worth of reads
            let mut q = FusedProgram::new(1)?;
            q.binary(op, 0, 0)?;
            let y = Tensor::from_vec(vec![f32::INFINITY, 0.0, -0.0, 2.0], [4], &dev)?;
            for (prog, input) in [(&p, &x), (&q, &y)] {
                let fused = prog.run(&[input])?;
                let ops = prog.eager(&[input])?;
                assert_eq!(bits(&fused), bits(&ops), "{} on {dev}", prog.name());
            }
        }
    }
    Ok(())
}

#[test]
fn zero_size_and_zero_d_programs() -> Result<()> {
    let mut p = FusedProgram::new(2)?;
    let s = p.binary(BinaryOp::Sub, 0, 1)?;
    p.unary(UnaryOp::Exp, s)?;
    for dev in super::common::devices() {
        // A zero-size slice past its storage's end, broadcast against a row.
        let x = Tensor::ones([3, 4], &dev)?.slice(0, 3, 3, 1)?;
        let y = Tensor::ones([4], &dev)?;
        assert_eq!(p.run(&[&x, &y])?.shape(), &[0, 4]);
        // Two 0-d tensors give a 0-d tensor.
        let (u, v) = (Tensor::scalar(2.0f32, &dev)?, Tensor::scalar(1.0f32, &dev)?);
        let z = p.run(&[&u, &v])?;
        assert_eq!(z.shape(), &[] as &[usize]);
        assert!((z.item()? - std::f64::consts::E).abs() < 1e-6, "{dev}");
    }
    Ok(())
}

/// Views the CPU kernel reads in place (a contiguous view at an offset, rows of a column
/// slice, a broadcast row, over blocks that start inside a row and blocks that cross rows) give
/// the values the ops give, element by element, on every device.
#[test]
fn views_read_in_place_over_many_blocks() -> Result<()> {
    let mut p = FusedProgram::new(3)?;
    let s = p.binary(BinaryOp::Add, 0, 1)?;
    let m = p.binary(BinaryOp::Mul, s, 2)?;
    p.binary(BinaryOp::Sub, m, 0)?;
    let (rows, cols) = (3usize, 680usize);
    // Multiples of 1/16 in [-3, 3]: every result is exact, so any device (FMA or not) gives
    // these bits.
    let vals = |n: usize, k: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * k) % 97) as f32 / 16.0 - 3.0).collect()
    };
    for dev in super::common::devices() {
        // Columns 10..690 of [3, 700]: rows of stride 700, each contiguous, at offset 10.
        let x = Tensor::from_vec(vals(rows * 700, 7), [rows, 700], &dev)?.slice(1, 10, 690, 1)?;
        // Elements 1..681 of a vector: a row at offset 1, broadcast over the rows.
        let b = Tensor::from_vec(vals(700, 11), [700], &dev)?.slice(0, 1, 681, 1)?;
        // Rows 1..4 of [4, 680]: contiguous at offset 680.
        let y = Tensor::from_vec(vals(4 * cols, 5), [4, cols], &dev)?.slice(0, 1, 4, 1)?;
        let fused = p.run(&[&x, &b, &y])?.to_vec::<f32>()?;
        assert_eq!(
            bits(&p.eager(&[&x, &b, &y])?),
            bits(&Tensor::from_vec(
                fused.clone(),
                [rows, cols],
                &Device::Cpu
            )?),
            "{dev}"
        );
        let (xv, bv, yv) = (x.to_vec::<f32>()?, b.to_vec::<f32>()?, y.to_vec::<f32>()?);
        for (i, &f) in fused.iter().enumerate() {
            let want = (xv[i] + bv[i % cols]) * yv[i] - xv[i];
            assert_eq!(f, want, "{dev} element {i}");
        }
    }
    Ok(())
}

#[test]
fn one_program_is_one_kernel() -> Result<()> {
    let Some(gpu) = super::common::gpu() else {
        return Ok(());
    };
    let mut p = FusedProgram::new(2)?;
    let s = p.binary(BinaryOp::Add, 0, 1)?;
    let r = p.unary(UnaryOp::Relu, s)?;
    p.unary(UnaryOp::MulScalar(3.0), r)?;
    let a = Tensor::randn([64, 33], &gpu)?;
    let b = Tensor::randn([33], &gpu)?;
    let opts = ProfileOptions {
        activities: &[ProfilerActivity::Cpu, ProfilerActivity::Gpu],
        ..Default::default()
    };
    let prof = profiler::profile(opts, |_| {
        let _scope = profiler::record_function("one_program");
        p.run(&[&a, &b])?.to_vec::<f32>()?;
        Ok(())
    })?;
    // Other tests of this binary run ops meanwhile: only the events under this test's scope.
    let ev = prof.events();
    let scope = (0..ev.len())
        .find(|&i| ev[i].name == "one_program")
        .unwrap();
    let ops: Vec<usize> = (0..ev.len())
        .filter(|&i| ev[i].parent == Some(scope))
        .collect();
    let names: Vec<&str> = ops.iter().map(|&i| ev[i].name.as_str()).collect();
    let fused: Vec<usize> = ops.into_iter().filter(|&i| ev[i].name == "fused").collect();
    assert_eq!(fused.len(), 1, "one fused op: {names:?}");
    assert!(
        !names.iter().any(|n| ["add", "relu", "mul"].contains(n)),
        "{names:?}"
    );
    let timed = prof.gpu_time_unavailable().is_empty();
    if timed {
        let kernels: Vec<_> = prof
            .gpu_kernels()
            .iter()
            .filter(|k| k.op == Some(fused[0]))
            .collect();
        assert_eq!(kernels.len(), 1, "{kernels:?}");
        assert_eq!(kernels[0].name, p.key());
    }
    Ok(())
}

#[test]
fn what_cannot_fuse_runs_the_ops() -> Result<()> {
    let mut p = FusedProgram::new(2)?;
    let m = p.binary(BinaryOp::Mul, 0, 1)?;
    p.unary(UnaryOp::Tanh, m)?;
    let dev = Device::Cpu;
    // A gradient (generated, see below) reaches both inputs.
    let a = Tensor::randn([4, 3], &dev)?.requires_grad_(true);
    let b = Tensor::randn([3], &dev)?;
    let y = p.run(&[&a, &b])?;
    y.sum_all()?.backward()?;
    let want = b
        .mul(&a.mul(&b)?.tanh()?.square()?.neg()?.add_scalar(1.0)?)?
        .detach();
    assert_eq!(bits(&a.grad().unwrap()), bits(&want));
    // Mixed dtypes and integers: the ops' promotion.
    let i = Tensor::from_vec(vec![1i32, 2, 3], [3], &dev)?;
    let h = Tensor::from_vec(vec![0.5f32, 0.25, 2.0], [3], &dev)?.to_dtype(DType::F16)?;
    let y = p.run(&[&i, &h])?;
    assert_eq!(y.dtype(), DType::F16);
    assert_eq!(bits(&y), bits(&p.eager(&[&i, &h])?));
    // Mixed devices: the ops' error.
    if let Some(gpu) = super::common::gpu() {
        let e = p.run(&[&a.detach(), &b.to(&gpu)?]).unwrap_err().to_string();
        assert!(e.contains("device"), "{e}");
    }
    Ok(())
}

#[test]
fn bad_programs_are_errors() -> Result<()> {
    fn e<T>(r: Result<T>) -> String {
        r.err().expect("an error").to_string()
    }
    assert!(e(FusedProgram::new(0)).contains("1 to 6 inputs, got 0"));
    assert!(e(FusedProgram::new(MAX_FUSED_INPUTS + 1)).contains("got 7"));
    let mut p = FusedProgram::new(2)?;
    assert!(e(p.unary(UnaryOp::Exp, 2)).contains("reads register 2"));
    assert!(e(p.binary(BinaryOp::Lt, 0, 1)).contains("lt gives bool"));
    let x = Tensor::ones([2], &Device::Cpu)?;
    assert!(e(p.run(&[&x, &x])).contains("no instructions"));
    p.unary(UnaryOp::Exp, 0)?;
    assert!(e(p.run(&[&x])).contains("reads 2 inputs, got 1"));
    assert!(e(p.run(&[&x, &x])).contains("input 1 does not reach the result"));
    // Input 1 read, but by an instruction the result does not use: the ops' result would have
    // input 0's shape, a kernel over both inputs input 1's.
    let mut dead = FusedProgram::new(2)?;
    dead.unary(UnaryOp::Neg, 1)?;
    dead.unary(UnaryOp::Relu, 0)?;
    let (a, b) = (
        Tensor::ones([3], &Device::Cpu)?,
        Tensor::ones([2, 3], &Device::Cpu)?,
    );
    assert!(e(dead.run(&[&a, &b])).contains("input 1 does not reach the result"));
    assert!(e(dead.eager(&[&a, &b])).contains("input 1 does not reach the result"));
    let y = Tensor::ones([3], &Device::Cpu)?;
    p.binary(BinaryOp::Add, 2, 1)?;
    let err = e(p.run(&[&x, &y]));
    assert!(err.contains("must match the size"), "{err}");
    Ok(())
}

/// Whether a program's gradient is generated (every rule on the way to an input that needs a
/// gradient is elementwise arithmetic) rather than its ops run under eager autograd. In
/// `programs()` every instruction is on input 0's way; input 1 is a binary op's right operand.
fn gradient_fuses(p: &FusedProgram, right_needs_grad: bool) -> bool {
    use BinaryOp::*;
    use UnaryOp::*;
    p.instrs().iter().all(|i| match *i {
        FusedInstr::Unary { op, .. } => !matches!(
            op,
            Elu(_)
                | LeakyRelu(_)
                | Softplus(..)
                | Clamp(..)
                | Step
                | Sign
                | Floor
                | Ceil
                | Round
                | Trunc
                | PowScalar(0.0)
        ),
        FusedInstr::Binary { op, .. } => {
            matches!(op, Add | Sub | Mul | Div) || (op == Pow && !right_needs_grad)
        }
    })
}

/// Gradients of `sum(program(a, b, c) * w)` for leaves made from `base` (those marked in
/// `needs` require grad), the program run fused or as its ops; and the output's grad_fn.
fn grads_of(
    p: &FusedProgram,
    base: &[Tensor; 3],
    needs: [bool; 3],
    w: &Tensor,
    fused: bool,
) -> Result<(Vec<Tensor>, String)> {
    let leaves: Vec<Tensor> = base
        .iter()
        .zip(needs)
        .map(|(t, n)| t.detach().requires_grad_(n))
        .collect();
    let refs: Vec<&Tensor> = leaves.iter().collect();
    let y = if fused {
        p.run(&refs)?
    } else {
        p.eager(&refs)?
    };
    let node = y
        .grad_fn()
        .map(|n| n.name().to_string())
        .unwrap_or_default();
    y.mul(w)?.sum_all()?.backward()?;
    let grads = leaves
        .iter()
        .zip(needs)
        .filter(|(_, n)| *n)
        .map(|(l, _)| l.grad().expect("a gradient"))
        .collect();
    Ok((grads, node))
}

/// Every op's program trains fused: forward one kernel, backward one generated kernel per input
/// (then the sum over broadcast dimensions), with eager autograd's gradients, bit for bit on the
/// CPU (the same rules in the same order) and within 1e-4 on the GPU. Programs with a rule that
/// is not arithmetic (a select, a zero gradient) run their ops, so they match by construction.
/// With only input 0 needing a gradient, the other operands' rules are not run (a power with a
/// constant exponent fuses).
#[test]
fn program_gradients_equal_eager_autograd() -> Result<()> {
    for dev in super::common::devices() {
        let dtypes: &[DType] = if dev.is_gpu() {
            &[DType::F32]
        } else {
            &[DType::F32, DType::F64]
        };
        for &dt in dtypes {
            let base = inputs(&dev, dt, false)?;
            let wv: Vec<f32> = (0..35).map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0).collect();
            let w = Tensor::from_vec(wv, [5, 7], &dev)?.to_dtype(dt)?;
            for (p, needs) in programs()?
                .into_iter()
                .flat_map(|p| [(p.clone(), [true; 3]), (p, [true, false, false])])
            {
                let (fused, node) = grads_of(&p, &base, needs, &w, true)?;
                let (eager, _) = grads_of(&p, &base, needs, &w, false)?;
                let expected = gradient_fuses(&p, needs[1]);
                assert_eq!(node == "fused", expected, "{} {needs:?} {node}", p.name());
                for (k, (f, e)) in fused.iter().zip(&eager).enumerate() {
                    let what = format!("{} input {k} {dt} on {dev}", p.name());
                    assert_eq!(f.shape(), e.shape(), "{what}");
                    if !dev.is_gpu() {
                        assert_eq!(bits(f), bits(e), "{what}");
                        continue;
                    }
                    let (f, e) = (f.to_vec::<f32>()?, e.to_vec::<f32>()?);
                    for (x, y) in f.iter().zip(&e) {
                        let ok = (x.is_nan() && y.is_nan())
                            || x == y
                            || (x - y).abs() <= 1e-4 * (1.0 + y.abs());
                        assert!(ok, "{what}: fused {x} vs ops {y}");
                    }
                }
            }
        }
    }
    Ok(())
}

/// A register read three times and an input broadcast inside the program: f64 gradcheck passes,
/// eager's gradients agree (to rounding: the contributions are summed in another order), and the
/// second derivative (`create_graph`) is eager's too.
#[test]
fn program_gradients_pass_gradcheck() -> Result<()> {
    let mut p = FusedProgram::new(2)?;
    let sq = p.binary(BinaryOp::Mul, 0, 0)?; // x * x, x a row broadcast over y's rows
    let s = p.binary(BinaryOp::Add, sq, 1)?;
    let t = p.unary(UnaryOp::GeluTanh, s)?;
    let u = p.binary(BinaryOp::Div, t, 0)?; // x's third read
    let v = p.unary(UnaryOp::Silu, u)?;
    p.unary(UnaryOp::Rsqrt, v)?;
    let dev = Device::Cpu;
    let x = Tensor::from_vec(vec![0.7f64, 1.3, 0.9], [3], &dev)?;
    let y = Tensor::from_vec(vec![0.5f64, -0.25, 1.5, 2.0, 0.1, -0.3], [2, 3], &dev)?;
    gradcheck(
        |xs| p.run(&[&xs[0], &xs[1]]),
        &[x.clone(), y.clone()],
        1e-6,
        1e-5,
        1e-4,
    )?;
    let w = Tensor::ones([2, 3], &dev)?.to_dtype(DType::F64)?;
    let pad = Tensor::scalar(1.0f64, &dev)?;
    let mut with_pad = FusedProgram::new(3)?;
    for i in p.instrs() {
        match *i {
            FusedInstr::Unary { op, x } => with_pad.unary(op, x + usize::from(x >= 2))?,
            FusedInstr::Binary { op, a, b } => {
                with_pad.binary(op, a + usize::from(a >= 2), b + usize::from(b >= 2))?
            }
        };
    }
    let last = with_pad.instrs().len() + 2;
    with_pad.binary(BinaryOp::Mul, last, 2)?; // * 1, so the program reads three inputs
    let base = [x.clone(), y.clone(), pad];
    let (fused, node) = grads_of(&with_pad, &base, [true; 3], &w, true)?;
    let (eager, _) = grads_of(&with_pad, &base, [true; 3], &w, false)?;
    assert_eq!(node, "fused");
    for (f, e) in fused.iter().zip(&eager) {
        let (f, e) = (f.to_vec::<f64>()?, e.to_vec::<f64>()?);
        for (a, b) in f.iter().zip(&e) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{f:?} vs {e:?}");
        }
    }
    // d/dx of sum(dy/dx), through the generated gradient's own graph.
    let (f, e) = (second(&p, &x, &y, true)?, second(&p, &x, &y, false)?);
    for (a, b) in f.iter().zip(&e) {
        assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{f:?} vs {e:?}");
    }
    Ok(())
}

/// `d/dx sum(d/dx sum(p(x, y)))` (f64), the program run fused or as its ops: the second
/// derivative through the first's own graph (`create_graph`).
fn second(p: &FusedProgram, x: &Tensor, y: &Tensor, fused: bool) -> Result<Vec<f64>> {
    let xl = x.detach().requires_grad_(true);
    let out = if fused {
        p.run(&[&xl, y])?
    } else {
        p.eager(&[&xl, y])?
    };
    out.sum_all()?.backward_with(None, false, true)?;
    let g = xl.grad().expect("a gradient");
    xl.set_grad(None);
    g.sum_all()?.backward()?;
    xl.grad().expect("a second gradient").to_vec::<f64>()
}

/// Forward and backward of a two-input program on the GPU: one fused kernel forward, one per
/// input backward (the row's gradient then summed over the rows), no per-op kernels.
#[test]
fn program_gradients_are_one_kernel_per_input() -> Result<()> {
    let Some(gpu) = super::common::gpu() else {
        return Ok(());
    };
    let mut p = FusedProgram::new(2)?;
    let s = p.binary(BinaryOp::Mul, 0, 1)?;
    let t = p.unary(UnaryOp::Tanh, s)?;
    p.unary(UnaryOp::MulScalar(3.0), t)?;
    let a = Tensor::randn([64, 33], &gpu)?.requires_grad_(true);
    let b = Tensor::randn([33], &gpu)?.requires_grad_(true);
    let opts = ProfileOptions {
        activities: &[ProfilerActivity::Cpu],
        ..Default::default()
    };
    let prof = profiler::profile(opts, |_| {
        let _scope = profiler::record_function("fused_step");
        p.run(&[&a, &b])?.sum_all()?.backward()?;
        b.grad().expect("a gradient").to_vec::<f32>()?;
        Ok(())
    })?;
    let names = super::common::events_under(&prof, "fused_step");
    let count = |n: &str| names.iter().filter(|m| *m == n).count();
    assert_eq!(count("fused"), 3, "forward + one per input: {names:?}");
    assert!(
        !names
            .iter()
            .any(|n| ["mul", "tanh", "tanh_backward", "mul_scalar"].contains(&n.as_str())),
        "{names:?}"
    );
    Ok(())
}

/// A power whose exponent needs no gradient (a constant) differentiates its base by arithmetic:
/// the gradient is generated, with eager's values (bits on the CPU); when the exponent needs one
/// too, the ops run (the exponent's rule selects where the base is 0).
#[test]
fn a_constant_exponent_keeps_the_gradient_fused() -> Result<()> {
    let mut p = FusedProgram::new(2)?;
    let t = p.binary(BinaryOp::Pow, 0, 1)?;
    p.unary(UnaryOp::Tanh, t)?;
    for dev in super::common::devices() {
        let x = Tensor::from_vec(vec![0.5f32, 1.5, 2.0, 0.25, 0.0, 1.1], [2, 3], &dev)?;
        let e = Tensor::scalar(3.0f32, &dev)?;
        let run = |fused: bool, exponent_grad: bool| -> Result<(Tensor, Option<Tensor>, String)> {
            let xl = x.detach().requires_grad_(true);
            let el = e.detach().requires_grad_(exponent_grad);
            let y = if fused {
                p.run(&[&xl, &el])?
            } else {
                p.eager(&[&xl, &el])?
            };
            let node = y
                .grad_fn()
                .map(|n| n.name().to_string())
                .unwrap_or_default();
            y.sum_all()?.backward()?;
            Ok((xl.grad().expect("a gradient"), el.grad(), node))
        };
        let (fused, _, node) = run(true, false)?;
        assert_eq!(node, "fused", "{dev}");
        let (eager, _, _) = run(false, false)?;
        if dev.is_gpu() {
            let (f, e) = (fused.to_vec::<f32>()?, eager.to_vec::<f32>()?);
            for (a, b) in f.iter().zip(&e) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{f:?} vs {e:?}");
            }
        } else {
            assert_eq!(bits(&fused), bits(&eager));
        }
        let (_, exponent, node) = run(true, true)?;
        assert_eq!(node, "tanh", "{dev}");
        assert!(exponent.is_some());
    }
    Ok(())
}

/// A program whose last op's rule reads its value (`exp`, `sqrt`, `rsqrt`, `tanh`, `sigmoid`)
/// saves its output for the backward pass, as eager does, instead of recomputing the chain: the
/// gradients are eager's (bit for bit on the CPU), the second derivative too (the output is
/// recomputed, differentiably, under `create_graph`), and an in-place change of the output
/// before `backward()` is eager's error (the saved value is checked, as eager's is).
#[test]
fn a_saved_output_gives_eager_gradients_and_errors() -> Result<()> {
    use UnaryOp::*;
    for dev in super::common::devices() {
        let [a, b, c] = inputs(&dev, DType::F32, false)?;
        for op in [Exp, Sqrt, Rsqrt, Tanh, Sigmoid] {
            // op(a * b + c): three inputs, the chain recomputed without the saved output.
            let mut p = FusedProgram::new(3)?;
            let m = p.binary(BinaryOp::Mul, 0, 1)?;
            let s = p.binary(BinaryOp::Add, m, 2)?;
            p.unary(op, s)?;
            let w = Tensor::randn([5, 7], &dev)?;
            let base = [a.clone(), b.clone(), c.clone()];
            let (fused, node) = grads_of(&p, &base, [true; 3], &w, true)?;
            let (eager, _) = grads_of(&p, &base, [true; 3], &w, false)?;
            assert_eq!(node, "fused", "{op:?}");
            for (k, (f, e)) in fused.iter().zip(&eager).enumerate() {
                let what = format!("{op:?} input {k} on {dev}");
                if !dev.is_gpu() {
                    assert!(bits(f) == bits(e), "{what}: fused and eager differ");
                    continue;
                }
                let (f, e) = (f.to_vec::<f32>()?, e.to_vec::<f32>()?);
                for (x, y) in f.iter().zip(&e) {
                    let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 * (1.0 + y.abs());
                    assert!(ok, "{what}: {x} vs {y}");
                }
            }
            // Written in place after the forward pass: eager's error, not a gradient.
            let leaves: Vec<Tensor> = base
                .iter()
                .map(|t| t.detach().requires_grad_(true))
                .collect();
            let y = p.run(&leaves.iter().collect::<Vec<_>>())?;
            let alias = y.detach();
            alias.fill_(1.0)?;
            let err = y.sum_all()?.backward().unwrap_err().to_string();
            assert!(
                err.contains("modified by an inplace operation"),
                "{op:?}: {err}"
            );
        }
    }
    // The second derivative through the saved output, against eager's (f64, CPU).
    let dev = Device::Cpu;
    let mut p = FusedProgram::new(2)?;
    let m = p.binary(BinaryOp::Mul, 0, 1)?;
    p.unary(UnaryOp::Tanh, m)?;
    let x = Tensor::from_vec(vec![0.3f64, -1.2, 0.8], [3], &dev)?;
    let k = Tensor::from_vec(vec![1.5f64, 0.5, -2.0], [3], &dev)?;
    let (f, e) = (second(&p, &x, &k, true)?, second(&p, &x, &k, false)?);
    for (a, b) in f.iter().zip(&e) {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{f:?} vs {e:?}");
    }
    Ok(())
}
