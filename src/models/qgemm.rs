//! Integer products for int8 models on the browser's CPU: `x W + b` with
//! `W` held as 16-bit integers (one scale per output column) and each row
//! of `x` quantized on the fly (one scale per row), accumulated exactly in
//! i32 and scaled back to f32.
//!
//! Why 16 bits: WebAssembly's simd128 has no 8-bit dot product (an i8 kernel
//! widens to 16 bits in its inner loop, which made rten-gemm's u8 x i8 kernel
//! slower than f32 in V8), but it has `i32x4.dot_i16x8_s`, one instruction
//! (x86's `pmaddwd`) for eight multiply-adds, where an f32 product needs a
//! multiply and an add for four. So the weights are widened once, at load,
//! and the kernel is that instruction and an add.
//!
//! Exactness: the sums are exact integers. The bounds keep them exact: with
//! weights in `±W_MAX` and a row's values in `±a_max(k)`, no sum over `k`
//! terms can leave i32 ([`a_max`]). The only approximations are the two
//! roundings to integers: a weight to 1/2046 of its column's largest, a
//! value to about 1/2700 of its row's largest for a MiniLM feed-forward
//! output (wider rows get fewer levels).
//!
//! The kernel is written once over three lane types: simd128 in wasm (what
//! the page runs), SSE2 on x86-64 (so native tests exercise the same
//! structure) and plain integers elsewhere; all three give the same bits.

/// Largest weight magnitude after requantization (11-bit signed).
pub const W_MAX: i32 = 1023;

/// Columns in one packed panel of the weights (two 4-lane vectors).
const NR: usize = 8;
/// Rows of the input in one tile of the kernel.
const MR: usize = 4;

/// A weight matrix `[k, n]` packed for [`QuantMatrix::matmul`]: panels of
/// [`NR`] columns, inside a panel pairs of rows interleaved per column
/// (`w[2p][c], w[2p+1][c]` side by side, what `dot_i16x8` pairs up).
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    k: usize,
    n: usize,
    /// `k` rounded up to even (one zero row when odd).
    k2: usize,
    data: Vec<i16>,
    /// Per output column: a weight is `data * scale`.
    scale: Vec<f32>,
}

/// `f(row, column, value)` over the `[k, n]` weight `values` hold (at
/// `r * n + c`, or at `c * k + r` when `transposed`), in storage order.
/// Generic, not `dyn`: it runs once per weight at load.
fn in_storage_order(
    values: &[f32],
    k: usize,
    n: usize,
    transposed: bool,
    mut f: impl FnMut(usize, usize, f32),
) {
    if transposed {
        for (c, col) in values.chunks_exact(k).enumerate() {
            for (r, &v) in col.iter().enumerate() {
                f(r, c, v);
            }
        }
    } else {
        for (r, row) in values.chunks_exact(n).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                f(r, c, v);
            }
        }
    }
}

impl QuantMatrix {
    /// Quantizes `w` (`[k, n]`, row-major) per output column.
    pub fn new(w: &[f32], k: usize, n: usize) -> Self {
        assert_eq!(w.len(), k * n, "a [{k}, {n}] weight has {k}·{n} values");
        Self::build(w, k, n, false)
    }

    /// Quantizes the `[k, n]` weight whose transpose `wt` (`[n, k]`,
    /// row-major) holds: an embedding table `[vocab, hidden]` read as a tied
    /// head's weight `[hidden, vocab]`, without a transposed copy.
    pub fn new_transposed(wt: &[f32], k: usize, n: usize) -> Self {
        assert_eq!(wt.len(), k * n, "a [{n}, {k}] table has {k}·{n} values");
        Self::build(wt, k, n, true)
    }

    /// `values` hold `w[r][c]` at `r * n + c`, or at `c * k + r` when
    /// `transposed`; each pass reads them in their order.
    fn build(values: &[f32], k: usize, n: usize, transposed: bool) -> Self {
        let mut amax = vec![0.0f32; n];
        let mut finite = vec![true; n];
        in_storage_order(values, k, n, transposed, |_, c, v| {
            amax[c] = amax[c].max(v.abs());
            finite[c] &= v.is_finite();
        });
        // A NaN or infinite weight makes its column's outputs NaN.
        let scale: Vec<f32> = amax
            .iter()
            .zip(&finite)
            .map(|(&m, &finite)| match (m, finite) {
                (_, false) => f32::NAN,
                (m, true) if m > 0.0 => m / W_MAX as f32,
                _ => 1.0,
            })
            .collect();
        let k2 = k.next_multiple_of(2);
        let panels = n.div_ceil(NR);
        let mut data = vec![0i16; panels * k2 * NR];
        let inv: Vec<f32> = scale.iter().map(|s| 1.0 / s).collect();
        in_storage_order(values, k, n, transposed, |r, c, v| {
            let q = (v * inv[c])
                .round_ties_even()
                .clamp(-W_MAX as f32, W_MAX as f32);
            data[(c / NR) * k2 * NR + (r / 2) * 2 * NR + r % 2 + (c % NR) * 2] = q as i16;
        });
        QuantMatrix {
            k,
            n,
            k2,
            data,
            scale,
        }
    }

    /// Input width.
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Output width.
    pub fn cols(&self) -> usize {
        self.n
    }

    /// `x W + b` for `x` of `m` rows of [`QuantMatrix::rows`] values
    /// (row-major), `m x n` row-major out.
    pub fn matmul(&self, x: &[f32], m: usize, bias: Option<&[f32]>) -> Vec<f32> {
        self.matmul_with::<Native>(x, m, bias)
    }

    /// [`QuantMatrix::matmul`] through the lanes `L`.
    fn matmul_with<L: Lanes>(&self, x: &[f32], m: usize, bias: Option<&[f32]>) -> Vec<f32> {
        let (k, n, k2) = (self.k, self.n, self.k2);
        assert_eq!(x.len(), m * k, "{m} rows of width {k}");
        if let Some(b) = bias {
            assert_eq!(b.len(), n, "a bias of width {n}");
        }
        let limit = a_max(k2);
        let mut qx = vec![0i16; m * k2];
        let mut row_scale = vec![0.0f32; m];
        for ((row, q), s) in x
            .chunks_exact(k)
            .zip(qx.chunks_exact_mut(k2))
            .zip(&mut row_scale)
        {
            // One pass: the largest magnitude, and whether a NaN is there
            // (`max` would skip it).
            let (amax, nan) = row.iter().fold((0.0f32, false), |(a, nan), v| {
                (a.max(v.abs()), nan | v.is_nan())
            });
            if !amax.is_finite() || nan {
                // A NaN or an infinity makes the row's outputs NaN, as the
                // float product would, never a wrong finite number.
                *s = f32::NAN;
                continue;
            }
            let inv = limit as f32 / amax;
            if !inv.is_finite() {
                // All zero, or so small (below about 1e-34) that the scale
                // would underflow: the row adds nothing but the bias.
                *s = 1.0;
                continue;
            }
            *s = amax / limit as f32;
            // |v * inv| <= limit, so the rounding needs no clamp.
            L::quantize(row, inv, &mut q[..k]);
        }
        let zeros;
        let bias = match bias {
            Some(b) => b,
            None => {
                zeros = vec![0.0f32; n];
                &zeros
            }
        };
        let mut out = vec![0.0f32; m * n];
        let mut tile = [[0i32; NR]; MR];
        for (panel, w) in self.data.chunks_exact(k2 * NR).enumerate() {
            let c0 = panel * NR;
            let cols = NR.min(n - c0);
            for r0 in (0..m).step_by(MR) {
                let rows = MR.min(m - r0);
                let a = &qx[r0 * k2..(r0 + rows) * k2];
                // SAFETY: `a` holds `rows` rows of `k2` values and `w` one
                // panel of `k2 / 2` pairs of NR columns: what the kernel reads.
                unsafe {
                    match rows {
                        4 => kernel::<L, 4>(a, w, k2, &mut tile),
                        3 => kernel::<L, 3>(a, w, k2, &mut tile),
                        2 => kernel::<L, 2>(a, w, k2, &mut tile),
                        _ => kernel::<L, 1>(a, w, k2, &mut tile),
                    }
                }
                let scale = &self.scale[c0..c0 + cols];
                let bias = &bias[c0..c0 + cols];
                for (i, acc) in tile.iter().take(rows).enumerate() {
                    let r = r0 + i;
                    let sa = row_scale[r];
                    let dst = &mut out[r * n + c0..r * n + c0 + cols];
                    for (((d, &a), &s), &b) in dst.iter_mut().zip(acc).zip(scale).zip(bias) {
                        *d = a as f32 * (sa * s) + b;
                    }
                }
            }
        }
        out
    }
}

/// The largest magnitude a row's values are quantized to for a product over
/// `k` terms: `k * W_MAX * a_max` stays within i32 (and every value within
/// i16).
pub fn a_max(k: usize) -> i32 {
    let bound = i32::MAX as i64 / (k.max(1) as i64 * W_MAX as i64);
    bound.clamp(1, i16::MAX as i64) as i32
}

/// `tile[i][j] = sum_p a[i][2p..2p+2] . w[p][j]` for `R` rows of `a`
/// (each `k2` long) against one packed panel.
///
/// # Safety
/// `a` holds at least `R * k2` values, `w` exactly `k2 * NR`.
#[inline(always)]
unsafe fn kernel<L: Lanes, const R: usize>(
    a: &[i16],
    w: &[i16],
    k2: usize,
    tile: &mut [[i32; NR]; MR],
) {
    debug_assert!(R <= MR && a.len() >= R * k2 && w.len() == k2 * NR);
    unsafe {
        let mut acc = [[L::zero(); 2]; R];
        let wp = w.as_ptr();
        let ap = a.as_ptr();
        for p in 0..k2 / 2 {
            let b0 = L::load(wp.add(p * 2 * NR));
            let b1 = L::load(wp.add(p * 2 * NR + NR));
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = L::splat_pair(ap.add(i * k2 + 2 * p));
                acc[0] = L::dot_add(acc[0], x, b0);
                acc[1] = L::dot_add(acc[1], x, b1);
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            L::store(tile[i].as_mut_ptr(), acc[0]);
            L::store(tile[i].as_mut_ptr().add(4), acc[1]);
        }
    }
}

/// What the kernel needs, over four i32 lanes: written once per instruction
/// set, every implementation giving the same bits.
trait Lanes {
    /// Four i32 sums.
    type Acc: Copy;
    /// Eight i16: four pairs.
    type Pairs: Copy;
    fn zero() -> Self::Acc;
    /// Eight i16 from `p` (any alignment).
    ///
    /// # Safety
    /// `p` points at eight readable i16.
    unsafe fn load(p: *const i16) -> Self::Pairs;
    /// The two i16 at `p`, repeated over the four pairs.
    ///
    /// # Safety
    /// `p` points at two readable i16.
    unsafe fn splat_pair(p: *const i16) -> Self::Pairs;
    /// `acc + (x[2l] b[2l] + x[2l+1] b[2l+1])` in each lane `l`.
    fn dot_add(acc: Self::Acc, x: Self::Pairs, b: Self::Pairs) -> Self::Acc;
    /// # Safety
    /// `p` points at four writable i32.
    unsafe fn store(p: *mut i32, v: Self::Acc);
    /// `dst = round(src * inv)`, ties to even (every `src * inv` within
    /// i16).
    fn quantize(src: &[f32], inv: f32, dst: &mut [i16]);
}

/// The lanes this build runs: simd128 in wasm, SSE2 on x86-64, else
/// [`Scalar`].
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
type Native = Simd128;
#[cfg(target_arch = "x86_64")]
type Native = Sse2;
#[cfg(not(any(
    all(target_arch = "wasm32", target_feature = "simd128"),
    target_arch = "x86_64"
)))]
type Native = Scalar;

/// Plain integers: the reference the others are tested against.
#[cfg_attr(
    any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    ),
    allow(dead_code)
)]
struct Scalar;

impl Lanes for Scalar {
    type Acc = [i32; 4];
    type Pairs = [i16; 8];
    fn zero() -> Self::Acc {
        [0; 4]
    }
    unsafe fn load(p: *const i16) -> Self::Pairs {
        unsafe { p.cast::<[i16; 8]>().read_unaligned() }
    }
    unsafe fn splat_pair(p: *const i16) -> Self::Pairs {
        let [a, b] = unsafe { p.cast::<[i16; 2]>().read_unaligned() };
        [a, b, a, b, a, b, a, b]
    }
    fn dot_add(acc: Self::Acc, x: Self::Pairs, b: Self::Pairs) -> Self::Acc {
        std::array::from_fn(|l| {
            let pair =
                x[2 * l] as i32 * b[2 * l] as i32 + x[2 * l + 1] as i32 * b[2 * l + 1] as i32;
            acc[l].wrapping_add(pair)
        })
    }
    unsafe fn store(p: *mut i32, v: Self::Acc) {
        unsafe { p.cast::<[i32; 4]>().write_unaligned(v) }
    }
    fn quantize(src: &[f32], inv: f32, dst: &mut [i16]) {
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = (v * inv).round_ties_even() as i16;
        }
    }
}

/// WebAssembly SIMD: `i32x4.dot_i16x8_s` is the kernel's instruction.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
struct Simd128;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl Lanes for Simd128 {
    type Acc = core::arch::wasm32::v128;
    type Pairs = core::arch::wasm32::v128;
    #[inline(always)]
    fn zero() -> Self::Acc {
        core::arch::wasm32::i32x4_splat(0)
    }
    #[inline(always)]
    unsafe fn load(p: *const i16) -> Self::Pairs {
        unsafe { core::arch::wasm32::v128_load(p.cast()) }
    }
    #[inline(always)]
    unsafe fn splat_pair(p: *const i16) -> Self::Pairs {
        unsafe { core::arch::wasm32::v128_load32_splat(p.cast()) }
    }
    #[inline(always)]
    fn dot_add(acc: Self::Acc, x: Self::Pairs, b: Self::Pairs) -> Self::Acc {
        use core::arch::wasm32::{i32x4_add, i32x4_dot_i16x8};
        i32x4_add(acc, i32x4_dot_i16x8(x, b))
    }
    #[inline(always)]
    unsafe fn store(p: *mut i32, v: Self::Acc) {
        unsafe { core::arch::wasm32::v128_store(p.cast(), v) }
    }
    fn quantize(src: &[f32], inv: f32, dst: &mut [i16]) {
        use core::arch::wasm32::*;
        let scale = f32x4_splat(inv);
        let rest = src.len() / 8 * 8;
        for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
            // SAFETY: `s` holds 8 f32 and `d` 8 i16 (wasm loads and stores
            // take any alignment).
            unsafe {
                let lo = v128_load(s.as_ptr().cast());
                let hi = v128_load(s.as_ptr().add(4).cast());
                let lo = i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(lo, scale)));
                let hi = i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(hi, scale)));
                v128_store(d.as_mut_ptr().cast(), i16x8_narrow_i32x4(lo, hi));
            }
        }
        Scalar::quantize(&src[rest..], inv, &mut dst[rest..]);
    }
}

/// x86-64's baseline: `pmaddwd` (`_mm_madd_epi16`) is the same instruction
/// V8 emits for `i32x4.dot_i16x8_s`, so native tests run the page's kernel.
#[cfg(target_arch = "x86_64")]
struct Sse2;

#[cfg(target_arch = "x86_64")]
impl Lanes for Sse2 {
    type Acc = core::arch::x86_64::__m128i;
    type Pairs = core::arch::x86_64::__m128i;
    #[inline(always)]
    fn zero() -> Self::Acc {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { core::arch::x86_64::_mm_setzero_si128() }
    }
    #[inline(always)]
    unsafe fn load(p: *const i16) -> Self::Pairs {
        unsafe { core::arch::x86_64::_mm_loadu_si128(p.cast()) }
    }
    #[inline(always)]
    unsafe fn splat_pair(p: *const i16) -> Self::Pairs {
        unsafe { core::arch::x86_64::_mm_set1_epi32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    fn dot_add(acc: Self::Acc, x: Self::Pairs, b: Self::Pairs) -> Self::Acc {
        use core::arch::x86_64::{_mm_add_epi32, _mm_madd_epi16};
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_add_epi32(acc, _mm_madd_epi16(x, b)) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut i32, v: Self::Acc) {
        unsafe { core::arch::x86_64::_mm_storeu_si128(p.cast(), v) }
    }
    fn quantize(src: &[f32], inv: f32, dst: &mut [i16]) {
        use core::arch::x86_64::*;
        let rest = src.len() / 8 * 8;
        for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
            // SAFETY: SSE2 is part of x86-64; `s` holds 8 f32, `d` 8 i16.
            // The conversion rounds as MXCSR says: to nearest, ties to even
            // (Rust never changes it).
            unsafe {
                let scale = _mm_set1_ps(inv);
                let lo = _mm_cvtps_epi32(_mm_mul_ps(_mm_loadu_ps(s.as_ptr()), scale));
                let hi = _mm_cvtps_epi32(_mm_mul_ps(_mm_loadu_ps(s.as_ptr().add(4)), scale));
                _mm_storeu_si128(d.as_mut_ptr().cast(), _mm_packs_epi32(lo, hi));
            }
        }
        Scalar::quantize(&src[rest..], inv, &mut dst[rest..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    fn reference(
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<f32> {
        let mut out = vec![0.0f64; m * n];
        for r in 0..m {
            for c in 0..n {
                let mut s = b.map_or(0.0, |b| b[c] as f64);
                for i in 0..k {
                    s += x[r * k + i] as f64 * w[i * n + c] as f64;
                }
                out[r * n + c] = s;
            }
        }
        out.into_iter().map(|v| v as f32).collect()
    }

    /// Every remainder of rows, columns and depth against an f64 product:
    /// within what the two roundings allow.
    #[test]
    fn matches_the_float_product_within_its_roundings() {
        for (m, k, n) in [
            (1, 1, 1),
            (2, 3, 8),
            (6, 64, 24),
            (5, 7, 9),
            (4, 384, 384),
            (7, 33, 17),
            (13, 1536, 40),
        ] {
            let x = values(m * k, 1 + m as u32);
            let w = values(k * n, 2 + n as u32);
            let b = values(n, 3);
            let q = QuantMatrix::new(&w, k, n);
            let ours = q.matmul(&x, m, Some(&b));
            let exact = reference(&x, &w, Some(&b), m, k, n);
            // Each term errs by at most |x| half a weight step plus |w| half
            // a value step; values and weights are in [-1, 1].
            let step = 0.5 / W_MAX as f32 + 0.5 / a_max(k.next_multiple_of(2)) as f32;
            let bound = k as f32 * step;
            let worst = ours
                .iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(worst <= bound, "{m}x{k}x{n}: off by {worst} > {bound}");
            // And far tighter in practice than that worst case.
            assert!(worst < 2e-3 * (k as f32).sqrt(), "{m}x{k}x{n}: {worst}");
        }
    }

    /// A table read transposed packs as its explicit transpose does, NaN
    /// column included.
    #[test]
    fn a_transposed_table_packs_as_its_transpose() {
        for (k, n) in [(1, 2), (7, 9), (33, 17), (64, 24)] {
            let mut wt = values(k * n, 5 + k as u32); // [n, k]
            wt[k] = f32::NAN; // column 1
            let w: Vec<f32> = (0..k * n).map(|i| wt[(i % n) * k + i / n]).collect();
            let (a, b) = (
                QuantMatrix::new(&w, k, n),
                QuantMatrix::new_transposed(&wt, k, n),
            );
            assert_eq!(a.data, b.data, "{k}x{n}");
            let bits = |q: &QuantMatrix| q.scale.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "{k}x{n}");
            assert!(b.scale[1].is_nan());
        }
    }

    /// The sums are exact: integer inputs that need no rounding give the
    /// integer product, even at the largest sums the bounds allow (all terms
    /// positive: within 0.1% of i32::MAX; a wrapped sum would be negative).
    #[test]
    fn sums_are_exact_at_the_bounds() {
        for (m, k, n) in [(3usize, 1536usize, 8usize), (2, 1537, 9)] {
            let limit = a_max(k.next_multiple_of(2));
            // Each row and each column holds its largest value, so both
            // scales are 1 and the values are the integers given.
            let x: Vec<f32> = (0..m * k)
                .map(|i| (if i % 7 == 1 { limit - 1 } else { limit }) as f32)
                .collect();
            let w: Vec<f32> = (0..k * n)
                .map(|i| (if i % 5 == 1 { W_MAX - 1 } else { W_MAX }) as f32)
                .collect();
            let q = QuantMatrix::new(&w, k, n);
            let ours = q.matmul(&x, m, None);
            let mut largest = 0i64;
            for r in 0..m {
                for c in 0..n {
                    let exact: i64 = (0..k)
                        .map(|i| x[r * k + i] as i64 * w[i * n + c] as i64)
                        .sum();
                    largest = largest.max(exact);
                    assert_eq!(ours[r * n + c], exact as f32, "({r}, {c}) of {m}x{k}x{n}");
                }
            }
            assert!(largest as f64 > 0.99 * i32::MAX as f64, "{largest}");
        }
    }

    /// The build's lanes (SSE2 here, simd128 in the page) give exactly the
    /// plain-integer reference's bits, rounding included.
    #[test]
    fn the_simd_lanes_give_the_reference_bits() {
        for (m, k, n) in [
            (1usize, 2usize, 8usize),
            (5, 7, 9),
            (9, 384, 40),
            (4, 1537, 16),
        ] {
            // Each row's largest value is the quantization limit, so the
            // scale is 1 and the halves are exact ties: they must round alike.
            let limit = a_max(k.next_multiple_of(2)) as f32;
            let x: Vec<f32> = values(m * k, 5)
                .iter()
                .enumerate()
                .map(|(i, v)| match i % k {
                    0 => limit,
                    c if c % 3 == 0 => (i % 17) as f32 - 8.5,
                    _ => v * 100.0,
                })
                .collect();
            let q = QuantMatrix::new(&values(k * n, 6), k, n);
            let simd = q.matmul_with::<Native>(&x, m, None);
            let scalar = q.matmul_with::<Scalar>(&x, m, None);
            assert_eq!(simd, scalar, "{m}x{k}x{n}");
        }
    }

    /// NaN or infinity in a row gives NaN outputs for that row only; a
    /// subnormal row gives the bias.
    #[test]
    fn bad_rows_stay_visible_and_tiny_rows_stay_finite() {
        let (k, n) = (4, 8);
        let q = QuantMatrix::new(&values(k * n, 9), k, n);
        let x = [
            1.0,
            f32::NAN,
            0.5,
            0.25,
            f32::INFINITY,
            1.0,
            1.0,
            1.0,
            1e-40,
            -1e-40,
            0.0,
            1e-42,
            0.5,
            -0.5,
            0.25,
            1.0,
        ];
        let bias = [2.0; 8];
        let out = q.matmul(&x, 4, Some(&bias));
        assert!(out[..2 * n].iter().all(|v| v.is_nan()));
        assert_eq!(&out[2 * n..3 * n], &bias);
        assert!(out[3 * n..].iter().all(|v| v.is_finite()));
    }

    /// A NaN or infinite weight makes its column NaN, not zero.
    #[test]
    fn bad_weights_stay_visible() {
        let (k, n) = (3, 4);
        let mut w = values(k * n, 4);
        w[n + 1] = f32::NAN;
        w[2 * n + 3] = f32::NEG_INFINITY;
        let out = QuantMatrix::new(&w, k, n).matmul(&values(2 * k, 8), 2, None);
        for row in out.chunks(n) {
            assert!(row[0].is_finite() && row[2].is_finite());
            assert!(row[1].is_nan() && row[3].is_nan(), "{row:?}");
        }
    }

    #[test]
    fn zero_rows_and_columns_stay_zero() {
        let (m, k, n) = (2, 4, 3);
        let w = [0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.5, 0.0];
        let x = [0.0; 8];
        let q = QuantMatrix::new(&w, k, n);
        assert_eq!(
            q.matmul(&x, m, Some(&[1.0, 2.0, 3.0])),
            [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
        );
    }
}
