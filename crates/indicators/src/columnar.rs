//! Market data in Parquet and Arrow IPC (Feather) files: the CSV's column rules
//! ([`find_columns`]) over Arrow columns, read with arrow-rs. A regular file is known by
//! its first bytes, whatever its name: `PAR1` (Parquet), `ARROW1` (an IPC file, Feather
//! v2) or an IPC stream's continuation marker; a pipe is read as CSV.

use crate::bar_columns::{epoch_int_to_ms, epoch_to_ms, parse_time};
use crate::error::DataError;
use crate::ohlcv::Ohlcv;
use crate::read_bars::{ReadBars, SYMBOL_COLUMN, SymbolColumn, find_columns};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Date32Type, Date64Type, SchemaRef, TimeUnit, TimestampMicrosecondType};
use arrow::datatypes::{TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::Arc;

/// The columnar formats read, told from a file's first bytes by [`Columnar::sniff`] (the
/// one place that looks at them: the data loader's and the results readers' alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columnar {
    Parquet,
    IpcFile,
    IpcStream,
}

impl Columnar {
    /// The format whose magic `path` starts with; `None`: not a columnar file (or too
    /// short to tell, which the CSV reader then refuses or reads).
    pub fn sniff(path: &Path) -> Result<Option<Self>, DataError> {
        let io = |source| DataError::Io { path: path.to_owned(), source };
        // A pipe or device (`--data <(…)`, /dev/stdin) is read once, as CSV: its first
        // bytes cannot be looked at and read again.
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Ok(None);
        }
        let mut head = [0u8; 8];
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut got = 0;
        while got < head.len() {
            match file.read(&mut head[got..]).map_err(io)? {
                0 => break,
                n => got += n,
            }
        }
        let head = &head[..got];
        if head.starts_with(b"FEA1") {
            return Err(DataError::Format {
                origin: path.display().to_string(),
                problem: "a Feather version 1 file: ThreadX reads Feather version 2 (Arrow IPC); write it again \
                          with pandas' df.to_feather(path) or pyarrow.feather.write_feather(table, path)"
                    .into(),
            });
        }
        Ok(if head.starts_with(b"PAR1") {
            Some(Self::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(Self::IpcFile)
        } else if head.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
            Some(Self::IpcStream)
        } else {
            None
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Parquet => "Parquet",
            Self::IpcFile => "Arrow IPC (Feather)",
            Self::IpcStream => "Arrow IPC stream",
        }
    }

    /// Reads the bars of the file at `path`. A damaged file is an error, never a panic:
    /// should the decoders panic on bytes they do not expect, that too is the file's error.
    pub(crate) fn read(self, path: &Path) -> Result<ReadBars, DataError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.read_unguarded(path))).unwrap_or_else(|_| {
            Err(DataError::Format {
                origin: path.display().to_string(),
                problem: format!("not a readable {} file: its decoder failed on damaged bytes", self.name()),
            })
        })
    }

    fn read_unguarded(self, path: &Path) -> Result<ReadBars, DataError> {
        let origin = path.display().to_string();
        let io = |source| DataError::Io { path: path.to_owned(), source };
        let unreadable = |e: &dyn std::fmt::Display| DataError::Format {
            origin: origin.clone(),
            problem: format!("not a readable {} file: {e}", self.name()),
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let mut bars = Columns::default();
        match self {
            Self::Parquet => {
                let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| unreadable(&e))?;
                let index = pandas_index(builder.schema());
                let wanted = Wanted::find(&origin, builder.schema(), index.as_deref())?;
                let mask = ProjectionMask::roots(builder.parquet_schema(), wanted.indices());
                let reader = builder.with_projection(mask).build().map_err(|e| unreadable(&e))?;
                // The projection keeps the file's column order: find them again in it.
                let mut wanted = None;
                for batch in reader {
                    let batch = batch.map_err(|e| unreadable(&e))?;
                    let found = match &wanted {
                        Some(w) => w,
                        None => wanted.insert(Wanted::find(&origin, &batch.schema(), index.as_deref())?),
                    };
                    bars.append(&origin, found, &batch)?;
                }
            }
            Self::IpcFile => {
                let reader =
                    arrow::ipc::reader::FileReader::try_new(BufReader::new(file), None).map_err(|e| unreadable(&e))?;
                let wanted = Wanted::find(&origin, &reader.schema(), pandas_index(&reader.schema()).as_deref())?;
                for batch in reader {
                    bars.append(&origin, &wanted, &batch.map_err(|e| unreadable(&e))?)?;
                }
            }
            Self::IpcStream => return read_stream(origin, BufReader::new(file), self),
        }
        bars.finish(origin)
    }
}

/// The bars of an Arrow IPC stream read from `input` (`format` names it in errors).
fn read_stream(origin: String, input: impl Read, format: Columnar) -> Result<ReadBars, DataError> {
    let unreadable = |e: &dyn std::fmt::Display| DataError::Format {
        origin: origin.clone(),
        problem: format!("not a readable {} file: {e}", format.name()),
    };
    let reader = arrow::ipc::reader::StreamReader::try_new(input, None).map_err(|e| unreadable(&e))?;
    let wanted = Wanted::find(&origin, &reader.schema(), pandas_index(&reader.schema()).as_deref())?;
    let mut bars = Columns::default();
    for batch in reader {
        bars.append(&origin, &wanted, &batch.map_err(|e| unreadable(&e))?)?;
    }
    bars.finish(origin)
}

/// Bars from an Arrow IPC stream in memory (a pyarrow or polars table passed from Python),
/// under the rules of [`Ohlcv::read_file`], of one symbol or of several (a `symbol`
/// column); `origin` names it in errors.
pub(crate) fn read_arrow_stream(origin: &str, stream: &[u8]) -> Result<ReadBars, DataError> {
    read_stream(origin.to_owned(), stream, Columnar::IpcStream)
}

/// The name pandas gives an unnamed index it writes into a Parquet or Feather file.
const PANDAS_INDEX: &str = "__index_level_0__";

/// The name of the one index column pandas recorded in a file's `pandas` metadata, if any.
fn pandas_index(schema: &SchemaRef) -> Option<String> {
    let meta: serde_json::Value = serde_json::from_str(schema.metadata().get("pandas")?).ok()?;
    match meta["index_columns"].as_array()?.as_slice() {
        [serde_json::Value::String(name)] => Some(name.clone()),
        _ => None,
    }
}

/// Where the columns a bar needs sit in a schema: time, open, high, low, close, then
/// volume and a `symbol` column when there are.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    bars: [usize; 5],
    volume: Option<usize>,
    symbol: Option<usize>,
}

impl Wanted {
    /// `index`: the name of pandas' index column, read from the file's metadata (the
    /// batches of a projection do not carry it).
    fn find(origin: &str, schema: &SchemaRef, index: Option<&str>) -> Result<Self, DataError> {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let (bars, volume) = match find_columns(origin, &names) {
            Ok(found) => found,
            // pandas' index (a DatetimeIndex, most often) is the time column: unnamed, or
            // named in the `pandas` metadata pandas writes beside the schema.
            Err(e) => {
                let index = names.iter().position(|n| *n == PANDAS_INDEX || Some(*n) == index);
                let Some(index) = index else { return Err(e) };
                let mut renamed = names.clone();
                renamed[index] = "timestamp";
                find_columns(origin, &renamed)?
            }
        };
        let symbol = names.iter().position(|n| n.eq_ignore_ascii_case(SYMBOL_COLUMN));
        Ok(Self { bars, volume, symbol })
    }

    fn indices(&self) -> Vec<usize> {
        self.bars.iter().copied().chain(self.volume).chain(self.symbol).collect()
    }
}

/// The arrays being filled, batch after batch, and each bar's symbol when there is a
/// `symbol` column.
#[derive(Debug, Default)]
struct Columns {
    timestamps: Vec<i64>,
    prices: [Vec<f64>; 4],
    volume: Vec<f64>,
    symbols: Option<SymbolColumn>,
}

impl Columns {
    fn append(&mut self, origin: &str, wanted: &Wanted, batch: &RecordBatch) -> Result<(), DataError> {
        let first_row = self.timestamps.len();
        let column = |i: usize| batch.column(i);
        let name = |i: usize| batch.schema().field(i).name().clone();
        let problem = |row: usize, column: String, problem: String| DataError::InvalidRow {
            origin: origin.to_owned(),
            row: first_row + row,
            column,
            problem,
        };
        let time = column(wanted.bars[0]);
        no_nulls(time, |row| problem(row, name(wanted.bars[0]), "no value (null)".into()))?;
        times(time, &mut self.timestamps, |row, p| problem(row, name(wanted.bars[0]), p))
            .map_err(|e| e.unwrap_or_else(|| type_error(origin, &name(wanted.bars[0]), time.data_type(), true)))?;
        for (k, &index) in wanted.bars[1..].iter().enumerate() {
            numbers(origin, &name(index), column(index), &mut self.prices[k], first_row)?;
        }
        match wanted.volume {
            Some(index) => numbers(origin, &name(index), column(index), &mut self.volume, first_row)?,
            None => self.volume.resize(self.timestamps.len(), 0.0),
        }
        if let Some(index) = wanted.symbol {
            let array = column(index);
            let text =
                cast(array, &DataType::Utf8).map_err(|_| type_error(origin, &name(index), array.data_type(), false))?;
            let symbols = self.symbols.get_or_insert_with(SymbolColumn::default);
            for (row, value) in text.as_string::<i32>().iter().enumerate() {
                match value.filter(|v| !v.is_empty()) {
                    Some(v) => symbols.push(v),
                    None => return Err(problem(row, name(index), "no symbol".into())),
                }
            }
        }
        Ok(())
    }

    fn finish(self, origin: String) -> Result<ReadBars, DataError> {
        if self.timestamps.is_empty() {
            return Err(DataError::Empty { origin });
        }
        let [open, high, low, close] = self.prices;
        let bars = Ohlcv::unchecked(origin, self.timestamps, open, high, low, close, self.volume);
        Ok(ReadBars { bars, lines: None, symbols: self.symbols })
    }
}

/// The error of a column whose type cannot hold what it should.
fn type_error(origin: &str, column: &str, found: &DataType, time: bool) -> DataError {
    let expected = if time { "timestamps, dates, epoch numbers or date-time text" } else { "numbers" };
    DataError::Format {
        origin: origin.to_owned(),
        problem: format!("column `{column}` holds {found}: expected {expected}"),
    }
}

/// Refuses the first null of `array` (row within the batch).
fn no_nulls(array: &ArrayRef, at: impl Fn(usize) -> DataError) -> Result<(), DataError> {
    match array.logical_nulls().filter(|n| n.null_count() > 0) {
        Some(nulls) => Err(at(nulls.iter().position(|valid| !valid).unwrap_or(0))),
        None => Ok(()),
    }
}

/// Appends a numeric column as f64 (a dictionary of numbers too, as pandas' categoricals).
fn numbers(origin: &str, name: &str, array: &ArrayRef, out: &mut Vec<f64>, first_row: usize) -> Result<(), DataError> {
    let numeric = match array.data_type() {
        DataType::Dictionary(_, values) => values.is_numeric(),
        t => t.is_numeric(),
    };
    if !numeric {
        return Err(type_error(origin, name, array.data_type(), false));
    }
    no_nulls(array, |row| DataError::InvalidRow {
        origin: origin.to_owned(),
        row: first_row + row,
        column: name.to_owned(),
        problem: "no value (null)".into(),
    })?;
    let values = cast(array, &DataType::Float64).map_err(|_| type_error(origin, name, array.data_type(), false))?;
    out.extend_from_slice(values.as_primitive::<arrow::datatypes::Float64Type>().values());
    Ok(())
}

/// `v` units of `per_ms`-th of a millisecond (`per_ms` > 1) as milliseconds, rounded
/// half up; or `v` units of `ms_per` milliseconds.
fn scaled_ms(v: i64, per_ms: i64, ms_per: i64) -> Option<i64> {
    if per_ms > 1 { v.checked_add(per_ms / 2).map(|v| v.div_euclid(per_ms)) } else { v.checked_mul(ms_per) }
}

/// Appends a time column as epoch milliseconds. `Err(None)`: a type that holds no times;
/// `Err(Some(_))`: a value that is none.
fn times(
    array: &ArrayRef,
    out: &mut Vec<i64>,
    at: impl Fn(usize, String) -> DataError,
) -> Result<(), Option<DataError>> {
    let overflow = |row: usize| Some(at(row, "the time is out of range".into()));
    let exact = |values: &mut dyn Iterator<Item = i64>, per_ms: i64, ms_per: i64, out: &mut Vec<i64>| {
        for (row, v) in values.enumerate() {
            out.push(scaled_ms(v, per_ms, ms_per).ok_or_else(|| overflow(row))?);
        }
        Ok(())
    };
    match array.data_type() {
        DataType::Timestamp(unit, _) => {
            let (mut values, per_ms, ms_per): (Box<dyn Iterator<Item = i64>>, i64, i64) = match unit {
                TimeUnit::Second => {
                    (Box::new(array.as_primitive::<TimestampSecondType>().values().iter().copied()), 1, 1000)
                }
                TimeUnit::Millisecond => {
                    (Box::new(array.as_primitive::<TimestampMillisecondType>().values().iter().copied()), 1, 1)
                }
                TimeUnit::Microsecond => {
                    (Box::new(array.as_primitive::<TimestampMicrosecondType>().values().iter().copied()), 1000, 1)
                }
                TimeUnit::Nanosecond => {
                    (Box::new(array.as_primitive::<TimestampNanosecondType>().values().iter().copied()), 1_000_000, 1)
                }
            };
            exact(&mut values, per_ms, ms_per, out)
        }
        DataType::Date32 => {
            exact(&mut array.as_primitive::<Date32Type>().values().iter().map(|&d| i64::from(d)), 1, 86_400_000, out)
        }
        DataType::Date64 => exact(&mut array.as_primitive::<Date64Type>().values().iter().copied(), 1, 1, out),
        t if t.is_integer() => {
            // As integers: an i64's digits are shown as they are, not rounded through f64.
            let values = cast(array, &DataType::Int64).map_err(|_| None)?;
            for (row, &v) in values.as_primitive::<arrow::datatypes::Int64Type>().values().iter().enumerate() {
                out.push(epoch_int_to_ms(v).map_err(|p| Some(at(row, p)))?);
            }
            Ok(())
        }
        t if t.is_numeric() => {
            let values = cast(array, &DataType::Float64).map_err(|_| None)?;
            for (row, &v) in values.as_primitive::<arrow::datatypes::Float64Type>().values().iter().enumerate() {
                out.push(epoch_to_ms(v).map_err(|p| Some(at(row, p)))?);
            }
            Ok(())
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
            let text = cast(array, &DataType::Utf8).map_err(|_| None)?;
            for (row, v) in text.as_string::<i32>().iter().enumerate() {
                out.push(parse_time(v.unwrap_or_default()).map_err(|p| Some(at(row, p)))?);
            }
            Ok(())
        }
        _ => Err(None),
    }
}

/// The bars as one record batch: `timestamp` (milliseconds, UTC), then open, high, low,
/// close and volume as f64: what [`Columnar::read`] reads back to the same bars.
fn bars_batch(bars: &Ohlcv) -> Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::array::{Float64Array, TimestampMillisecondArray};
    let time = TimestampMillisecondArray::from(bars.timestamps().to_vec()).with_timezone("UTC");
    let f = |s: &[f64]| Arc::new(Float64Array::from(s.to_vec())) as ArrayRef;
    RecordBatch::try_from_iter([
        ("timestamp", Arc::new(time) as ArrayRef),
        ("open", f(bars.open())),
        ("high", f(bars.high())),
        ("low", f(bars.low())),
        ("close", f(bars.close())),
        ("volume", f(bars.volume())),
    ])
}

impl Ohlcv {
    /// The bars as a Parquet file (zstd) or, with `parquet` false, an Arrow IPC file, in
    /// memory: the form [`Ohlcv::read_file`] reads back to the same bars.
    pub fn to_columnar(&self, parquet: bool) -> Result<Vec<u8>, DataError> {
        let failed =
            |e: &dyn std::fmt::Display| DataError::Format { origin: self.origin().to_owned(), problem: e.to_string() };
        let batch = bars_batch(self).map_err(|e| failed(&e))?;
        let mut out = Vec::new();
        if parquet {
            use parquet::basic::{Compression, ZstdLevel};
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .build();
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).map_err(|e| failed(&e))?;
            writer.write(&batch).map_err(|e| failed(&e))?;
            writer.close().map_err(|e| failed(&e))?;
        } else {
            let mut writer =
                arrow::ipc::writer::FileWriter::try_new(&mut out, &batch.schema()).map_err(|e| failed(&e))?;
            writer.write(&batch).map_err(|e| failed(&e))?;
            writer.finish().map_err(|e| failed(&e))?;
        }
        Ok(out)
    }
}
