//! The default random generator (xoshiro256++), seeded with [`manual_seed`]. Random tensors are
//! drawn on the host and moved to their device, so a seed gives the same numbers on every device.

use parking_lot::Mutex;

/// A seedable generator; also used by data loaders and dropout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    s: [u64; 4],
}

impl Generator {
    /// A generator seeded with `seed` (SplitMix64 expansion).
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Generator {
            s: [next(), next(), next(), next()],
        }
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// The state, for checkpoints.
    pub fn state(&self) -> [u64; 4] {
        self.s
    }
    /// Restore a saved state.
    pub fn set_state(&mut self, s: [u64; 4]) {
        self.s = s;
    }
}

static DEFAULT: Mutex<Option<Generator>> = Mutex::new(None);

/// Seed the default generator (PyTorch's `torch.manual_seed`).
///
/// ```
/// use wgtorch::{Device, Tensor};
/// wgtorch::manual_seed(7);
/// let a = Tensor::randn([3], &Device::Cpu)?.to_vec::<f32>()?;
/// wgtorch::manual_seed(7);
/// let b = Tensor::randn([3], &Device::Cpu)?.to_vec::<f32>()?;
/// assert_eq!(a, b);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn manual_seed(seed: u64) {
    *DEFAULT.lock() = Some(Generator::new(seed));
}

/// Run `f` with the default generator.
pub fn with_default_generator<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    crate::onnx::trace::random_draw();
    let mut g = DEFAULT.lock();
    f(g.get_or_insert_with(|| Generator::new(0x5eed)))
}
