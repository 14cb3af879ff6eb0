//! A sweep's tables handed to Python as Arrow: a [`Table`] exports its record batches
//! (the columns its Parquet file holds) through the Arrow C stream interface
//! (`__arrow_c_stream__`), which pyarrow, polars and pandas import without a copy through
//! text; the names of its categorical columns go along.

use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::RecordBatchIterator;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use threadx_backtest::ParamKind;
use threadx_sweep::{ArrowTable, SweepError, SweepSpec};

/// A table of a sweep's: rows, a search's trials, a universe's rows or by-combo lines,
/// walk-forward windows.
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct Table {
    table: ArrowTable,
    /// The text columns whose values are a few names, with the names in order (a choice
    /// parameter's, a universe's symbols): pandas' categoricals.
    categories: Vec<(String, Vec<String>)>,
}

impl Table {
    /// A table with no categorical column.
    pub(crate) fn plain(table: ArrowTable) -> Self {
        Self { table, categories: Vec::new() }
    }

    /// `table` of a sweep of `spec`, its choice parameters categorical, and its `symbol`
    /// column too when `symbols` name them.
    pub(crate) fn new(
        table: Result<ArrowTable, SweepError>,
        spec: &SweepSpec,
        symbols: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let table = table.map_err(crate::sweep_error)?;
        let mut categories: Vec<(String, Vec<String>)> =
            symbols.map(|s| ("symbol".to_owned(), s)).into_iter().collect();
        for p in spec.strategy().schema() {
            if let ParamKind::Choice(names) = &p.kind {
                categories.push((p.name.clone(), names.to_vec()));
            }
        }
        categories.retain(|(name, _)| table.schema().column_with_name(name).is_some());
        Ok(Self { table, categories })
    }
}

#[pymethods]
impl Table {
    /// The Arrow PyCapsule interface: the batches as an `ArrowArrayStream` capsule. The
    /// protocol lets a producer keep its own schema, so `requested_schema` is not applied.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        drop(requested_schema);
        let batches = self.table.batches().to_vec();
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), self.table.schema().clone());
        PyCapsule::new_with_value(py, FFI_ArrowArrayStream::new(Box::new(reader)), c"arrow_array_stream")
    }

    /// `[(column, names)]`: the categorical columns and their categories in order.
    #[getter]
    fn categories(&self) -> Vec<(String, Vec<String>)> {
        self.categories.clone()
    }

    fn __len__(&self) -> usize {
        self.table.num_rows()
    }
}
