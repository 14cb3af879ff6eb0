//! A sweep's tables (results, trials, blocks) as columnar files: Parquet (zstd) or Arrow
//! IPC, chosen by the output's extension, written and read back with arrow-rs. Integers
//! stay integers, choices are text, and an empty CSV field (NaN) is a null. The CSV forms
//! of the same tables stay where they are (`rows.rs`, byte for byte as before).

use crate::error::{SweepError, file_error, io_error};
use crate::parquet_groups::{ParquetGroups, ROWS_PER_GROUP};
use arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, Int64Builder, RecordBatch, RecordBatchReader, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::ChunkReader;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use threadx_indicators::{Columnar, DataError};
use threadx_profile_store::{AtomicFile, Staged};

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

    /// Refuses an output named for a format a table is not written in (`.xlsx`, `.json`,
    /// `.tsv`, `.gz`, …): [`Self::of`] would write CSV text under that name. Any other
    /// name (none, `.txt`, `.dat`, a device) is CSV.
    pub fn check_name(path: &Path) -> Result<(), String> {
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let what = match ext.as_str() {
            "gz" | "gzip" | "zst" | "zstd" | "bz2" | "xz" | "zip" | "7z" | "lz4" | "br" => {
                "a compressed file: tables are not compressed by their name (Parquet is zstd inside)"
            }
            "xlsx" | "xls" | "xlsm" | "ods" => "a spreadsheet: name it .csv (spreadsheets open it) or .parquet",
            "tsv" | "tab" => "tab-separated: tables are comma-separated CSV",
            "json" | "jsonl" | "ndjson" | "xml" | "html" | "htm" | "svg" | "png" | "toml" | "yaml" | "yml" => {
                "not a table's format"
            }
            "h5" | "hdf5" | "hdf" | "pkl" | "pickle" | "npy" | "npz" | "orc" | "avro" | "db" | "sqlite" | "duckdb" => {
                "a format ThreadX does not write"
            }
            _ => return Ok(()),
        };
        Err(format!(
            "{}: `.{ext}` is {what}; a table is written as CSV (.csv or any other name), Parquet (.parquet, .pq) or Arrow IPC (.arrow, .feather, .ipc), by its extension",
            path.display()
        ))
    }

    /// The format of an existing file, by its first bytes (`Columnar::sniff`): CSV when
    /// they are no Parquet or Arrow IPC file's, or when it is a pipe.
    pub fn sniff(path: &Path) -> Result<Self, SweepError> {
        match Columnar::sniff(path) {
            Ok(Some(Columnar::Parquet)) => Ok(Self::Parquet),
            Ok(Some(Columnar::IpcFile)) => Ok(Self::Arrow),
            // Tables are written as IPC files: a stream is no table of ours (its header says so).
            Ok(Some(Columnar::IpcStream) | None) => Ok(Self::Csv),
            Err(DataError::Io { path, source }) => Err(SweepError::Io { path, error: source }),
            Err(e) => Err(SweepError::Results(e.to_string())),
        }
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

/// A column's type: 64-bit integers (a key: every value its own, like a combo number;
/// or values that repeat, like a period), 64-bit floats (NaN stored as null), text, or
/// times (milliseconds, UTC; RFC 3339 in CSV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Key,
    Int,
    Float,
    Text,
    Time,
}

impl ColumnType {
    fn arrow(self) -> DataType {
        match self {
            Self::Key | Self::Int => DataType::Int64,
            Self::Float => DataType::Float64,
            Self::Text => DataType::Utf8,
            Self::Time => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
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
    Time(i64),
}

#[derive(Debug)]
enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
    Time(TimestampMillisecondBuilder),
}

enum Sink<W: Write + Send> {
    Parquet(Box<ParquetGroups<W>>),
    Arrow(Box<arrow::ipc::writer::FileWriter<W>>),
    /// The record batches themselves, kept in memory.
    Memory(Vec<RecordBatch>),
}

/// A table in memory: its schema and record batches, the columns a file of it would hold
/// (what Python's DataFrames are built from).
#[derive(Debug, Clone)]
pub struct ArrowTable {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl ArrowTable {
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// Rows written into a columnar table (a file or bytes in memory), a row group (a record
/// batch) every [`ROWS_PER_GROUP`] rows.
pub(crate) struct ColumnarWriter<W: Write + Send> {
    name: String,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    sink: Sink<W>,
}

impl<W: Write + Send> std::fmt::Debug for ColumnarWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnarWriter").field("name", &self.name).field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl<W: Write + Send> ColumnarWriter<W> {
    /// A table of `columns` written into `sink` in `format`; `name` names it in errors.
    pub(crate) fn new(sink: W, name: &str, format: TableFormat, columns: &Columns) -> Result<Self, SweepError> {
        let schema = Self::schema_of(columns);
        let failed = |e: &dyn std::fmt::Display| file_error(name, e);
        let sink = match format {
            TableFormat::Parquet => {
                // A key or a float metric has about as many values as rows: no dictionary.
                let plain: Vec<String> = columns
                    .iter()
                    .filter(|(_, t)| matches!(t, ColumnType::Key | ColumnType::Float))
                    .map(|(name, _)| name.clone())
                    .collect();
                Sink::Parquet(Box::new(ParquetGroups::new(sink, name, schema.clone(), &plain)?))
            }
            TableFormat::Arrow => {
                Sink::Arrow(Box::new(arrow::ipc::writer::FileWriter::try_new(sink, &schema).map_err(|e| failed(&e))?))
            }
            TableFormat::Csv => return Err(failed(&"CSV is not columnar")),
        };
        Ok(Self::with_sink(name, schema, columns, sink))
    }

    fn with_sink(name: &str, schema: SchemaRef, columns: &Columns, sink: Sink<W>) -> Self {
        let builders = columns
            .iter()
            .map(|(_, t)| match t {
                ColumnType::Key | ColumnType::Int => Builder::Int(Int64Builder::with_capacity(ROWS_PER_GROUP)),
                ColumnType::Float => Builder::Float(Float64Builder::with_capacity(ROWS_PER_GROUP)),
                ColumnType::Text => Builder::Text(StringBuilder::new()),
                ColumnType::Time => Builder::Time(TimestampMillisecondBuilder::new().with_timezone("UTC")),
            })
            .collect();
        Self { name: name.to_owned(), schema, builders, rows: 0, sink }
    }

    fn schema_of(columns: &Columns) -> SchemaRef {
        Arc::new(Schema::new(columns.iter().map(|(name, t)| Field::new(name, t.arrow(), true)).collect::<Vec<_>>()))
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
                (Builder::Time(b), Cell::Time(v)) => b.append_value(v),
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
                // Fresh builders at a group's size: a finished builder starts from no
                // capacity, and regrowing it by doubling faulted pages in on every group.
                Builder::Int(b) => {
                    Arc::new(std::mem::replace(b, Int64Builder::with_capacity(ROWS_PER_GROUP)).finish()) as ArrayRef
                }
                Builder::Float(b) => {
                    Arc::new(std::mem::replace(b, Float64Builder::with_capacity(ROWS_PER_GROUP)).finish()) as ArrayRef
                }
                Builder::Text(b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Time(b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect();
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| file_error(&self.name, &e))?;
        let written = match &mut self.sink {
            Sink::Parquet(w) => return w.write(batch).map(|()| self.rows = 0),
            Sink::Arrow(w) => w.write(&batch).map_err(|e| e.to_string()),
            Sink::Memory(batches) => {
                batches.push(batch);
                Ok(())
            }
        };
        written.map_err(|e| file_error(&self.name, &e))?;
        self.rows = 0;
        Ok(())
    }

    /// Writes the last rows and the footer; the sink.
    pub(crate) fn finish(mut self) -> Result<W, SweepError> {
        self.flush()?;
        let sink = match self.sink {
            Sink::Parquet(w) => return w.finish(),
            Sink::Arrow(w) => w.into_inner().map_err(|e| e.to_string()),
            Sink::Memory(_) => Err("a table in memory has no sink".to_owned()),
        };
        sink.map_err(|e| file_error(&self.name, &e))
    }
}

impl ColumnarWriter<std::io::Sink> {
    /// A table kept in memory as record batches; `name` names it in errors.
    pub(crate) fn in_memory(name: &str, columns: &Columns) -> Self {
        Self::with_sink(name, Self::schema_of(columns), columns, Sink::Memory(Vec::new()))
    }

    /// The rows pushed, as a table.
    pub(crate) fn into_table(mut self) -> Result<ArrowTable, SweepError> {
        self.flush()?;
        match self.sink {
            Sink::Memory(batches) => Ok(ArrowTable { schema: self.schema, batches }),
            _ => Err(file_error(&self.name, &"a file is no table in memory")),
        }
    }
}

impl ColumnarWriter<AtomicFile> {
    /// A table file at `path`, which appears whole at [`ColumnarWriter::commit`] or not at all.
    pub(crate) fn create(path: &Path, format: TableFormat, columns: &Columns) -> Result<Self, SweepError> {
        let file = AtomicFile::create(path).map_err(io_error(path))?;
        Self::new(file, &path.display().to_string(), format, columns)
    }

    /// Finishes the file and puts it in place.
    pub(crate) fn commit(self) -> Result<(), SweepError> {
        let name = PathBuf::from(&self.name);
        self.stage()?.commit().map_err(io_error(&name))
    }

    /// Finishes the file beside its place, its rename left to the caller.
    pub(crate) fn stage(self) -> Result<Staged, SweepError> {
        let name = PathBuf::from(&self.name);
        self.finish()?.stage().map_err(io_error(&name))
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
        let file = std::fs::File::open(path).map_err(io_error(path))?;
        match format {
            TableFormat::Parquet => Self::parquet(file, path, columns, what),
            TableFormat::Arrow => {
                let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
                    .map_err(|e| unreadable(path, format, &e))?;
                Self::checked(path, reader.schema(), Box::new(reader), columns, what)
            }
            TableFormat::Csv => Err(unreadable(path, format, &"it is not columnar")),
        }
    }

    /// A Parquet table in `source` (a file, or bytes in memory), named `path` in errors.
    pub(crate) fn parquet<R: ChunkReader + 'static>(
        source: R,
        path: &Path,
        columns: &Columns,
        what: &str,
    ) -> Result<Self, SweepError> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(source)
            .and_then(|b| b.with_batch_size(ROWS_PER_GROUP).build())
            .map_err(|e| unreadable(path, TableFormat::Parquet, &e))?;
        Self::checked(path, reader.schema(), Box::new(reader), columns, what)
    }

    /// The reader of `batches` once their `schema` is the table's `columns`.
    fn checked(
        path: &Path,
        schema: SchemaRef,
        batches: Box<dyn Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>> + Send>,
        columns: &Columns,
        what: &str,
    ) -> Result<Self, SweepError> {
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
            // Damaged bytes are the file's error, even where a decoder would panic on them.
            let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.batches.next()))
                .unwrap_or_else(|_| Some(Err(arrow::error::ArrowError::ParseError("a damaged page".into()))));
            match next {
                None => return Ok(None),
                Some(batch) => {
                    let batch = batch.map_err(|e| file_error(self.path.display(), &e))?;
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

fn unreadable(path: &Path, format: TableFormat, e: &dyn std::fmt::Display) -> SweepError {
    file_error(path.display(), &format_args!("not a readable {} file: {e}", format.name()))
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

/// Writes a table given as CSV text (a header line, then rows of plain fields) to `path`:
/// the text itself for a CSV path; for a Parquet or Arrow path the same columns typed by
/// `types` (one per column), each field read back from the text. The CSV is the one
/// formatter of such tables, so every format holds its values. An empty float field is a
/// null.
pub fn write_table(path: &Path, csv: &str, types: &[ColumnType]) -> Result<(), SweepError> {
    stage_table(path, csv, types)?.commit().map_err(io_error(path))
}

/// [`write_table`], the file finished beside its place, its rename left to the caller
/// (who puts a run's every output in place together).
pub(crate) fn stage_table(path: &Path, csv: &str, types: &[ColumnType]) -> Result<Staged, SweepError> {
    let format = TableFormat::of(path);
    if !format.is_columnar() {
        return threadx_profile_store::write_file_staged(path, csv.as_bytes()).map_err(io_error(path));
    }
    let columns = csv_columns(csv, types);
    let mut table = ColumnarWriter::create(path, format, &columns)?;
    push_csv(&mut table, &path.display().to_string(), csv, &columns)?;
    table.stage()
}

/// A table given as CSV text, typed by `types` as [`write_table`] types it, in memory.
pub(crate) fn table_of_csv(name: &str, csv: &str, types: &[ColumnType]) -> Result<ArrowTable, SweepError> {
    let columns = csv_columns(csv, types);
    let mut table = ColumnarWriter::in_memory(name, &columns);
    push_csv(&mut table, name, csv, &columns)?;
    table.into_table()
}

/// The columns of a CSV table: its header's names, typed by `types`.
fn csv_columns(csv: &str, types: &[ColumnType]) -> Columns {
    let header = csv.lines().next().unwrap_or_default();
    header.split(',').map(str::to_owned).zip(types.iter().copied()).collect()
}

/// Pushes the rows of CSV text (after its header) into `table` of `columns`; `name` names
/// it in errors.
fn push_csv<W: Write + Send>(
    table: &mut ColumnarWriter<W>,
    name: &str,
    csv: &str,
    columns: &Columns,
) -> Result<(), SweepError> {
    let mut cells = Vec::with_capacity(columns.len());
    for (row, line) in csv.lines().skip(1).enumerate() {
        let bad = |field: &str, column: &str| {
            SweepError::Results(format!("{name}: row {row}, column `{column}`: `{field}` is no value"))
        };
        cells.clear();
        for (field, (name, t)) in line.split(',').zip(columns) {
            cells.push(match t {
                ColumnType::Key | ColumnType::Int => Cell::Int(field.parse().map_err(|_| bad(field, name))?),
                ColumnType::Float if field.is_empty() => Cell::Float(f64::NAN),
                ColumnType::Float => Cell::Float(field.parse().map_err(|_| bad(field, name))?),
                ColumnType::Text => Cell::Text(field),
                ColumnType::Time => Cell::Time(
                    chrono::DateTime::parse_from_rfc3339(field).map_err(|_| bad(field, name))?.timestamp_millis(),
                ),
            });
        }
        if cells.len() != columns.len() {
            return Err(bad(line, "*"));
        }
        table.push(&cells)?;
    }
    Ok(())
}
