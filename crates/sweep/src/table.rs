//! A sweep's tables (results, trials, blocks) as columnar files: Parquet (zstd) or Arrow
//! IPC, chosen by the output's extension, written and read back with arrow-rs. Integers
//! stay integers, choices are text, and an empty CSV field (NaN) is a null. The CSV forms
//! of the same tables stay where they are (`rows.rs`, byte for byte as before).

use crate::error::{SweepError, io_error};
use arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, Int64Builder, RecordBatch, RecordBatchReader, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use threadx_profile_store::AtomicFile;

/// The format of a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Csv,
    /// Apache Parquet, zstd-compressed.
    Parquet,
    /// Arrow IPC file (Feather v2).
    Arrow,
}

impl TableFormat {
    /// The format an output path asks for by its extension (any case): `.parquet` or
    /// `.pq`, `.arrow`, `.feather` or `.ipc`; anything else is CSV.
    pub fn of(path: &Path) -> Self {
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        match ext.as_str() {
            "parquet" | "pq" => Self::Parquet,
            "arrow" | "feather" | "ipc" => Self::Arrow,
            _ => Self::Csv,
        }
    }

    /// The format of an existing file, by its first bytes (CSV when it is neither
    /// columnar magic).
    pub fn sniff(path: &Path) -> Result<Self, SweepError> {
        let mut head = [0u8; 6];
        let mut file = std::fs::File::open(path).map_err(io_error(path))?;
        let mut got = 0;
        while got < head.len() {
            match file.read(&mut head[got..]).map_err(io_error(path))? {
                0 => break,
                n => got += n,
            }
        }
        Ok(match &head[..got] {
            h if h.starts_with(b"PAR1") => Self::Parquet,
            h if h.starts_with(b"ARROW1") => Self::Arrow,
            _ => Self::Csv,
        })
    }

    pub fn is_columnar(self) -> bool {
        self != Self::Csv
    }

    fn name(self) -> &'static str {
        match self {
            Self::Csv => "CSV",
            Self::Parquet => "Parquet",
            Self::Arrow => "Arrow IPC",
        }
    }
}

/// A column's type: 64-bit integers, 64-bit floats (NaN stored as null) or text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnType {
    Int,
    Float,
    Text,
}

impl ColumnType {
    fn arrow(self) -> DataType {
        match self {
            Self::Int => DataType::Int64,
            Self::Float => DataType::Float64,
            Self::Text => DataType::Utf8,
        }
    }
}

/// A table's columns: names and types, in order.
pub(crate) type Columns = Vec<(String, ColumnType)>;

/// One value of a row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cell<'a> {
    Int(i64),
    Float(f64),
    Text(&'a str),
}

#[derive(Debug)]
enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
}

enum Sink {
    Parquet(ArrowWriter<AtomicFile>),
    Arrow(arrow::ipc::writer::FileWriter<AtomicFile>),
}

/// Rows written into a columnar file, a row group (a record batch) every
/// [`ROWS_PER_GROUP`] rows; the file appears whole at [`ColumnarWriter::finish`] or not
/// at all.
pub(crate) struct ColumnarWriter {
    path: PathBuf,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    sink: Sink,
}

impl std::fmt::Debug for ColumnarWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnarWriter").field("path", &self.path).field("rows", &self.rows).finish_non_exhaustive()
    }
}

/// Rows per row group: large enough that zstd and the column statistics pay, small
/// enough that a group's builders stay a few MB.
pub(crate) const ROWS_PER_GROUP: usize = 1 << 16;

impl ColumnarWriter {
    pub(crate) fn create(path: &Path, format: TableFormat, columns: &Columns) -> Result<Self, SweepError> {
        let fields: Vec<Field> = columns.iter().map(|(name, t)| Field::new(name, t.arrow(), true)).collect();
        let schema = Arc::new(Schema::new(fields));
        let file = AtomicFile::create(path).map_err(io_error(path))?;
        let failed = |e: &dyn std::fmt::Display| SweepError::Results(format!("{}: {e}", path.display()));
        let sink = match format {
            TableFormat::Parquet => {
                let props = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).map_err(|e| failed(&e))?))
                    .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
                    .build();
                Sink::Parquet(ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| failed(&e))?)
            }
            TableFormat::Arrow => {
                Sink::Arrow(arrow::ipc::writer::FileWriter::try_new(file, &schema).map_err(|e| failed(&e))?)
            }
            TableFormat::Csv => return Err(SweepError::Results(format!("{}: CSV is not columnar", path.display()))),
        };
        let builders = columns
            .iter()
            .map(|(_, t)| match t {
                ColumnType::Int => Builder::Int(Int64Builder::with_capacity(ROWS_PER_GROUP)),
                ColumnType::Float => Builder::Float(Float64Builder::with_capacity(ROWS_PER_GROUP)),
                ColumnType::Text => Builder::Text(StringBuilder::new()),
            })
            .collect();
        Ok(Self { path: path.to_owned(), schema, builders, rows: 0, sink })
    }

    /// Appends one row: a cell per column, of the column's type.
    pub(crate) fn push(&mut self, cells: &[Cell<'_>]) -> Result<(), SweepError> {
        debug_assert_eq!(cells.len(), self.builders.len());
        for (builder, cell) in self.builders.iter_mut().zip(cells) {
            match (builder, *cell) {
                (Builder::Int(b), Cell::Int(v)) => b.append_value(v),
                (Builder::Float(b), Cell::Float(v)) if v.is_nan() => b.append_null(),
                (Builder::Float(b), Cell::Float(v)) => b.append_value(v),
                (Builder::Text(b), Cell::Text(v)) => b.append_value(v),
                (b, c) => unreachable!("a {c:?} cell in a {b:?} column"),
            }
        }
        self.rows += 1;
        if self.rows == ROWS_PER_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SweepError> {
        if self.rows == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(|b| match b {
                Builder::Int(b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Float(b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Text(b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect();
        let failed = |e: &dyn std::fmt::Display| SweepError::Results(format!("{}: {e}", self.path.display()));
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| failed(&e))?;
        match &mut self.sink {
            Sink::Parquet(w) => w.write(&batch).map_err(|e| failed(&e))?,
            Sink::Arrow(w) => w.write(&batch).map_err(|e| failed(&e))?,
        }
        self.rows = 0;
        Ok(())
    }

    /// Writes the last rows and the footer, then puts the file in place.
    pub(crate) fn finish(mut self) -> Result<(), SweepError> {
        self.flush()?;
        let failed = |e: &dyn std::fmt::Display| SweepError::Results(format!("{}: {e}", self.path.display()));
        let file = match self.sink {
            Sink::Parquet(w) => w.into_inner().map_err(|e| failed(&e))?,
            Sink::Arrow(w) => w.into_inner().map_err(|e| failed(&e))?,
        };
        file.commit().map_err(io_error(&self.path))
    }
}

/// The rows of a columnar table file, batch by batch, its columns checked against the
/// table's.
pub(crate) struct ColumnarReader {
    path: PathBuf,
    batches: Box<dyn Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>> + Send>,
    batch: Option<RecordBatch>,
    row: usize,
}

impl std::fmt::Debug for ColumnarReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnarReader").field("path", &self.path).field("row", &self.row).finish_non_exhaustive()
    }
}

impl ColumnarReader {
    /// Opens `path` (a Parquet or Arrow IPC file) as a table of `columns`; `what` names
    /// the table in the error when its columns differ.
    pub(crate) fn open(path: &Path, columns: &Columns, what: &str) -> Result<Self, SweepError> {
        let format = TableFormat::sniff(path)?;
        let unreadable = |e: &dyn std::fmt::Display| {
            SweepError::Results(format!("{}: not a readable {} file: {e}", path.display(), format.name()))
        };
        let file = std::fs::File::open(path).map_err(io_error(path))?;
        let (schema, batches): (SchemaRef, Box<dyn Iterator<Item = _> + Send>) = match format {
            TableFormat::Parquet => {
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .and_then(|b| b.with_batch_size(ROWS_PER_GROUP).build())
                    .map_err(|e| unreadable(&e))?;
                (reader.schema(), Box::new(reader))
            }
            TableFormat::Arrow => {
                let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
                    .map_err(|e| unreadable(&e))?;
                (reader.schema(), Box::new(reader))
            }
            TableFormat::Csv => return Err(unreadable(&"it is not columnar")),
        };
        let found: Vec<(String, DataType)> =
            schema.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect();
        let expected: Vec<(String, DataType)> = columns.iter().map(|(n, t)| (n.clone(), t.arrow())).collect();
        if found != expected {
            let list =
                |c: &[(String, DataType)]| c.iter().map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join(", ");
            return Err(SweepError::Results(format!(
                "{}: not {what} (its columns are {}; expected {})",
                path.display(),
                list(&found),
                list(&expected)
            )));
        }
        Ok(Self { path: path.to_owned(), batches, batch: None, row: 0 })
    }

    /// The next row, or `None` at the end.
    pub(crate) fn next_row(&mut self) -> Result<Option<RowRef<'_>>, SweepError> {
        while self.batch.as_ref().is_none_or(|b| self.row >= b.num_rows()) {
            match self.batches.next() {
                None => return Ok(None),
                Some(batch) => {
                    let batch = batch.map_err(|e| SweepError::Results(format!("{}: {e}", self.path.display())))?;
                    self.batch = Some(batch);
                    self.row = 0;
                }
            }
        }
        let row = self.row;
        self.row += 1;
        Ok(self.batch.as_ref().map(|batch| RowRef { batch, row }))
    }
}

/// One row of a batch being read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowRef<'a> {
    batch: &'a RecordBatch,
    row: usize,
}

impl RowRef<'_> {
    /// Column `c`'s integer (an Int column; a null is `None`).
    pub(crate) fn int(&self, c: usize) -> Option<i64> {
        let a = self.batch.column(c).as_primitive::<Int64Type>();
        a.is_valid(self.row).then(|| a.value(self.row))
    }

    /// Column `c`'s float (a Float column; a null is NaN).
    pub(crate) fn float(&self, c: usize) -> f64 {
        let a = self.batch.column(c).as_primitive::<Float64Type>();
        if a.is_valid(self.row) { a.value(self.row) } else { f64::NAN }
    }

    /// Column `c`'s text (a Text column; a null is `None`).
    pub(crate) fn text(&self, c: usize) -> Option<&str> {
        let a = self.batch.column(c).as_string::<i32>();
        a.is_valid(self.row).then(|| a.value(self.row))
    }
}
