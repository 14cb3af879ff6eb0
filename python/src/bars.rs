//! Bars as Python hands them over ([`Bars`]: a `--data` source, an Arrow stream, numpy
//! arrays), checked as the CLI's loader checks them, and the header and time rules the
//! pandas side applies before it hands them over.

use crate::data_error;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use threadx_indicators::{DataError, Ohlcv, epoch_to_ms, find_columns};

/// Validated bars (timestamps in epoch milliseconds UTC, prices, volumes).
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct Bars {
    pub(crate) data: Arc<Ohlcv>,
    /// False when the timestamps are only positions (prices given without times): the
    /// bars per year are then unknown.
    pub(crate) timed: bool,
}

#[pymethods]
impl Bars {
    /// A CSV file or a synthetic spec (`synthetic:bars=N,seed=S[,market=fx]`), as `--data`.
    #[staticmethod]
    fn load(py: Python<'_>, source: String) -> PyResult<Self> {
        let data = py.detach(move || Ohlcv::load(&source)).map_err(data_error)?;
        Ok(Self { data: Arc::new(data), timed: true })
    }

    /// An Arrow IPC stream (a pyarrow or polars table), read as `--data` reads an Arrow file.
    #[staticmethod]
    fn from_arrow(py: Python<'_>, origin: String, stream: Vec<u8>) -> PyResult<Self> {
        let data = py.detach(move || Ohlcv::read_arrow_stream(&origin, &stream)).map_err(data_error)?;
        Ok(Self { data: Arc::new(data), timed: true })
    }

    /// Bars from arrays, checked as the CSV loader checks them (errors name the row).
    #[staticmethod]
    #[pyo3(signature = (origin, timestamps, open, high, low, close, volume=None))]
    fn from_arrays(
        origin: &str,
        timestamps: PyReadonlyArray1<'_, i64>,
        open: PyReadonlyArray1<'_, f64>,
        high: PyReadonlyArray1<'_, f64>,
        low: PyReadonlyArray1<'_, f64>,
        close: PyReadonlyArray1<'_, f64>,
        volume: Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<Self> {
        let n = timestamps.len()?;
        let volume = volume.map_or_else(|| vec![0.0; n], |v| v.as_array().to_vec());
        let data = Ohlcv::new(
            origin,
            timestamps.as_array().to_vec(),
            open.as_array().to_vec(),
            high.as_array().to_vec(),
            low.as_array().to_vec(),
            close.as_array().to_vec(),
            volume,
        )
        .map_err(data_error)?;
        Ok(Self { data: Arc::new(data), timed: true })
    }

    /// Closes (for `simulate`), with the open, high and low when given (else each is the
    /// close); without timestamps the bars are numbered and their bars per year unknown.
    #[staticmethod]
    #[pyo3(signature = (close, timestamps=None, open=None, high=None, low=None))]
    fn from_close(
        close: PyReadonlyArray1<'_, f64>,
        timestamps: Option<PyReadonlyArray1<'_, i64>>,
        open: Option<PyReadonlyArray1<'_, f64>>,
        high: Option<PyReadonlyArray1<'_, f64>>,
        low: Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<Self> {
        let close = close.as_array().to_vec();
        let timed = timestamps.is_some();
        let timestamps = timestamps.map_or_else(|| (0..close.len() as i64).collect(), |t| t.as_array().to_vec());
        let volume = vec![0.0; close.len()];
        let given = open.is_some();
        let or_close =
            |a: Option<PyReadonlyArray1<'_, f64>>| a.map_or_else(|| close.clone(), |a| a.as_array().to_vec());
        let (open, high, low) = if high.is_some() || low.is_some() {
            (or_close(open), or_close(high), or_close(low))
        } else {
            // Opens alone (next-open fills) give no range inside the bar (stops are checked
            // on closes): the bar spans its open and close.
            let open = or_close(open);
            let high = open.iter().zip(&close).map(|(o, c)| o.max(*c)).collect();
            let low = open.iter().zip(&close).map(|(o, c)| o.min(*c)).collect();
            (open, high, low)
        };
        let data = Ohlcv::new("close", timestamps, open, high, low, close, volume);
        let data = match data {
            // Open, high and low are the close here: name the one the user gave.
            Err(DataError::InvalidRow { origin, row, column, problem }) if column != "timestamp" && !given => {
                Err(DataError::InvalidRow { origin, row, column: "close".into(), problem })
            }
            other => other,
        };
        let data = data.map_err(data_error)?;
        Ok(Self { data: Arc::new(data), timed })
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __repr__(&self) -> String {
        format!("Bars({} bars of {})", self.data.len(), self.data.origin())
    }

    /// Where the bars came from (a path, a synthetic spec, `DataFrame`).
    #[getter]
    fn origin(&self) -> &str {
        self.data.origin()
    }

    /// Bars per year from the median spacing of the timestamps (a year of 365 days).
    #[getter]
    fn bars_per_year(&self) -> f64 {
        if self.timed { self.data.bars_per_year() } else { f64::NAN }
    }

    /// The bar times as a new array of epoch ms (int64).
    fn timestamps<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<i64>> {
        self.data.timestamps().to_vec().into_pyarray(py)
    }

    /// The columns as new arrays: `timestamp` (epoch ms, int64), open, high, low, close, volume.
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let d = &self.data;
        out.set_item("timestamp", self.timestamps(py))?;
        for (name, values) in
            [("open", d.open()), ("high", d.high()), ("low", d.low()), ("close", d.close()), ("volume", d.volume())]
        {
            out.set_item(name, values.to_vec().into_pyarray(py))?;
        }
        Ok(out)
    }
}

/// The positions of the time, open, high, low and close columns in `header`, and of
/// volume if there is one: the CSV loader's header rule.
#[pyfunction]
pub(crate) fn columns_of(origin: &str, header: Vec<String>) -> PyResult<(Vec<usize>, Option<usize>)> {
    let names: Vec<&str> = header.iter().map(String::as_str).collect();
    let (found, volume) = find_columns(origin, &names).map_err(data_error)?;
    Ok((found.to_vec(), volume))
}

/// Epoch numbers (s, ms, µs or ns, told apart by magnitude as in CSV files) as epoch ms.
#[pyfunction]
pub(crate) fn epoch_ms<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    origin: &str,
    column: &str,
) -> PyResult<Bound<'py, numpy::PyArray1<i64>>> {
    let out: Result<Vec<i64>, DataError> = values
        .as_array()
        .iter()
        .enumerate()
        .map(|(row, &v)| {
            epoch_to_ms(v).map_err(|problem| DataError::InvalidRow {
                origin: origin.to_owned(),
                row,
                column: column.to_owned(),
                problem,
            })
        })
        .collect();
    Ok(out.map_err(data_error)?.into_pyarray(py))
}
