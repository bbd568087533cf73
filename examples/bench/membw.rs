//! Memory-bound ops next to what the machine's memory system delivers: a STREAM-style triad
//! (`c = a + s·b`, two streams read and one written) and a read-only sum, both plain loops over
//! rayon's threads (one contiguous part each) on the same 2^22 f32 (16 MiB per array, as the ops below), compiled for the
//! CPU's widest vector set. An elementwise op is counted as bytes read and written and set
//! against the triad; a row reduction reads only, and is set against the read stream. On a GPU:
//! elementwise add, and long-row sums with subgroup operations and without.

use super::{median, time};
use rayon::prelude::*;
use std::time::Instant;
use wgtorch::backend::cpu::vmath::vectorized;
use wgtorch::{Device, Result, Tensor};

/// Elements per array (as `add f32` in the table above).
const N: usize = 1 << 22;
/// Row length of the reduction cases (`[N / ROW, ROW]`).
const ROW: usize = 1024;

/// The machine's triad and read bandwidths in GB/s (medians of `reps` runs).
fn stream(reps: usize) -> (f64, f64) {
    let a = vec![1.0f32; N];
    let b = vec![2.0f32; N];
    let mut c = vec![0.0f32; N];
    let s = std::hint::black_box(1.5f32);
    // One contiguous part per thread, as OpenMP's static schedule splits a loop.
    let chunk = N.div_ceil(rayon::current_num_threads());
    let mut triad = Vec::new();
    for _ in 0..=reps {
        let t0 = Instant::now();
        c.par_chunks_mut(chunk)
            .zip(a.par_chunks(chunk).zip(b.par_chunks(chunk)))
            .for_each(|(c, (a, b))| {
                // `move`: `s` by value, so the loop need not reload it after each store.
                vectorized(
                    #[inline(always)]
                    move || {
                        for ((c, &a), &b) in c.iter_mut().zip(a).zip(b) {
                            *c = a + s * b;
                        }
                    },
                )
            });
        triad.push(12.0 * N as f64 / t0.elapsed().as_secs_f64() / 1e9);
        std::hint::black_box(&c);
    }
    let mut read = Vec::new();
    for _ in 0..=reps {
        let t0 = Instant::now();
        let sum: f32 = c
            .par_chunks(chunk)
            .map(|c| {
                vectorized(
                    #[inline(always)]
                    || {
                        let mut acc = [0f32; 64];
                        for x in c.chunks_exact(64) {
                            acc = std::array::from_fn(|i| acc[i] + x[i]);
                        }
                        acc.iter().sum::<f32>()
                    },
                )
            })
            .sum();
        read.push(4.0 * N as f64 / t0.elapsed().as_secs_f64() / 1e9);
        std::hint::black_box(sum);
    }
    // The first run of each pays the page faults and the threads' wake-up.
    (median(triad[1..].to_vec()), median(read[1..].to_vec()))
}

/// Time the memory-bound ops on the CPU and print one row each, with its share of the bandwidth
/// that bounds it; the figures go into `rec`.
pub fn cpu_rows(
    name: &str,
    reps: usize,
    rec: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let dev = Device::Cpu;
    let (triad, read) = stream(reps);
    println!("| {name} | memory: triad a + s·b (plain loop) | 2^22 | - | {triad:.1} GB/s |");
    println!("| {name} | memory: read-only sum (plain loop) | 2^22 | - | {read:.1} GB/s |");
    rec.insert("triad_gbs".into(), triad.into());
    rec.insert("read_gbs".into(), read.into());
    let a = Tensor::randn([N], &dev)?;
    let b = Tensor::randn([N], &dev)?;
    let m = a.reshape([N / ROW, ROW])?;
    type Op<'a> = &'a dyn Fn() -> Result<Tensor>;
    let cases: [(&str, &str, f64, bool, Op); 5] = [
        ("add_gbs", "add f32 (a + b)", 12.0, false, &|| a.add(&b)),
        (
            "mul_scalar_gbs",
            "mul_scalar f32 (a * 1.5)",
            8.0,
            false,
            &|| a.mul_scalar(1.5),
        ),
        ("relu_gbs", "relu f32", 8.0, false, &|| a.relu()),
        (
            "sum_rows_gbs",
            "sum f32 over rows [4096, 1024]",
            4.0,
            true,
            &|| m.sum_dims([1usize], false),
        ),
        (
            "amax_rows_gbs",
            "amax f32 over rows [4096, 1024]",
            4.0,
            true,
            &|| m.amax([1usize], false),
        ),
    ];
    for (key, label, bytes, reads_only, op) in cases {
        let t = time(&dev, reps, || op().map(|_| ()))?;
        let gbs = bytes * N as f64 / t / 1e9;
        let (bound, of) = if reads_only {
            (read, "read")
        } else {
            (triad, "triad")
        };
        println!(
            "| {name} | {label} | 2^22 | {:.2} | {gbs:.1} GB/s ({:.2} of {of}) |",
            t * 1e3,
            gbs / bound
        );
        rec.insert(key.into(), gbs.into());
    }
    Ok(())
}

/// The memory-bound rows on GPU `ordinal`: elementwise add, and sums over long rows with
/// subgroup operations and without (where the device has them); the figures go into `rec`.
pub fn gpu_rows(
    name: &str,
    ordinal: usize,
    rec: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let dev = &Device::Gpu(ordinal);
    let n = 1 << 22;
    let a = Tensor::randn([n], dev)?;
    let b = Tensor::randn([n], dev)?;
    let t = time(dev, 7, || a.add(&b).map(|_| ()))?;
    let gbs = 3.0 * 4.0 * n as f64 / t / 1e9;
    rec.insert("add_gbs".into(), gbs.into());
    println!(
        "| {name} | add f32 | 2^22 | {:.2} | {gbs:.1} GB/s |",
        t * 1e3
    );
    // Long rows, a workgroup each: subgroup shuffles against the workgroup-memory tree.
    let ctx = wgtorch::backend::gpu::context(ordinal)?;
    let had = ctx.subgroups();
    let m = a.reshape([64, n / 64])?;
    for on in [true, false] {
        if ctx.set_subgroups(on) != on {
            continue;
        }
        let how = if on { "subgroups" } else { "workgroup memory" };
        let t = time(dev, 7, || m.sum_dims([1usize], false).map(|_| ()))?;
        let gbs = 4.0 * n as f64 / t / 1e9;
        rec.insert(
            format!(
                "sum_rows_{}_gbs",
                if on { "subgroups" } else { "workgroup" }
            ),
            gbs.into(),
        );
        println!(
            "| {name} | sum f32 over rows [64, 65536] ({how}) | 2^22 | {:.2} | {gbs:.1} GB/s |",
            t * 1e3
        );
    }
    ctx.set_subgroups(had);
    Ok(())
}
