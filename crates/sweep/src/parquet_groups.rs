//! Parquet results written as row groups of exactly [`ROWS_PER_GROUP`] rows (the last one
//! shorter), whatever produced the rows: each group is encoded alone, a few at a time on
//! the host's pool, and the groups' column chunks are joined in order. A file's bytes are
//! a function of its rows alone, not of the chunks, threads, devices, shards or resumes
//! that made them.

use crate::error::{SweepError, file_error, io_error};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{KeyValue, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use threadx_profile_store::{AtomicFile, Staged};

/// Rows per row group: large enough that zstd and the column statistics pay, small
/// enough that a group's builders stay a few MB.
pub(crate) const ROWS_PER_GROUP: usize = 1 << 16;

/// The writer properties of our Parquet: zstd level 1, row groups of [`ROWS_PER_GROUP`],
/// no dictionary for the columns named in `plain` (a key or a float metric has about as
/// many values as rows: their dictionaries were 12 % of a Parquet run's CPU and then given
/// up for plain pages anyway).
fn parquet_properties(kv: Option<Vec<KeyValue>>, plain: &[String]) -> Result<WriterProperties, SweepError> {
    let level = ZstdLevel::try_new(1).map_err(|e| SweepError::Results(e.to_string()))?;
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
        .set_key_value_metadata(kv);
    for name in plain {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name.as_str()), false);
    }
    Ok(builder.build())
}

/// Rows pushed as record batches of [`ROWS_PER_GROUP`] rows, each a row group of the file.
pub(crate) struct ParquetGroups<W: Write + Send> {
    name: String,
    schema: SchemaRef,
    props: WriterProperties,
    /// Groups waiting to be encoded, as many as the pool has threads.
    waiting: Vec<RecordBatch>,
    join: ParquetJoin<W>,
}

impl<W: Write + Send> ParquetGroups<W> {
    /// A Parquet table of `schema` written into `sink`, its `plain` columns without
    /// dictionaries; `name` names it in errors.
    pub(crate) fn new(sink: W, name: &str, schema: SchemaRef, plain: &[String]) -> Result<Self, SweepError> {
        let props = parquet_properties(None, plain)?;
        Ok(Self { name: name.to_owned(), schema, props, waiting: Vec::new(), join: ParquetJoin::new(sink, name) })
    }

    /// The next row group's rows (every group but the last holds [`ROWS_PER_GROUP`]).
    pub(crate) fn write(&mut self, batch: RecordBatch) -> Result<(), SweepError> {
        self.waiting.push(batch);
        if self.waiting.len() >= rayon::current_num_threads() {
            self.encode_waiting()?;
        }
        Ok(())
    }

    fn encode_waiting(&mut self) -> Result<(), SweepError> {
        let (name, schema, props) = (&self.name, &self.schema, &self.props);
        let encoded: Vec<Result<Bytes, SweepError>> =
            self.waiting.par_iter().map(|batch| encode(name, schema, props, Some(batch))).collect();
        self.waiting.clear();
        for table in encoded {
            self.join.append(table?)?;
        }
        Ok(())
    }

    /// Writes the last groups and the footer; the sink.
    pub(crate) fn finish(mut self) -> Result<W, SweepError> {
        self.encode_waiting()?;
        if !self.join.has_groups() {
            // No rows: the table of no row group, with its schema.
            let empty = encode(&self.name, &self.schema, &self.props, None)?;
            self.join.append(empty)?;
        }
        self.join.finish()
    }
}

/// `batch` as a Parquet file of its own (of no row group without one); `name` names the
/// table in errors.
fn encode(
    name: &str,
    schema: &SchemaRef,
    props: &WriterProperties,
    batch: Option<&RecordBatch>,
) -> Result<Bytes, SweepError> {
    let failed = |e: &dyn std::fmt::Display| file_error(name, e);
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone())).map_err(|e| failed(&e))?;
    if let Some(batch) = batch {
        writer.write(batch).map_err(|e| failed(&e))?;
    }
    Ok(Bytes::from(writer.into_inner().map_err(|e| failed(&e))?))
}

/// Parquet files (each a whole file's bytes, of one schema) joined into one without
/// decoding or compressing anything again: their row groups' column chunks are copied as
/// they are.
pub(crate) struct ParquetJoin<W: Write + Send> {
    name: String,
    sink: Option<W>,
    writer: Option<SerializedFileWriter<W>>,
    groups: usize,
}

impl<W: Write + Send> ParquetJoin<W> {
    pub(crate) fn new(sink: W, name: &str) -> Self {
        Self { name: name.to_owned(), sink: Some(sink), writer: None, groups: 0 }
    }

    /// Whether a row group was appended.
    pub(crate) fn has_groups(&self) -> bool {
        self.groups > 0
    }

    /// Appends the row groups of `table`; the first table's schema and metadata are the file's.
    pub(crate) fn append(&mut self, table: Bytes) -> Result<(), SweepError> {
        let failed = |e: &dyn std::fmt::Display| file_error(&self.name, e);
        let metadata = ParquetMetaDataReader::new().parse_and_finish(&table).map_err(|e| failed(&e))?;
        let writer = match (&mut self.writer, self.sink.take()) {
            (Some(w), _) => w,
            (None, Some(sink)) => {
                let kv = metadata.file_metadata().key_value_metadata().cloned();
                let schema = metadata.file_metadata().schema_descr().root_schema_ptr();
                let props = Arc::new(parquet_properties(kv, &[])?);
                self.writer.insert(SerializedFileWriter::new(sink, schema, props).map_err(|e| failed(&e))?)
            }
            (None, None) => return Err(failed(&"the file was already finished")),
        };
        for group in metadata.row_groups() {
            let mut out = writer.next_row_group().map_err(|e| failed(&e))?;
            for column in group.columns() {
                let close = ColumnCloseResult {
                    bytes_written: column.compressed_size() as u64,
                    rows_written: group.num_rows() as u64,
                    metadata: column.clone(),
                    bloom_filter: None,
                    column_index: None,
                    offset_index: None,
                };
                out.append_column(&table, close).map_err(|e| failed(&e))?;
            }
            out.close().map_err(|e| failed(&e))?;
            self.groups += 1;
        }
        Ok(())
    }

    /// Writes the footer; the sink. A join that was given no table is an error.
    pub(crate) fn finish(self) -> Result<W, SweepError> {
        let Some(writer) = self.writer else { return Err(file_error(&self.name, &"no table to join")) };
        writer.into_inner().map_err(|e| file_error(&self.name, &e))
    }
}

impl ParquetJoin<AtomicFile> {
    /// A join into the file at `path`, which appears whole when staged and committed.
    pub(crate) fn create(path: &Path) -> Result<Self, SweepError> {
        Ok(Self::new(AtomicFile::create(path).map_err(io_error(path))?, &path.display().to_string()))
    }

    /// Writes the footer beside the file's place, its rename left to the caller; `None`
    /// when nothing was appended (the caller writes an empty table instead).
    pub(crate) fn stage(self) -> Result<Option<Staged>, SweepError> {
        if self.writer.is_none() {
            return Ok(None);
        }
        let path = std::path::PathBuf::from(&self.name);
        self.finish()?.stage().map(Some).map_err(io_error(&path))
    }
}
