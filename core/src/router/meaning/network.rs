//! The encoder's forward pass (USE-m3's DAN + CNN): each token's table row, projected
//! and layer-normalised; three convolutional n-gram branches (orders 2, 3 and 5 looking
//! 0, 1 and 2 tokens back, zeros past the sentence's edges), each two residual
//! convolutions with ReLU; the row and the branches layer-normalised together, summed
//! over the tokens then projected (the sum commutes with the projection), divided by the
//! square root of the length; a dense tail with ReLUs and skip projections, tanh, and
//! the L2 norm. The matrix products are `matrixmultiply`'s `sgemm`.

use super::weights::{Weights, WeightsError, DIMS};

/// Width of each n-gram branch.
const BRANCH: usize = 256;
/// Width of the dense tail's hidden layers.
const HIDDEN: usize = 320;
/// Width of the features summed over the tokens: the row and the three branches.
const FEATS: usize = DIMS + 3 * BRANCH;
/// (n-gram order, tokens looked back, names of w1, b1, w2, b2) of the branches.
const ORDERS: [(usize, usize, [&str; 4]); 3] = [
    (2, 0, ["w1_2", "b1_2", "w2_2", "b2_2"]),
    (3, 1, ["w1_3", "b1_3", "w2_3", "b2_3"]),
    (5, 2, ["w1_5", "b1_5", "w2_5", "b2_5"]),
];

/// One n-gram branch's two convolutions.
#[derive(Debug)]
struct Branch {
    order: usize,
    back: usize,
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

/// The weights arranged for the forward pass.
#[derive(Debug)]
pub struct Network {
    weights: Weights,
    proj: Vec<f32>,
    proj_b: Vec<f32>,
    ln_g_all: Vec<f32>,
    ln_b_all: Vec<f32>,
    branches: Vec<Branch>,
    ln_g: Vec<f32>,
    ln_b: Vec<f32>,
    cnn_w: Vec<f32>,
    cnn_b: Vec<f32>,
    d0: Vec<f32>,
    d1: Vec<f32>,
    d2: Vec<f32>,
    d3: Vec<f32>,
    p1: Vec<f32>,
    p3: Vec<f32>,
    eps: f32,
}

/// `c = a · b + beta c` for row-major `a` (m x k, rows `lda` apart: rows may overlap,
/// as the n-gram windows do; passed as `(a, lda)`), `b` (k x n), `c` (m x n).
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    (a, lda): (&[f32], usize),
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) {
    let fits = m == 0 || (m - 1) * lda + k <= a.len();
    if !(fits && k * n <= b.len() && m * n <= c.len()) {
        debug_assert!(false, "gemm: shapes do not fit");
        return;
    }
    if m == 1 {
        // One row (the pooled vector's dense tail): sgemm would pack all of `b` first,
        // which costs more than reading it once.
        vecmat(&a[..k], &b[..k * n], beta, &mut c[..n]);
        return;
    }
    // Strides fit isize: the slices are smaller than isize::MAX bytes.
    #[allow(clippy::cast_possible_wrap)]
    let (lda, n_s) = (lda as isize, n as isize);
    // SAFETY: sgemm reads `a` at rows 0..m (stride lda) and columns 0..k, `b` at k rows
    // of n, and writes `c` at m rows of n, all unit column stride; the check above keeps
    // every one of those offsets inside its slice (rows of `a` may overlap: sgemm only
    // reads them), and `c` does not alias `a` or `b` (a `&mut` borrow).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            lda,
            1,
            b.as_ptr(),
            n_s,
            1,
            beta,
            c.as_mut_ptr(),
            n_s,
            1,
        );
    }
}

/// `c = a · b + beta c` for one row `a` (k) and row-major `b` (k x n): each row of `b`
/// added in, scaled, in a loop the compiler vectorises.
#[inline(always)]
fn vecmat_body(a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    c.iter_mut().for_each(|v| *v *= beta);
    for (x, row) in a.iter().zip(b.chunks_exact(c.len().max(1))) {
        c.iter_mut().zip(row).for_each(|(v, w)| *v += x * w);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vecmat_avx2(a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    vecmat_body(a, b, beta, c);
}

fn vecmat(a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `vecmat_avx2` needs nothing but AVX2, which this CPU was just found to
        // have; the code is the same safe Rust as `vecmat_body`.
        unsafe { vecmat_avx2(a, b, beta, c) };
        return;
    }
    vecmat_body(a, b, beta, c);
}

/// Layer normalisation of each `width`-wide row of `x`, in place.
fn layernorm(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let var = row.iter().map(|v| v * v).sum::<f32>() / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inv * g + b;
        }
    }
}

fn relu(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = v.max(0.0));
}

fn add_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
}

impl Branch {
    /// The branch over `xs` (tokens x `BRANCH`), written into `out` (tokens x `BRANCH`).
    fn run(&self, xs: &[f32], tokens: usize, out: &mut [f32]) {
        let width = self.order * BRANCH;
        // Zeros before and after, so that token t's window is `order` consecutive rows
        // starting at row t of the padded buffer: one GEMM with overlapping rows.
        let pad = |rows: &[f32]| {
            let mut p = vec![0f32; (tokens + self.order - 1) * BRANCH];
            p[self.back * BRANCH..(self.back + tokens) * BRANCH].copy_from_slice(rows);
            p
        };
        let mut h = vec![0f32; tokens * BRANCH];
        gemm(
            tokens,
            width,
            BRANCH,
            (&pad(xs), BRANCH),
            &self.w1,
            0.0,
            &mut h,
        );
        add_bias(&mut h, &self.b1);
        relu(&mut h);
        h.iter_mut().zip(xs).for_each(|(v, x)| *v += x);
        gemm(
            tokens,
            width,
            BRANCH,
            (&pad(&h), BRANCH),
            &self.w2,
            0.0,
            out,
        );
        add_bias(out, &self.b2);
        relu(out);
        out.iter_mut().zip(&h).for_each(|(v, x)| *v += x);
    }
}

impl Network {
    pub fn new(mut w: Weights) -> Result<Self, WeightsError> {
        let mut branches = Vec::new();
        for (order, back, [w1, b1, w2, b2]) in ORDERS {
            branches.push(Branch {
                order,
                back,
                w1: w.take(w1, order * BRANCH, BRANCH)?,
                b1: w.take(b1, 1, BRANCH)?,
                w2: w.take(w2, order * BRANCH, BRANCH)?,
                b2: w.take(b2, 1, BRANCH)?,
            });
        }
        Ok(Self {
            proj: w.take("proj", DIMS, 3 * BRANCH)?,
            proj_b: w.take("proj_b", 1, 3 * BRANCH)?,
            ln_g_all: w.take("ln_g_all", 1, 3 * BRANCH)?,
            ln_b_all: w.take("ln_b_all", 1, 3 * BRANCH)?,
            ln_g: w.take("ln_g", 1, FEATS)?,
            ln_b: w.take("ln_b", 1, FEATS)?,
            cnn_w: w.take("cnn_W", FEATS, DIMS)?,
            cnn_b: w.take("cnn_b", 1, DIMS)?,
            d0: w.take("d0", DIMS, HIDDEN)?,
            d1: w.take("d1", HIDDEN, HIDDEN)?,
            p1: w.take("p1", DIMS, HIDDEN)?,
            d2: w.take("d2", HIDDEN, DIMS)?,
            p3: w.take("p3", HIDDEN, DIMS)?,
            d3: w.take("d3", DIMS, DIMS)?,
            eps: w.take("eps", 1, 1)?.first().copied().unwrap_or(1e-12),
            branches,
            weights: w,
        })
    }

    /// The background's unit vectors.
    pub fn background(&self) -> &[Vec<f32>] {
        &self.weights.background
    }

    /// The unit sentence vector of the piece ids `ids` (`<s>` and `</s>` included).
    pub fn encode(&self, ids: &[u32]) -> Vec<f32> {
        let t = ids.len().max(1);
        let mut feats = vec![0f32; t * FEATS];
        let mut emb = vec![0f32; t * DIMS];
        for (row, &id) in emb.chunks_exact_mut(DIMS).zip(ids) {
            self.weights.table.row(id, row);
        }
        let all = 3 * BRANCH;
        let mut x = vec![0f32; t * all];
        gemm(t, DIMS, all, (&emb, DIMS), &self.proj, 0.0, &mut x);
        add_bias(&mut x, &self.proj_b);
        layernorm(&mut x, all, &self.ln_g_all, &self.ln_b_all, self.eps);
        let mut xs = vec![0f32; t * BRANCH];
        let mut out = vec![0f32; t * BRANCH];
        for (i, branch) in self.branches.iter().enumerate() {
            for (dst, src) in xs.chunks_exact_mut(BRANCH).zip(x.chunks_exact(all)) {
                dst.copy_from_slice(&src[i * BRANCH..(i + 1) * BRANCH]);
            }
            branch.run(&xs, t, &mut out);
            let at = DIMS + i * BRANCH;
            for (dst, src) in feats.chunks_exact_mut(FEATS).zip(out.chunks_exact(BRANCH)) {
                dst[at..at + BRANCH].copy_from_slice(src);
            }
        }
        for (dst, src) in feats.chunks_exact_mut(FEATS).zip(emb.chunks_exact(DIMS)) {
            dst[..DIMS].copy_from_slice(src);
        }
        layernorm(&mut feats, FEATS, &self.ln_g, &self.ln_b, self.eps);
        let mut sum = vec![0f32; FEATS];
        for row in feats.chunks_exact(FEATS) {
            sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
        }
        let mut mean: Vec<f32> = self.cnn_b.iter().map(|b| b * t as f32).collect();
        gemm(1, FEATS, DIMS, (&sum, FEATS), &self.cnn_w, 1.0, &mut mean);
        let root = (t as f32).sqrt();
        mean.iter_mut().for_each(|v| *v /= root);
        self.tail(&mean)
    }

    /// The dense tail over the pooled vector, to a unit vector.
    fn tail(&self, mean: &[f32]) -> Vec<f32> {
        let mut y0 = vec![0f32; HIDDEN];
        gemm(1, DIMS, HIDDEN, (mean, DIMS), &self.d0, 0.0, &mut y0);
        relu(&mut y0);
        let mut y1 = vec![0f32; HIDDEN];
        gemm(1, DIMS, HIDDEN, (mean, DIMS), &self.p1, 0.0, &mut y1);
        gemm(1, HIDDEN, HIDDEN, (&y0, HIDDEN), &self.d1, 1.0, &mut y1);
        relu(&mut y1);
        let mut y2 = vec![0f32; DIMS];
        gemm(1, HIDDEN, DIMS, (&y1, HIDDEN), &self.d2, 0.0, &mut y2);
        relu(&mut y2);
        let mut z = vec![0f32; DIMS];
        gemm(1, HIDDEN, DIMS, (&y1, HIDDEN), &self.p3, 0.0, &mut z);
        gemm(1, DIMS, DIMS, (&y2, DIMS), &self.d3, 1.0, &mut z);
        z.iter_mut().for_each(|v| *v = v.tanh());
        let norm = z.iter().map(|v| v * v).sum::<f32>().max(self.eps).sqrt();
        z.iter_mut().for_each(|v| *v /= norm);
        z
    }
}
