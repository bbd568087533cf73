//! Random sampling: multinomial, randint, randperm, bernoulli. Everything is drawn on the host
//! from the default generator ([`crate::manual_seed`]) and then placed on the device, so a seed
//! gives the same samples on every device (not PyTorch's bit streams, which are per-backend).

use crate::rng::{with_default_generator, Generator};
use crate::{DType, Device, Error, Result, Tensor};

/// Uniform in [0, 1) with 24 random bits, exactly representable in f32 (never rounds to 1), so
/// `u < p` is never true for `p = 0` and always true for `p = 1`.
fn uniform24(g: &mut Generator) -> f32 {
    (g.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// The largest value an index result can hold.
fn index_max() -> i64 {
    match DType::INDEX {
        DType::I32 => i32::MAX as i64,
        _ => i64::MAX,
    }
}

/// Whether integers in `[low, high)` are all representable in `dtype`, as PyTorch's
/// `random_` checks them ("from is out of bounds for ...").
fn check_int_range(op: &'static str, low: i64, high: i64, dtype: DType) -> Result<()> {
    if low >= high {
        return Err(Error::arg(
            op,
            format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"),
        ));
    }
    let (min, max) = match dtype {
        DType::Bool => (0, 1),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        DType::F16 => (-(1 << 11), 1 << 11),
        DType::BF16 => (-(1 << 8), 1 << 8),
        DType::F32 => (-(1 << 24), 1 << 24),
        DType::F64 => (-(1 << 53), 1 << 53),
    };
    if low < min || high - 1 > max {
        return Err(Error::arg(
            op,
            format!("[{low}, {high}) is out of bounds for {dtype} (integers in [{min}, {max}] are exact)"),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `num_samples` category indices per row of the non-negative weights `self` (1-D, or 2-D
    /// with one distribution per row), as PyTorch's `torch.multinomial`: with `replacement` each
    /// draw is independent; without it a category is drawn at most once (weighted draws without
    /// replacement; once the positive weights are used up, the remaining zero-weight categories
    /// are drawn uniformly, as PyTorch does). A zero-weight category is never drawn with
    /// replacement. The result has dtype [`DType::INDEX`] (int64) and shape `[num_samples]` or
    /// `[rows, num_samples]`. Reads the weights back to the host.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// wgtorch::manual_seed(0);
    /// let w = Tensor::from_vec(vec![0f32, 1., 3.], [3], &Device::Cpu)?;
    /// let s = w.multinomial(5, true)?.to_vec::<i64>()?;
    /// assert!(s.iter().all(|&i| i == 1 || i == 2));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        const OP: &str = "multinomial";
        if self.ndim() != 1 && self.ndim() != 2 {
            return Err(Error::shape(
                OP,
                format!(
                    "prob_dist must be 1 or 2 dim (got shape {:?})",
                    self.shape()
                ),
            ));
        }
        if !self.dtype().is_float() {
            return Err(Error::arg(
                OP,
                format!(
                    "multinomial only supports floating-point dtypes for input, got: {}",
                    self.dtype()
                ),
            ));
        }
        if num_samples == 0 {
            return Err(Error::arg(OP, "cannot sample n_sample <= 0 samples"));
        }
        let k = self.shape()[self.ndim() - 1];
        if !replacement && num_samples > k {
            return Err(Error::arg(OP, format!("cannot sample n_sample > prob_dist.size(-1) samples without replacement ({num_samples} > {k})")));
        }
        if k as i128 > index_max() as i128 + 1 {
            return Err(Error::arg(
                OP,
                format!(
                    "number of categories cannot exceed {} (got {k})",
                    index_max() as i128 + 1
                ),
            ));
        }
        let rows = if self.ndim() == 2 { self.shape()[0] } else { 1 };
        let mut shape = self.shape().to_vec();
        shape[self.ndim() - 1] = num_samples;
        let total = crate::shape::checked_numel(OP, &shape)?;
        crate::backend::gpu::check_alloc(&self.device(), OP, total, DType::INDEX)?;
        let w = self.to_f64_vec()?;
        for r in 0..rows {
            let row = &w[r * k..(r + 1) * k];
            if row.iter().any(|&p| !p.is_finite() || p < 0.0) {
                return Err(Error::arg(
                    OP,
                    "probability tensor contains either `inf`, `nan` or element < 0",
                ));
            }
            if row.iter().sum::<f64>() <= 0.0 {
                return Err(Error::arg(
                    OP,
                    "invalid multinomial distribution (sum of probabilities <= 0)",
                ));
            }
        }
        let mut out: Vec<f64> = crate::backend::cpu::try_vec(OP, total)?;
        with_default_generator(|g| {
            for r in 0..rows {
                let row = &w[r * k..(r + 1) * k];
                if replacement {
                    sample_with_replacement(g, row, num_samples, &mut out);
                } else {
                    sample_without_replacement(g, row, num_samples, &mut out);
                }
            }
        });
        Tensor::from_f64(&out, shape, DType::INDEX, &self.device())
    }

    /// Integers uniform in `[low, high)` of `shape`, dtype [`DType::INDEX`] (int64) (torch.randint).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let t = Tensor::randint(-2, 3, [4, 5], &Device::Cpu)?;
    /// assert!(t.to_vec::<i64>()?.iter().all(|&v| (-2..3).contains(&v)));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn randint(
        low: i64,
        high: i64,
        shape: impl crate::IntoShape,
        device: &Device,
    ) -> Result<Tensor> {
        Tensor::randint_dtype(low, high, &shape.to_sizes("randint")?, DType::INDEX, device)
    }

    /// Integers uniform in `[low, high)` with `self`'s shape, dtype and device
    /// (torch.randint_like).
    pub fn randint_like(&self, low: i64, high: i64) -> Result<Tensor> {
        Tensor::randint_dtype(low, high, self.shape(), self.dtype(), &self.device())
    }

    fn randint_dtype(
        low: i64,
        high: i64,
        shape: &[usize],
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        const OP: &str = "randint";
        check_int_range(OP, low, high, dtype)?;
        let n = crate::shape::checked_numel(OP, shape)?;
        crate::backend::gpu::check_alloc(device, OP, n, dtype)?;
        let span = (high as i128 - low as i128) as u64;
        let mut v: Vec<i64> = crate::backend::cpu::try_vec(OP, n)?;
        // low + a draw below the span, in i128 so that the full int64 range does not overflow.
        with_default_generator(|g| {
            v.extend((0..n).map(|_| (low as i128 + g.below(span) as i128) as i64))
        });
        let t = Tensor::from_vec(v, shape, device)?;
        if dtype == DType::I64 {
            Ok(t)
        } else {
            t.to_dtype(dtype)
        }
    }

    /// A random permutation of `0..n`, dtype [`DType::INDEX`] (int64) (torch.randperm).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let mut p = Tensor::randperm(5, &Device::Cpu)?.to_vec::<i64>()?;
    /// p.sort();
    /// assert_eq!(p, [0, 1, 2, 3, 4]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn randperm(n: usize, device: &Device) -> Result<Tensor> {
        const OP: &str = "randperm";
        if n as u128 > index_max() as u128 + 1 {
            return Err(Error::arg(
                OP,
                format!("n = {n} is past the index dtype {}", DType::INDEX),
            ));
        }
        crate::backend::gpu::check_alloc(device, OP, n, DType::INDEX)?;
        let mut v: Vec<f64> = crate::backend::cpu::try_vec(OP, n)?;
        v.extend((0..n).map(|i| i as f64));
        with_default_generator(|g| {
            for i in (1..n).rev() {
                let j = g.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
        });
        Tensor::from_f64(&v, [n], DType::INDEX, device)
    }

    /// 1 with probability `self[i]`, else 0, elementwise (torch.bernoulli; `self` holds the
    /// probabilities, floating point, in [0, 1]). Same dtype as `self`. The uniforms are drawn
    /// on the host and compared on the device; the range checks read two numbers back.
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let p = Tensor::from_vec(vec![0f32, 1.], [2], &Device::Cpu)?;
    /// assert_eq!(p.bernoulli()?.to_vec::<f32>()?, [0., 1.]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn bernoulli(&self) -> Result<Tensor> {
        const OP: &str = "bernoulli";
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: OP,
                dtype: self.dtype(),
                hint: " (the probabilities must be floating point)",
            });
        }
        let p = self.detach();
        let out_of_range = p
            .lt_scalar(0)?
            .logical_or(&p.gt_scalar(1)?)?
            .to_dtype(DType::F32)?
            .sum_all()?
            .item()?;
        // NaN compares false both ways (and x != x may be folded away by a driver).
        if out_of_range != 0.0 || p.has_non_finite()? {
            return Err(Error::arg(
                OP,
                "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
            ));
        }
        let u = uniforms(OP, self.shape(), &self.device())?;
        u.lt(&p)?.to_dtype(self.dtype())
    }

    /// 1 with probability `p`, else 0, with `self`'s shape, dtype and device
    /// (`Tensor.bernoulli(p)`).
    pub fn bernoulli_p(&self, p: f64) -> Result<Tensor> {
        const OP: &str = "bernoulli";
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::arg(
                OP,
                format!("bernoulli_ expects p to be in [0, 1], but got p={p}"),
            ));
        }
        let n = crate::shape::checked_numel(OP, self.shape())?;
        crate::backend::gpu::check_alloc(&self.device(), OP, n, self.dtype())?;
        let mut v: Vec<f64> = crate::backend::cpu::try_vec(OP, n)?;
        with_default_generator(|g| {
            v.extend((0..n).map(|_| ((uniform24(g) as f64) < p) as u8 as f64))
        });
        Tensor::from_f64(&v, self.shape(), self.dtype(), &self.device())
    }
}

/// f32 uniforms in [0, 1) of `shape` (24-bit: never 1), on `device`.
fn uniforms(op: &'static str, shape: &[usize], device: &Device) -> Result<Tensor> {
    let n = crate::shape::checked_numel(op, shape)?;
    crate::backend::gpu::check_alloc(device, op, n, DType::F32)?;
    let mut v: Vec<f32> = crate::backend::cpu::try_vec(op, n)?;
    with_default_generator(|g| v.extend((0..n).map(|_| uniform24(g))));
    Tensor::from_vec(v, shape, device)
}

/// `n` independent draws from the weights `w` (positive sum), appended to `out`.
fn sample_with_replacement(g: &mut Generator, w: &[f64], n: usize, out: &mut Vec<f64>) {
    let mut cum = Vec::with_capacity(w.len());
    let mut acc = 0.0;
    for &p in w {
        acc += p;
        cum.push(acc);
    }
    // The last category with positive weight: where a draw rounding up to the total lands.
    let last = w.iter().rposition(|&p| p > 0.0).unwrap_or(0);
    for _ in 0..n {
        let u = g.uniform() * acc;
        // First category whose cumulative weight passes u: zero weights never do.
        let i = cum.partition_point(|&c| c <= u).min(last);
        out.push(i as f64);
    }
}

/// `n` distinct categories drawn in order, each with probability proportional to its weight
/// among those left (Efraimidis-Spirakis keys: the `n` smallest `-ln(u) / w`), appended to
/// `out`. Zero weights get an infinite key and a uniform tie-break, so they come last, in a
/// uniformly random order.
fn sample_without_replacement(g: &mut Generator, w: &[f64], n: usize, out: &mut Vec<f64>) {
    let mut keys: Vec<(f64, f64, usize)> = w
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let e = -(1.0 - g.uniform()).ln();
            if p > 0.0 {
                (e / p, 0.0, i)
            } else {
                (f64::INFINITY, g.uniform(), i)
            }
        })
        .collect();
    let cmp = |a: &(f64, f64, usize), b: &(f64, f64, usize)| {
        a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1))
    };
    if n < keys.len() {
        keys.select_nth_unstable_by(n, cmp);
        keys.truncate(n);
    }
    keys.sort_by(cmp);
    out.extend(keys.iter().map(|k| k.2 as f64));
}
