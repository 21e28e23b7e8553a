//! The model's data, compiled in (`core/data/recall/`, written by
//! `scripts/build-recall-model-usem3.py`, whose docstring gives the formats) and parsed
//! once: the SentencePiece pieces and scores, the normaliser's table, the 4-bit token
//! table, the dense weights (stored int8 per output column, held as f32) and the
//! background vectors.

use std::collections::HashMap;

/// Width of the token table and of a sentence vector.
pub const DIMS: usize = 512;

pub static PIECES: &[u8] = include_bytes!("../../../data/recall/pieces.bin");
pub static NORMALIZE: &[u8] = include_bytes!("../../../data/recall/normalize.bin");
static TABLE: &[u8] = include_bytes!("../../../data/recall/table.bin");
static DENSE: &[u8] = include_bytes!("../../../data/recall/dense.bin");
static BACKGROUND: &[u8] = include_bytes!("../../../data/recall/background.bin");

/// A data file that does not parse (the files are compiled in, so this is a build fault).
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("{file}: the magic is not {magic}")]
    Magic {
        file: &'static str,
        magic: &'static str,
    },
    #[error("{file}: cut short at byte {at}")]
    Truncated { file: &'static str, at: usize },
    #[error("{file}: a piece or key is not UTF-8")]
    Utf8 { file: &'static str },
    #[error("dense.bin: tensor {name} is missing or not {rows} x {cols}")]
    Tensor {
        name: &'static str,
        rows: usize,
        cols: usize,
    },
}

/// A little-endian reader over one compiled-in file.
pub struct Reader {
    file: &'static str,
    bytes: &'static [u8],
    at: usize,
}

impl Reader {
    /// Checks the four-byte magic and starts after it.
    pub fn open(
        file: &'static str,
        bytes: &'static [u8],
        magic: &'static str,
    ) -> Result<Self, WeightsError> {
        if bytes.get(..4) != Some(magic.as_bytes()) {
            return Err(WeightsError::Magic { file, magic });
        }
        Ok(Self { file, bytes, at: 4 })
    }

    pub fn take(&mut self, n: usize) -> Result<&'static [u8], WeightsError> {
        let out = (self.at.checked_add(n))
            .and_then(|end| self.bytes.get(self.at..end))
            .ok_or(WeightsError::Truncated {
                file: self.file,
                at: self.at,
            })?;
        self.at += n;
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, WeightsError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, WeightsError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<usize, WeightsError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    pub fn f32(&mut self) -> Result<f32, WeightsError> {
        let b = self.take(4)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn str(&mut self, n: usize) -> Result<&'static str, WeightsError> {
        let file = self.file;
        std::str::from_utf8(self.take(n)?).map_err(|_| WeightsError::Utf8 { file })
    }

    pub fn f32s(&mut self, n: usize) -> Result<Vec<f32>, WeightsError> {
        let b = self.take(n.saturating_mul(4))?;
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// The token table: the control pieces' rows exact, 4-bit rows for the stored pieces,
/// `<unk>`'s row for the others.
#[derive(Debug)]
pub struct TokenTable {
    /// Rows of pieces `0 .. exact.len()` (`<unk>`, `<s>`, `</s>`).
    exact: Vec<Vec<f32>>,
    /// The piece id of each 4-bit row, ascending.
    ids: Vec<u32>,
    /// Per row: f32 minimum, f32 step, `DIMS / 2` bytes of codes.
    rows: &'static [u8],
}

const ROW_BYTES: usize = 8 + DIMS / 2;

impl TokenTable {
    fn parse() -> Result<Self, WeightsError> {
        let mut r = Reader::open("table.bin", TABLE, "SKBT")?;
        let (_pieces, exact, n, dims) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        if dims != DIMS || exact == 0 {
            return Err(WeightsError::Tensor {
                name: "table",
                rows: exact,
                cols: DIMS,
            });
        }
        let exact = (0..exact).map(|_| r.f32s(DIMS)).collect::<Result<_, _>>()?;
        let ids = r.take(n.saturating_mul(4))?;
        let ids = ids
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let rows = r.take(n.saturating_mul(ROW_BYTES))?;
        Ok(Self { exact, ids, rows })
    }

    /// Writes piece `id`'s row into `out` (`DIMS` values).
    pub fn row(&self, id: u32, out: &mut [f32]) {
        let exact = usize::try_from(id).ok().and_then(|i| self.exact.get(i));
        let stored = self.ids.binary_search(&id).ok();
        let row = stored.and_then(|r| self.rows.get(r * ROW_BYTES..(r + 1) * ROW_BYTES));
        let (Some(row), None) = (row, exact) else {
            // A control piece, or a piece without a row: `<unk>`'s.
            let v = exact.or(self.exact.first()).map_or(&[][..], Vec::as_slice);
            out.iter_mut().zip(v).for_each(|(o, x)| *o = *x);
            return;
        };
        let lo = f32::from_le_bytes([row[0], row[1], row[2], row[3]]);
        let step = f32::from_le_bytes([row[4], row[5], row[6], row[7]]);
        for (pair, b) in out.chunks_exact_mut(2).zip(&row[8..]) {
            pair[0] = lo + f32::from(b & 15) * step;
            pair[1] = lo + f32::from(b >> 4) * step;
        }
    }
}

/// A dense matrix, row-major `[rows][cols]` (inputs by outputs).
#[derive(Debug)]
struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

/// The network's weights, named as the export names them.
#[derive(Debug)]
pub struct Weights {
    pub table: TokenTable,
    /// The dense tensors by name, taken out by the network as it is assembled.
    tensors: HashMap<&'static str, Matrix>,
    /// Unit vectors of real skill descriptions: the z-score background.
    pub background: Vec<Vec<f32>>,
}

impl Weights {
    pub fn parse() -> Result<Self, WeightsError> {
        let mut r = Reader::open("dense.bin", DENSE, "SKBD")?;
        let mut tensors = HashMap::new();
        for _ in 0..r.u32()? {
            let len = usize::from(r.u8()?);
            let name = r.str(len)?;
            let (rows, cols, kind) = (r.u32()?, r.u32()?, r.u8()?);
            let data = if kind == 1 {
                let scales = r.f32s(cols)?;
                let q = r.take(rows.saturating_mul(cols))?;
                q.chunks_exact(cols.max(1))
                    .flat_map(|row| {
                        row.iter()
                            .zip(&scales)
                            .map(|(b, s)| f32::from(i8::from_le_bytes([*b])) * s)
                    })
                    .collect()
            } else {
                r.f32s(rows.saturating_mul(cols))?
            };
            tensors.insert(name, Matrix { rows, cols, data });
        }
        let mut r = Reader::open("background.bin", BACKGROUND, "SKBB")?;
        let (n, dims) = (r.u32()?, r.u32()?);
        let background = (0..n).map(|_| r.f32s(dims)).collect::<Result<_, _>>()?;
        Ok(Self {
            table: TokenTable::parse()?,
            tensors,
            background,
        })
    }

    /// Takes tensor `name`, checked to be `rows x cols` (a vector is `1 x cols`).
    pub fn take(
        &mut self,
        name: &'static str,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<f32>, WeightsError> {
        self.tensors
            .remove(name)
            .filter(|m| m.rows == rows && m.cols == cols && m.data.len() == rows * cols)
            .map(|m| m.data)
            .ok_or(WeightsError::Tensor { name, rows, cols })
    }
}
