//! What a run keeps for the overfitting statistics, on disk and in memory: each
//! checkpoint chunk's blocks and Sharpe ratios beside its rows (`chunk-N.blocks`, f64 little
//! endian with their XXH3-64 checksum after them, written before the rows so that a chunk
//! with rows has its blocks), read back on resume; and the blocks table (`--blocks-out`:
//! CSV, or Parquet or Arrow by its extension).

use super::SweepBlocks;
use crate::chunk_file::checksum;
use crate::error::{SweepError, io_error};
use crate::runner::ChunkResult;
use crate::table::{Cell, ColumnType, ColumnarWriter, TableFormat};
use std::io::Write;
use std::path::{Path, PathBuf};
use threadx_backtest::BlockCuts;
use threadx_profile_store::{AtomicFile, Staged, write_held_file};

/// The blocks file beside a checkpoint chunk's rows.
pub(crate) fn blocks_path(chunk: &Path) -> PathBuf {
    chunk.with_extension("blocks")
}

/// Writes a finished chunk's blocks and Sharpe ratios: per combo its Sharpe ratio, then
/// its blocks. Not synced ([`write_held_file`]): a crash that loses them leaves a file that
/// fails its checksum, and resume runs the chunk again.
pub(crate) fn write_chunk_blocks(path: &Path, r: &ChunkResult, cuts: &BlockCuts) -> Result<(), SweepError> {
    let bytes = blocks_bytes(r.metrics.iter().map(|m| m.sharpe), &r.blocks, cuts);
    write_held_file(path, &bytes).map_err(io_error(path))
}

/// The bytes of a blocks file: `sharpe` and `blocks` (per combo, in order), f64 little
/// endian, then their checksum.
pub(crate) fn blocks_bytes(sharpe: impl ExactSizeIterator<Item = f64>, blocks: &[f64], cuts: &BlockCuts) -> Vec<u8> {
    let per = cuts.stats_len();
    let mut bytes = Vec::with_capacity(sharpe.len() * (per + 1) * 8 + 8);
    for (sharpe, blocks) in sharpe.zip(blocks.chunks_exact(per)) {
        bytes.extend(sharpe.to_le_bytes());
        for v in blocks {
            bytes.extend(v.to_le_bytes());
        }
    }
    let sum = checksum(&bytes);
    bytes.extend(sum.to_le_bytes());
    bytes
}

fn damaged(path: &Path, why: &str) -> SweepError {
    SweepError::Results(format!("{}: {why}: the file was changed on disk", path.display()))
}

/// A chunk's blocks file's bytes (its combos' Sharpe ratios and blocks), checksum checked.
pub(crate) fn verified_blocks(path: &Path) -> Result<Vec<u8>, SweepError> {
    let mut bytes = std::fs::read(path).map_err(io_error(path))?;
    let Some((data, sum)) = bytes.split_last_chunk::<8>() else { return Err(damaged(path, "no checksum")) };
    if checksum(data) != u64::from_le_bytes(*sum) {
        return Err(damaged(path, "its blocks do not match their checksum"));
    }
    bytes.truncate(bytes.len() - 8);
    Ok(bytes)
}

/// Reads a chunk's blocks back for its `combos`, or why they cannot be trusted.
pub(crate) fn read_chunk_blocks(path: &Path, combos: Vec<u64>, cuts: &BlockCuts) -> Result<SweepBlocks, SweepError> {
    let (sharpe, blocks) = read_blocks(path, combos.len(), cuts)?;
    Ok(SweepBlocks { combos, blocks, sharpe, untradeable: 0 })
}

/// Reads a blocks file of [`blocks_bytes`] back for `count` combos: their Sharpe ratios
/// and their blocks, or why they cannot be trusted.
pub(crate) fn read_blocks(path: &Path, count: usize, cuts: &BlockCuts) -> Result<(Vec<f64>, Vec<f64>), SweepError> {
    let data = verified_blocks(path)?;
    let per = cuts.stats_len() + 1;
    if data.len() != count * per * 8 {
        return Err(damaged(path, &format!("it does not hold its {count} combos")));
    }
    let values = data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let (mut sharpe, mut blocks) = (Vec::with_capacity(count), Vec::with_capacity(count * (per - 1)));
    for (i, v) in values.enumerate() {
        if i % per == 0 { sharpe.push(v) } else { blocks.push(v) }
    }
    Ok((sharpe, blocks))
}

/// Writes the blocks as CSV: `combo,block,bars,sum_r,sum_r2`, one row per combo and
/// block, in combo order (numbers in Rust's shortest round-trip form); or the same
/// columns in Parquet or Arrow when the path's extension names one. Staged: the run puts
/// it in place with its other outputs.
pub(crate) fn write_blocks_csv(path: &Path, kept: &SweepBlocks, cuts: &BlockCuts) -> Result<Staged, SweepError> {
    let bars = cuts.bars();
    let rows = kept.combos.iter().zip(kept.blocks.chunks_exact(cuts.stats_len()));
    let format = TableFormat::of(path);
    if format.is_columnar() {
        let columns = ["combo", "block", "bars", "sum_r", "sum_r2"]
            .iter()
            .zip([ColumnType::Key, ColumnType::Int, ColumnType::Int, ColumnType::Float, ColumnType::Float])
            .map(|(n, t)| ((*n).to_owned(), t))
            .collect();
        let mut file = ColumnarWriter::create(path, format, &columns)?;
        for (&combo, blocks) in rows {
            for (k, b) in blocks.chunks_exact(2).enumerate() {
                let (combo, k, bars) = (Cell::Int(combo as i64), Cell::Int(k as i64), Cell::Int(bars as i64));
                file.push(&[combo, k, bars, Cell::Float(b[0]), Cell::Float(b[1])])?;
            }
        }
        return file.stage();
    }
    let mut file = AtomicFile::create(path).map_err(io_error(path))?;
    let mut text = String::from("combo,block,bars,sum_r,sum_r2\n");
    for (combo, blocks) in rows {
        for (k, b) in blocks.chunks_exact(2).enumerate() {
            use std::fmt::Write as _;
            let _ = writeln!(text, "{combo},{k},{bars},{},{}", b[0], b[1]);
        }
        if text.len() > 1 << 20 {
            file.write_all(text.as_bytes()).map_err(io_error(path))?;
            text.clear();
        }
    }
    file.write_all(text.as_bytes()).map_err(io_error(path))?;
    file.stage().map_err(io_error(path))
}
