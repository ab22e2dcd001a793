//! Numeric kernels outside any model framework: a fixed f32 weight applied
//! to rows ([`Matrix`]), through one product ([`strips`]) that gives the
//! same bits on every target. The text layer (the tagger's layers) and the
//! models' dense layers ([`crate::models::dense`]) both use it, so neither
//! depends on the other.

/// A fixed weight for products outside a burn model (the spaCy tagger's
/// layers): `x W + b` for rows of `k` values, `W` `[k, n]`, through
/// [`strips`] on every target. Its sums are the same bits natively and in
/// wasm, so a text's tags and entities, and the injections drawn from them,
/// do not depend on where it runs (rten-gemm fuses multiply-adds, with
/// kernels chosen by the CPU).
#[derive(Clone)]
pub struct Matrix {
    /// `[k, width]` row-major: the columns past `n` are zero, so `width` is
    /// a whole number of strips.
    w: Vec<f32>,
    /// `width` values, zero past `n`.
    bias: Option<Vec<f32>>,
    k: usize,
    n: usize,
    width: usize,
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matrix")
            .field("k", &self.k)
            .field("n", &self.n)
            .field("bias", &self.bias.is_some())
            .finish()
    }
}

impl Matrix {
    /// From a PyTorch-style `[n, k]` row-major weight (one row per output)
    /// and its bias of `n` values, if any.
    pub fn from_rows(rows: &[f32], n: usize, k: usize, bias: Option<Vec<f32>>) -> Self {
        assert_eq!(rows.len(), n * k, "a [{n}, {k}] weight");
        assert!(
            bias.as_ref().is_none_or(|b| b.len() == n),
            "a bias of {n} values"
        );
        let width = n.next_multiple_of(STRIP).max(STRIP);
        let mut w = vec![0.0; k * width];
        for (o, row) in rows.chunks_exact(k.max(1)).enumerate().take(n) {
            for (i, &v) in row.iter().enumerate() {
                w[i * width + o] = v;
            }
        }
        let bias = bias.map(|mut b| {
            b.resize(width, 0.0);
            b
        });
        Self {
            w,
            bias,
            k,
            n,
            width,
        }
    }

    /// Inputs per row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Outputs per row.
    pub fn n(&self) -> usize {
        self.n
    }

    /// `x W + b` for the `x.len() / k` rows of `x`, row-major out.
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        let rows = x.len() / self.k.max(1);
        assert_eq!(rows * self.k, x.len(), "rows of {} values", self.k);
        if rows == 0 {
            return Vec::new();
        }
        let out = strips(x, &self.w, self.bias.as_deref(), rows, self.k, self.width);
        if self.width == self.n {
            return out;
        }
        out.chunks_exact(self.width)
            .flat_map(|row| &row[..self.n])
            .copied()
            .collect()
    }
}

/// Columns per strip of [`strips`]: two vectors of four lanes, or one of
/// eight.
pub(crate) const STRIP: usize = 8;
/// Input rows per tile of [`strips`] with four-lane vectors (8
/// accumulators, so the tile stays in V8's sixteen vector registers; 6 rows
/// spilled and ran at 31 GFLOP/s).
const TILE_ROWS: usize = 4;
/// Input rows per tile with AVX's eight lanes: 8 accumulators again, now
/// one vector per row.
#[cfg(target_arch = "x86_64")]
const AVX_TILE_ROWS: usize = 8;
/// Depth of a strip's block: 512 rows of 8 columns of the weight (16 KB)
/// stay in L1 while every tile of input rows passes over them.
const DEPTH: usize = 512;

/// `x W + b`, `x` `[m, k]` and `W` `[k, n]` row-major (`n` a multiple of
/// 8), without packing the weight: each strip of 8 columns is read in place
/// a block of [`DEPTH`] rows at a time, and every tile of input rows
/// multiplies it into its accumulators. rten-gemm copies the weight into
/// panels on every call, about a fifth of a keystroke's pass in the page;
/// this reached 42–50 GFLOP/s against its 35–40 on the page's products (25
/// rows, MiniLM's widths) and the same at 400 rows (BENCHMARKS.md).
/// Each output is the bias plus the products added in order of `k`, one
/// multiply and one add each (no fused multiply-add), so every target gives
/// the same bits whatever the width of its vectors: simd128 in wasm, AVX
/// where an x86-64 CPU has it and SSE where not, four plain lanes elsewhere
/// ([`Lanes`]).
pub(crate) fn strips(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f32> {
    if m <= STREAM_ROWS {
        return streamed(x, w, bias, m, k, n);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(avx) = Avx::detect() {
        return strips_avx(avx, x, w, bias, m, k, n);
    }
    strips_with::<_, 2, TILE_ROWS>(Native::default(), x, w, bias, m, k, n)
}

/// Input rows up to which [`strips`] streams the weight ([`streamed`]).
const STREAM_ROWS: usize = 4;

/// [`strips`] for a few input rows (a generation step): each row of the
/// weight is read once, in order, and added into every input row's
/// outputs, which stay in cache. The strips' blocks read each weight row
/// eight columns at a time, a strip after another; with one input row that
/// read, not the arithmetic, bounds the step (GPT-2-small's 85 million
/// weights a token). The same operations in the same order as [`strips`]:
/// each output is the products added in order of `k`, then the bias, so
/// a row gets the same bits alone or among others.
fn streamed(x: &[f32], w: &[f32], bias: Option<&[f32]>, m: usize, k: usize, n: usize) -> Vec<f32> {
    assert!(x.len() == m * k && w.len() == k * n);
    assert!(bias.is_none_or(|b| b.len() == n), "a bias of {n} values");
    let mut out = vec![0.0f32; m * n];
    for (kk, wrow) in w.chunks_exact(n.max(1)).enumerate().take(k) {
        for (r, orow) in out.chunks_exact_mut(n.max(1)).enumerate() {
            let xv = x[r * k + kk];
            for (o, wv) in orow.iter_mut().zip(wrow) {
                *o += xv * wv;
            }
        }
    }
    if let Some(bias) = bias {
        for row in out.chunks_exact_mut(n.max(1)) {
            for (o, b) in row.iter_mut().zip(bias) {
                *o += b;
            }
        }
    }
    out
}

/// Output rows of `W` per block of [`dots`]: 32 rows of a 768-wide weight
/// (96 KB) stay in L2 while every input row passes over them.
const DOT_BLOCK: usize = 32;

/// `x Wᵀ`, `x` `[m, k]` and `W` `[n, k]` row-major (PyTorch's layout, as a
/// tied language-model head reads its embeddings): each output is the dot
/// product of an input row with a row of `W`, read in place. For a few input
/// rows (a generation step) this reads the weight once, where a packed
/// product first copies all of it (GPT-2's head: 154 MB a token). Sixteen
/// lane-wise accumulators per dot, summed at the end.
pub(crate) fn dots(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert!(x.len() == m * k && w.len() == n * k);
    let mut out = vec![0.0f32; m * n];
    if k == 0 {
        return out;
    }
    for start in (0..n).step_by(DOT_BLOCK) {
        let end = (start + DOT_BLOCK).min(n);
        for (xi, orow) in x.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            for (o, wrow) in orow[start..end]
                .iter_mut()
                .zip(w[start * k..end * k].chunks_exact(k))
            {
                *o = dot(xi, wrow);
            }
        }
    }
    out
}

/// The dot product of two equal-length slices, sixteen lanes at a time.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// [`strips`] compiled for AVX, the whole loop nest inlined into it.
#[cfg(target_arch = "x86_64")]
fn strips_avx(
    avx: Avx,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f32> {
    #[target_feature(enable = "avx")]
    fn run(
        avx: Avx,
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<f32> {
        strips_with::<Avx, 1, AVX_TILE_ROWS>(avx, x, w, b, m, k, n)
    }
    // SAFETY: an `Avx` exists only where the CPU has AVX.
    unsafe { run(avx, x, w, bias, m, k, n) }
}

/// [`strips`] through the lanes `lanes`: `S` vectors of them per strip of
/// [`STRIP`] columns, tiles of `R` input rows (then 4, then 3, 2 or 1 for
/// the rows left).
#[inline(always)]
fn strips_with<L: Lanes, const S: usize, const R: usize>(
    lanes: L,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f32> {
    const { assert!(S * L::WIDTH == STRIP && R >= 4) };
    assert!(x.len() == m * k && w.len() == k * n && n > 0 && n.is_multiple_of(STRIP));
    assert!(bias.is_none_or(|b| b.len() == n), "a bias of {n} values");
    let mut out = vec![0.0f32; m * n];
    let (xp, wp, op) = (x.as_ptr(), w.as_ptr(), out.as_mut_ptr());
    for j in (0..n).step_by(STRIP) {
        for start in (0..k).step_by(DEPTH) {
            let depth = start..(start + DEPTH).min(k);
            let mut i = 0;
            // SAFETY: the tiles stay inside the sizes asserted above.
            unsafe {
                while i + R <= m {
                    tile::<L, S, R>(lanes, xp, wp, op, [i, j], [k, n], depth.clone());
                    i += R;
                }
                while R > 4 && i + 4 <= m {
                    tile::<L, S, 4>(lanes, xp, wp, op, [i, j], [k, n], depth.clone());
                    i += 4;
                }
                match m - i {
                    3 => tile::<L, S, 3>(lanes, xp, wp, op, [i, j], [k, n], depth),
                    2 => tile::<L, S, 2>(lanes, xp, wp, op, [i, j], [k, n], depth),
                    1 => tile::<L, S, 1>(lanes, xp, wp, op, [i, j], [k, n], depth),
                    _ => {}
                }
            }
        }
    }
    if let Some(bias) = bias {
        for row in out.chunks_exact_mut(n) {
            for (o, b) in row.iter_mut().zip(bias) {
                *o += b;
            }
        }
    }
    out
}

/// Rows `i..i + R`, columns `j..j + 8` of `out += x W` over `depth`.
/// Raw pointers: with indexing, the bounds checks V8 keeps in the inner
/// loop made the page's pass slower than rten-gemm's. The rows' pointers
/// are set once and stepped with `wrapping_add`, which (unlike `add`) has
/// no overflow check in builds with debug assertions.
///
/// # Safety
/// `x` is `[m, k]`, `w` `[k, n]` and `out` `[m, n]` with `i + R <= m`,
/// `j + 8 <= n` and `depth` within `0..k` (as [`strips_with`] asserts).
#[inline(always)]
unsafe fn tile<L: Lanes, const S: usize, const R: usize>(
    l: L,
    x: *const f32,
    w: *const f32,
    out: *mut f32,
    [i, j]: [usize; 2],
    [k, n]: [usize; 2],
    depth: std::ops::Range<usize>,
) {
    // Plain loops rather than closures (`array::from_fn`): a closure is
    // not compiled for AVX unless it is inlined into `strips_avx`.
    let mut outs = [out; R];
    let mut xs = [x; R];
    for r in 0..R {
        outs[r] = out.wrapping_add((i + r) * n + j);
        xs[r] = x.wrapping_add((i + r) * k + depth.start);
    }
    // SAFETY (every access below): in bounds by the caller's contract.
    unsafe {
        let mut acc = [[l.zero(); S]; R];
        for (acc, &at) in acc.iter_mut().zip(&outs) {
            for (s, v) in acc.iter_mut().enumerate() {
                *v = l.load(at.wrapping_add(s * L::WIDTH));
            }
        }
        // After the last row these point past the weight and the input
        // rows (never read there), which `add` would make undefined.
        let mut row = w.wrapping_add(depth.start * n + j);
        let mut b = [l.zero(); S];
        for _ in depth {
            for (s, b) in b.iter_mut().enumerate() {
                *b = l.load(row.wrapping_add(s * L::WIDTH));
            }
            for (acc, x) in acc.iter_mut().zip(&mut xs) {
                let a = l.splat(**x);
                for (v, &b) in acc.iter_mut().zip(&b) {
                    *v = l.mul_add(*v, a, b);
                }
                *x = x.wrapping_add(1);
            }
            row = row.wrapping_add(n);
        }
        for (acc, &at) in acc.iter().zip(&outs) {
            for (s, &v) in acc.iter().enumerate() {
                l.store(at.wrapping_add(s * L::WIDTH), v);
            }
        }
    }
}

/// The f32 lanes [`strips`] computes with. Every implementation does the
/// same arithmetic (a multiply, then an add, each rounded: no fused
/// multiply-add), so the native tests check the page's kernel bit for bit,
/// and a product gives the same bits on every machine. A value of the type
/// is the proof that the CPU runs its instructions.
trait Lanes: Copy {
    /// `WIDTH` f32s.
    type V: Copy;
    const WIDTH: usize;
    fn zero(self) -> Self::V;
    /// `WIDTH` f32s from `p` (any alignment).
    ///
    /// # Safety
    /// `p` points at `WIDTH` readable f32s.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// # Safety
    /// `p` points at `WIDTH` writable f32s.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    fn splat(self, x: f32) -> Self::V;
    /// `acc + a * b`, lane by lane, rounded after each step.
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V;
}

/// The four lanes every build of this target has: simd128 in wasm, SSE on
/// x86-64 (part of it), plain floats elsewhere.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
type Native = Simd128;
#[cfg(target_arch = "x86_64")]
type Native = Sse;
#[cfg(not(any(
    all(target_arch = "wasm32", target_feature = "simd128"),
    target_arch = "x86_64"
)))]
type Native = Plain;

/// Four plain f32s.
#[cfg_attr(
    any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    ),
    allow(dead_code)
)]
#[derive(Clone, Copy, Default)]
struct Plain;

impl Lanes for Plain {
    type V = [f32; 4];
    const WIDTH: usize = 4;
    #[inline(always)]
    fn zero(self) -> Self::V {
        [0.0; 4]
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> Self::V {
        // SAFETY: the caller's contract; no alignment needed.
        unsafe { p.cast::<Self::V>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: Self::V) {
        // SAFETY: as for `load`.
        unsafe { p.cast::<Self::V>().write_unaligned(v) }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> Self::V {
        [x; 4]
    }
    #[inline(always)]
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        std::array::from_fn(|l| acc[l] + a[l] * b[l])
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[derive(Clone, Copy, Default)]
struct Simd128;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl Lanes for Simd128 {
    type V = std::arch::wasm32::v128;
    const WIDTH: usize = 4;
    #[inline(always)]
    fn zero(self) -> Self::V {
        std::arch::wasm32::f32x4_splat(0.0)
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> Self::V {
        // SAFETY: the caller's contract; no alignment needed.
        unsafe { p.cast::<Self::V>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: Self::V) {
        // SAFETY: as for `load`.
        unsafe { p.cast::<Self::V>().write_unaligned(v) }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> Self::V {
        std::arch::wasm32::f32x4_splat(x)
    }
    #[inline(always)]
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        use std::arch::wasm32::{f32x4_add, f32x4_mul};
        f32x4_add(acc, f32x4_mul(a, b))
    }
}

/// x86-64's baseline: four lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Default)]
struct Sse;

#[cfg(target_arch = "x86_64")]
impl Lanes for Sse {
    type V = std::arch::x86_64::__m128;
    const WIDTH: usize = 4;
    #[inline(always)]
    fn zero(self) -> Self::V {
        // SAFETY: SSE is part of x86-64.
        unsafe { std::arch::x86_64::_mm_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> Self::V {
        // SAFETY: the caller's contract; no alignment needed.
        unsafe { std::arch::x86_64::_mm_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: Self::V) {
        // SAFETY: as for `load`.
        unsafe { std::arch::x86_64::_mm_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> Self::V {
        // SAFETY: SSE is part of x86-64.
        unsafe { std::arch::x86_64::_mm_set1_ps(x) }
    }
    #[inline(always)]
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        use std::arch::x86_64::{_mm_add_ps, _mm_mul_ps};
        // SAFETY: SSE is part of x86-64.
        unsafe { _mm_add_ps(acc, _mm_mul_ps(a, b)) }
    }
}

#[cfg(target_arch = "x86_64")]
use avx::Avx;

/// In a module of its own so that [`Avx::detect`] is the only way to
/// make one.
#[cfg(target_arch = "x86_64")]
mod avx {
    /// Eight lanes, for CPUs with AVX (found at run time). Its methods are
    /// inlined into [`super::strips_avx`], which is compiled for AVX.
    #[derive(Clone, Copy)]
    pub(super) struct Avx(());

    impl Avx {
        /// The lanes, where this CPU has AVX.
        pub(super) fn detect() -> Option<Self> {
            std::is_x86_feature_detected!("avx").then_some(Self(()))
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx {
    type V = std::arch::x86_64::__m256;
    const WIDTH: usize = 8;
    #[inline(always)]
    fn zero(self) -> Self::V {
        // SAFETY: an `Avx` exists only where the CPU has AVX.
        unsafe { std::arch::x86_64::_mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> Self::V {
        // SAFETY: the caller's contract; as for `zero`.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: Self::V) {
        // SAFETY: as for `load`.
        unsafe { std::arch::x86_64::_mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> Self::V {
        // SAFETY: as for `zero`.
        unsafe { std::arch::x86_64::_mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        use std::arch::x86_64::{_mm256_add_ps, _mm256_mul_ps};
        // SAFETY: as for `zero`.
        unsafe { _mm256_add_ps(acc, _mm256_mul_ps(a, b)) }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Reproducible values in [-0.5, 0.5) for tests.
    pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / 16_777_216.0 - 0.5
            })
            .collect()
    }

    #[test]
    fn a_matrix_applies_its_pytorch_rows_to_each_input_row() {
        // Widths that are whole strips of 8 and widths padded to them; one
        // row, several, and none.
        for (n, k, bias) in [
            (288, 384, true),
            (50, 96, true),
            (384, 64, false),
            (3, 5, true),
        ] {
            let rows_w = values(n * k, 1);
            let b = bias.then(|| values(n, 2));
            let m = Matrix::from_rows(&rows_w, n, k, b.clone());
            assert_eq!((m.k(), m.n()), (k, n));
            for rows in [0, 1, 7] {
                let x = values(rows * k, 3);
                let got = m.apply(&x);
                assert_eq!(got.len(), rows * n);
                for r in 0..rows {
                    for o in 0..n {
                        let want = (0..k)
                            .map(|i| x[r * k + i] * rows_w[o * k + i])
                            .sum::<f32>()
                            + b.as_ref().map_or(0.0, |b| b[o]);
                        let have = got[r * n + o];
                        assert!(
                            (have - want).abs() < 1e-4,
                            "[{n}, {k}] row {r} out {o}: {have} vs {want}"
                        );
                    }
                }
            }
            // A row alone gets the bits it gets among others.
            let x = values(7 * k, 3);
            assert_eq!(m.apply(&x[k..2 * k]), m.apply(&x)[n..2 * n]);
        }
    }

    #[test]
    fn dots_are_the_rows_products() {
        for (m, k, n) in [(1, 768, 70), (3, 37, 33), (2, 0, 5), (0, 8, 4)] {
            let (x, w) = (values(m * k, 4), values(n * k, 5));
            let got = dots(&x, &w, m, k, n);
            assert_eq!(got.len(), m * n);
            for r in 0..m {
                for o in 0..n {
                    let want: f64 = (0..k)
                        .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                        .sum();
                    let have = got[r * n + o];
                    assert!(
                        (f64::from(have) - want).abs() < 1e-4,
                        "[{m}, {k}, {n}] {r} {o}"
                    );
                }
            }
        }
    }

    /// Each set of lanes this machine can run, as [`strips`]'s signature.
    type Kernel = fn(&[f32], &[f32], Option<&[f32]>, usize, usize, usize) -> Vec<f32>;
    fn kernels() -> Vec<(&'static str, Kernel)> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut all: Vec<(&'static str, Kernel)> = vec![
            ("strips", strips),
            ("plain", |x, w, b, m, k, n| {
                strips_with::<_, 2, TILE_ROWS>(Plain, x, w, b, m, k, n)
            }),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            all.push(("sse", |x, w, b, m, k, n| {
                strips_with::<_, 2, TILE_ROWS>(Sse, x, w, b, m, k, n)
            }));
            if Avx::detect().is_some() {
                all.push(("avx", |x, w, b, m, k, n| {
                    strips_avx(Avx::detect().unwrap(), x, w, b, m, k, n)
                }));
            } else {
                eprintln!("no AVX on this CPU: its kernel is not tested here");
            }
        }
        all
    }

    /// The page's f32 kernel gives every output exactly as the bias plus
    /// the products added in order of `k`, through every set of lanes this
    /// machine runs (the page's simd128 runs the same code with four lanes):
    /// tiles of every height, depths across its blocks, several strips, with
    /// and without a bias.
    #[test]
    fn strips_add_the_products_in_order() {
        for (m, k, n) in [
            (0, 5, 8),
            (3, 0, 8),
            (1, 3, 8),
            (2, 7, 8),
            (3, 40, 16),
            (6, 600, 16),
            (9, 520, 24),
            (25, 1100, 8),
            (4, 512, 16),
            (15, 70, 8),
            (13, 9, 16),
            (12, 600, 16),
        ] {
            let x = values(m * k, 20);
            let w = values(k * n, 21);
            let b = values(n, 22);
            for ((name, kernel), bias) in kernels()
                .into_iter()
                .flat_map(|kernel| [(kernel, None), (kernel, Some(&b[..]))])
            {
                let ours = kernel(&x, &w, bias, m, k, n);
                for r in 0..m {
                    for c in 0..n {
                        let mut sum = 0.0f32;
                        for kk in 0..k {
                            sum += x[r * k + kk] * w[kk * n + c];
                        }
                        let want = sum + bias.map_or(0.0, |b| b[c]);
                        assert_eq!(
                            ours[r * n + c].to_bits(),
                            want.to_bits(),
                            "{name} ({m}, {k}, {n}) at [{r}, {c}]"
                        );
                    }
                }
            }
        }
    }
}
