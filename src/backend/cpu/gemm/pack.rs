//! The GEMM's operands and their packing. An operand is any [`Source`]: a strided view of a
//! buffer, the transpose of another source, or a convolution's unfolded input computed while it
//! is packed (so the unfolded matrix is never written out). Packing copies a block of the
//! operand into consecutive panels, each `kc` groups of `width` elements, zero-padded past the
//! block's edge, which is the order the microkernels read.

use super::Gemm;

/// A matrix the GEMM reads by rows or by columns.
pub(crate) trait Source<T>: Sync {
    /// `out[i] = self[r, c0 + i]`.
    fn row(&self, r: usize, c0: usize, out: &mut [T]);
    /// `out[i] = self[r0 + i, c]`.
    fn col(&self, c: usize, r0: usize, out: &mut [T]);
    /// Whether rows are the cheaper direction to read.
    fn by_rows(&self) -> bool;
    /// The source as a strided view, when it is one (packed by a faster path).
    fn strided(&self) -> Option<Strided<'_, T>> {
        None
    }
    /// Row `r`'s columns `c0..c0 + n` when they lie contiguous in memory (packed straight from
    /// there instead of through a copy).
    fn run(&self, _r: usize, _c0: usize, _n: usize) -> Option<&[T]> {
        None
    }
    /// Column `c`'s rows `r0..r0 + n` when they lie contiguous in memory.
    fn col_run(&self, _c: usize, _r0: usize, _n: usize) -> Option<&[T]> {
        None
    }
}

impl<T, S: Source<T> + ?Sized> Source<T> for &S {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        (**self).row(r, c0, out)
    }
    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        (**self).col(c, r0, out)
    }
    fn by_rows(&self) -> bool {
        (**self).by_rows()
    }
    fn strided(&self) -> Option<Strided<'_, T>> {
        (**self).strided()
    }
    fn run(&self, r: usize, c0: usize, n: usize) -> Option<&[T]> {
        (**self).run(r, c0, n)
    }
    fn col_run(&self, c: usize, r0: usize, n: usize) -> Option<&[T]> {
        (**self).col_run(c, r0, n)
    }
}

/// A strided view: element `[r, c]` is `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a, T> {
    /// The elements.
    pub data: &'a [T],
    /// Row stride.
    pub rs: usize,
    /// Column stride.
    pub cs: usize,
}

/// Read `out.len()` elements from `data` starting at `first`, `step` apart.
#[inline]
fn gather<T: Copy>(data: &[T], first: usize, step: usize, out: &mut [T]) {
    if step == 1 {
        out.copy_from_slice(&data[first..first + out.len()]);
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            *o = data[first + i * step];
        }
    }
}

impl<T: Copy + Sync> Source<T> for Strided<'_, T> {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        gather(self.data, r * self.rs + c0 * self.cs, self.cs, out);
    }
    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        gather(self.data, r0 * self.rs + c * self.cs, self.rs, out);
    }
    fn by_rows(&self) -> bool {
        self.cs == 1 || self.rs != 1
    }
    fn strided(&self) -> Option<Strided<'_, T>> {
        Some(*self)
    }
}

/// The transpose of a source: `[r, c]` is the inner source's `[c, r]`.
pub(crate) struct Transposed<S>(pub S);

impl<T, S: Source<T>> Source<T> for Transposed<S> {
    fn row(&self, r: usize, c0: usize, out: &mut [T]) {
        self.0.col(r, c0, out)
    }
    fn col(&self, c: usize, r0: usize, out: &mut [T]) {
        self.0.row(c, r0, out)
    }
    fn by_rows(&self) -> bool {
        !self.0.by_rows()
    }
    fn strided(&self) -> Option<Strided<'_, T>> {
        self.0.strided().map(|s| Strided {
            data: s.data,
            rs: s.cs,
            cs: s.rs,
        })
    }
    fn run(&self, r: usize, c0: usize, n: usize) -> Option<&[T]> {
        self.0.col_run(r, c0, n)
    }
    fn col_run(&self, c: usize, r0: usize, n: usize) -> Option<&[T]> {
        self.0.run(c, r0, n)
    }
}

/// `dst.copy_from_slice(src)` inline, in 8-element blocks, for the short runs that packing and
/// unfolding copy (a library call per run of a few dozen elements costs more than the copy).
#[inline(always)]
pub(crate) fn copy_short<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copy_short: lengths differ");
    let (mut d8, s8) = (dst.chunks_exact_mut(8), src.chunks_exact(8));
    let rest = s8.remainder();
    for (d, s) in (&mut d8).zip(s8) {
        let s: &[T; 8] = s.try_into().expect("8 elements");
        let d: &mut [T; 8] = d.try_into().expect("8 elements");
        *d = *s;
    }
    for (d, &s) in d8.into_remainder().iter_mut().zip(rest) {
        *d = s;
    }
}

/// The longest run `pack` reads at once: the larger of the blocking's `KC` and `NC`/`MC`.
pub(super) const MAX_RUN: usize = 512;

/// Pack rows `k0..k0+kc` and columns `n0..n0+n` of `src` into `dst` as `ceil(n / width)`
/// panels; panel `p` holds `kc` groups of `width` elements (column `n0 + p*width + j` of row
/// `k0 + kk` at `p*kc*width + kk*width + j`), zero past column `n0 + n`. B is packed as it is;
/// A is packed as `Transposed(A)`, so its panels run along its rows.
pub(super) fn pack<T: Gemm>(
    src: &impl Source<T>,
    k0: usize,
    kc: usize,
    n0: usize,
    n: usize,
    width: usize,
    dst: &mut [T],
) {
    assert!(
        kc <= MAX_RUN && n <= MAX_RUN && dst.len() >= n.div_ceil(width) * kc * width,
        "gemm: pack block too large"
    );
    // The panel width is a constant in each copy, so the copies below compile to vector moves.
    match width {
        4 => pack_w::<T, 4>(src, k0, kc, n0, n, dst),
        6 => pack_w::<T, 6>(src, k0, kc, n0, n, dst),
        8 => pack_w::<T, 8>(src, k0, kc, n0, n, dst),
        12 => pack_w::<T, 12>(src, k0, kc, n0, n, dst),
        16 => pack_w::<T, 16>(src, k0, kc, n0, n, dst),
        32 => pack_w::<T, 32>(src, k0, kc, n0, n, dst),
        48 => pack_w::<T, 48>(src, k0, kc, n0, n, dst),
        _ => panic!("gemm: no kernel has {width}-wide panels"),
    }
}

/// Group `p` of a row of the block (`row[p*W..]`, at most `W` elements) into
/// `dst[at..at + W]`, zero past the row's end.
#[inline(always)]
fn put_group<T: Gemm, const W: usize>(dst: &mut [T], at: usize, row: &[T], p: usize) {
    let group = &mut dst[at..at + W];
    let src = &row[p * W..];
    match src.first_chunk::<W>() {
        // `copy_from_slice` of a whole panel-width group becomes a library call (`memcpy`) per
        // group, which cost more than the copy.
        Some(full) => copy_short(group, full),
        None => {
            group[..src.len()].copy_from_slice(src);
            group[src.len()..].fill(T::zero());
        }
    }
}

fn pack_w<T: Gemm, const W: usize>(
    src: &impl Source<T>,
    k0: usize,
    kc: usize,
    n0: usize,
    n: usize,
    dst: &mut [T],
) {
    let panels = n.div_ceil(W);
    if let Some(s) = src.strided() {
        if kc == 0 || n == 0 {
            return;
        }
        let last = (k0 + kc - 1) * s.rs + (n0 + n - 1) * s.cs;
        assert!(last < s.data.len(), "gemm: operand out of bounds");
        if s.cs == 1 {
            // Rows contiguous: a few rows at a time, each read front to back, so that the
            // writes go to few places at once (panels are a multiple of 4 KiB apart, which
            // would evict one another from L1 if every row wrote every panel).
            const ROWS: usize = 8;
            for k1 in (0..kc).step_by(ROWS) {
                for p in 0..panels {
                    for kk in k1..kc.min(k1 + ROWS) {
                        let row = &s.data[(k0 + kk) * s.rs + n0..][..n];
                        put_group::<T, W>(dst, p * kc * W + kk * W, row, p);
                    }
                }
            }
        } else {
            // Columns contiguous (or neither): transposed in tiles (see `transpose_tiles`).
            transpose_tiles::<T, W>(kc, n, dst, |j, kk, out| {
                let base = k0 * s.rs + (n0 + j) * s.cs + kk * s.rs;
                if s.rs == 1 {
                    copy_short(out, &s.data[base..base + out.len()]);
                } else {
                    for (i, o) in out.iter_mut().enumerate() {
                        // SAFETY: `base + i*rs` is at most `last` (asserted): `kk + i < kc`.
                        *o = unsafe { *s.data.get_unchecked(base + i * s.rs) };
                    }
                }
            });
        }
        return;
    }
    let mut run = [T::zero(); MAX_RUN];
    if src.run(k0, n0, n).is_some() {
        // Rows that are runs in memory: grouped as for a strided source above.
        const ROWS: usize = 8;
        for k1 in (0..kc).step_by(ROWS) {
            for p in 0..panels {
                for kk in k1..kc.min(k1 + ROWS) {
                    let row = match src.run(k0 + kk, n0, n) {
                        Some(row) => row,
                        None => {
                            src.row(k0 + kk, n0, &mut run[..n]);
                            &run[..n]
                        }
                    };
                    put_group::<T, W>(dst, p * kc * W + kk * W, row, p);
                }
            }
        }
    } else if src.by_rows() {
        let run = &mut run[..n];
        for kk in 0..kc {
            src.row(k0 + kk, n0, run);
            for p in 0..panels {
                put_group::<T, W>(dst, p * kc * W + kk * W, run, p);
            }
        }
    } else {
        transpose_tiles::<T, W>(kc, n, dst, |j, kk, out| {
            match src.col_run(n0 + j, k0 + kk, out.len()) {
                Some(run) => copy_short(out, run),
                None => src.col(n0 + j, k0 + kk, out),
            }
        });
    }
}

/// Rows of a tile that [`transpose_tiles`] reads from each column at once: one cache line of
/// f32.
const TILE: usize = 16;

/// Pack a block whose columns are the cheaper direction (`read(j, kk, out)` fills `out` with
/// column `j`'s rows `kk..`) into `ceil(n / W)` panels of `kc` groups of `W`, zero past column
/// `n`. It goes `TILE` rows at a time: `W` short column reads into a tile, then the tile
/// transposed into `TILE` consecutive groups. Reading whole columns and scattering each into
/// its panel `W` apart touched every cache line of the panel once per column, and a 32- or
/// 48-wide panel of 384 groups fills L1 by itself (the weight gradient of the SimpleCNN's first
/// convolution spent a third of its time packing so).
#[inline(always)]
fn transpose_tiles<T: Gemm, const W: usize>(
    kc: usize,
    n: usize,
    dst: &mut [T],
    mut read: impl FnMut(usize, usize, &mut [T]),
) {
    if kc == 0 {
        return;
    }
    let mut tile = [[T::zero(); TILE]; W];
    for (p, panel) in dst.chunks_exact_mut(kc * W).take(n.div_ceil(W)).enumerate() {
        let width = W.min(n - p * W);
        for kk in (0..kc).step_by(TILE) {
            let rows = TILE.min(kc - kk);
            for (j, col) in tile.iter_mut().enumerate() {
                if j < width {
                    read(p * W + j, kk, &mut col[..rows]);
                } else {
                    *col = [T::zero(); TILE];
                }
            }
            let groups = &mut panel[kk * W..(kk + rows) * W];
            for (t, group) in groups.chunks_exact_mut(W).enumerate() {
                for (g, col) in group.iter_mut().zip(&tile) {
                    *g = col[t];
                }
            }
        }
    }
}

/// A whole `k×n` operand packed as [`pack`] packs a block: `KC`-deep slices one after another,
/// each holding all of the operand's `width`-wide panels in order (zero-padded past column
/// `n`).
pub(super) struct Panels<'a, T> {
    n: usize,
    width: usize,
    data: &'a [T],
}

impl<T> Clone for Panels<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Panels<'_, T> {}

impl<'a, T: Gemm> Panels<'a, T> {
    /// The elements `pack_whole` fills for a `k×n` operand in `width`-wide panels.
    pub fn len(k: usize, n: usize, width: usize) -> usize {
        k * n.div_ceil(width) * width
    }

    /// Pack `src` (`k×n`) into `dst` (at least [`Panels::len`] elements), in parallel over its
    /// `KC×NC` blocks when it is large enough to gain from it.
    pub fn pack_whole(
        src: &impl Source<T>,
        k: usize,
        n: usize,
        width: usize,
        dst: &'a mut [T],
    ) -> Panels<'a, T> {
        use super::{KC, NC};
        use rayon::prelude::*;
        let len = Panels::<T>::len(k, n, width);
        let dst = &mut dst[..len];
        // Consecutive blocks (slice by slice, `NC` columns at a time) fill consecutive runs:
        // `NC` is a multiple of every panel width.
        let mut blocks = Vec::new();
        let mut rest = &mut *dst;
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            for jc in (0..n).step_by(NC) {
                let nc = NC.min(n - jc);
                let (block, tail) = rest.split_at_mut(nc.div_ceil(width) * kc * width);
                blocks.push((pc, kc, jc, nc, block));
                rest = tail;
            }
        }
        let run = |(pc, kc, jc, nc, block): (usize, usize, usize, usize, &mut [T])| {
            pack(src, pc, kc, jc, nc, width, block)
        };
        if blocks.len() > 1 && len >= 1 << 16 {
            blocks.into_par_iter().for_each(run);
        } else {
            blocks.into_iter().for_each(run);
        }
        Panels::new(n, width, dst)
    }

    /// The panels of a `?×n` operand that [`Panels::pack_whole`] filled, from `data`'s start.
    pub fn new(n: usize, width: usize, data: &'a [T]) -> Panels<'a, T> {
        Panels { n, width, data }
    }

    /// The panels from column `j0` (a multiple of the width) of the slice at depth `pc`, `kc`
    /// deep.
    pub fn at(&self, pc: usize, kc: usize, j0: usize) -> &'a [T] {
        let w = self.width;
        &self.data[pc * self.n.div_ceil(w) * w + (j0 / w) * kc * w..]
    }
}
