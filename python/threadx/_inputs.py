"""Market data and arguments into what the native module takes: bars checked by the
engine, float64 and boolean arrays, epoch milliseconds."""

from __future__ import annotations

import os
from typing import Any, Callable, List, Mapping, Optional, Protocol, Tuple, Union

import numpy as np
import pandas as pd

from . import _threadx

class ArrowTable(Protocol):
    """An Arrow table: a pyarrow Table or RecordBatch, a polars DataFrame, anything that
    exports an Arrow C stream."""

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...


#: What the functions accept as market data.
Data = Union[pd.DataFrame, Mapping[str, Any], str, "os.PathLike[str]", ArrowTable]


def _bars(data: Data) -> Tuple[_threadx.Bars, pd.Index]:
    """The bars of `data`, checked by the engine, and the index results take."""
    _refuse_series(data)
    if isinstance(data, (str, os.PathLike)):
        bars = _threadx.Bars.load(os.fspath(data))
        return bars, _utc_index(bars.timestamps())
    if isinstance(data, pd.DataFrame):
        names = [str(c) for c in data.columns]
        return _frame_bars("DataFrame", names, lambda i: data.iloc[:, i], data.index), data.index
    if isinstance(data, Mapping):
        names = [str(k) for k in data.keys()]
        values = list(data.values())
        if not values:
            raise ValueError("data is an empty dict: no columns (a dict of arrays by column) and no symbols")
        if all(_is_table(v) for v in values):
            raise ValueError(
                f"data is a dict of {len(values)} symbols' data ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): "
                "a universe, where this takes one data set; pass one of them, or portfolio=True (backtest, search) "
                "for one account over them all; sweep() runs a universe symbol by symbol"
            )
        bars = _frame_bars("dict", names, lambda i: values[i], None)
        return bars, _utc_index(bars.timestamps())
    stream = _arrow_stream(data)
    if stream is not None:
        bars = _threadx.Bars.from_arrow(f"{type(data).__name__} (Arrow)", stream)
        return bars, _utc_index(bars.timestamps())
    raise TypeError(
        "data must be a DataFrame, an Arrow table (pyarrow, polars), a dict of arrays, a file path or "
        f"synthetic(...); got {type(data).__name__}"
    )


def _refuse_series(data: Any) -> None:
    """A Series is one column; bars need the frame (it would pass as an Arrow array)."""
    if isinstance(data, pd.Series):
        raise TypeError(
            f"data is a Series (one column, {data.name!r}): pass the DataFrame with open, high, low and close "
            "columns; for your own signals on closes alone, threadx.simulate(close, entries, exits) takes a Series"
        )


def _market(data: Data) -> Union[Tuple[_threadx.Bars, pd.Index], _threadx.Universe]:
    """One data set's bars and index (as `_bars`), or a universe of symbols: a dict of
    frames (Arrow tables, paths) by symbol, a long frame or Arrow table whose `symbol`
    column holds several symbols, a folder or a glob pattern."""
    _refuse_series(data)
    if isinstance(data, (str, os.PathLike)):
        return _one_or_many(_threadx.load_market(os.fspath(data)))
    if isinstance(data, pd.DataFrame):
        column = next((c for c in data.columns if str(c).lower() == "symbol"), None)
        if column is not None and data[column].nunique(dropna=False) > 1:
            if data[column].isna().any():
                row = int(np.flatnonzero(data[column].isna().to_numpy())[0])
                raise ValueError(f"DataFrame, row {row}, column `{column}`: no symbol")
            groups = data.groupby(column, sort=True)
            symbols = [(str(name), _bars(frame.drop(columns=column))[0]) for name, frame in groups]
            return _threadx.Universe.from_bars("DataFrame", symbols)
        if column is not None:
            data = data.drop(columns=column)
    if isinstance(data, Mapping) and data and all(_is_table(v) for v in data.values()):
        return _threadx.Universe.from_bars("dict", [(str(k), _bars(v)[0]) for k, v in data.items()])
    stream = _arrow_stream(data)
    if stream is not None:
        return _one_or_many(_threadx.market_from_arrow(f"{type(data).__name__} (Arrow)", stream))
    return _bars(data)


def _one_or_many(
    market: Union[_threadx.Bars, _threadx.Universe],
) -> Union[Tuple[_threadx.Bars, pd.Index], _threadx.Universe]:
    if isinstance(market, _threadx.Universe):
        return market
    return market, _utc_index(market.timestamps())


def _is_table(value: Any) -> bool:
    """Whether a dict's value is a symbol's whole data (not one column of a dict of arrays)."""
    if isinstance(value, (pd.Series, np.ndarray, list, tuple)):
        return False
    return isinstance(value, (pd.DataFrame, str, os.PathLike)) or _arrow_stream_capable(value)


def _arrow_stream_capable(data: Any) -> bool:
    return hasattr(data, "__arrow_c_stream__") or callable(getattr(data, "to_arrow", None))


def _arrow_stream(data: Any) -> Optional[bytes]:
    """An Arrow table's columns as one Arrow IPC stream (the engine reads it as it reads
    an Arrow file), or None when `data` is no Arrow table: a pyarrow Table or RecordBatch,
    or anything with `__arrow_c_stream__` or `to_arrow()` (polars)."""
    if not _arrow_stream_capable(data):
        return None
    try:
        import pyarrow as pa
    except ImportError as e:
        raise TypeError(f"an Arrow table ({type(data).__name__}) needs pyarrow installed: pip install pyarrow") from e
    table = data.to_arrow() if callable(getattr(data, "to_arrow", None)) else pa.table(data)
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _frame_bars(origin: str, names: List[str], column: Callable[[int], Any], index: Optional[pd.Index]) -> _threadx.Bars:
    if isinstance(index, pd.DatetimeIndex):
        # The index is the time column: passed as a named first column, it wins.
        (_, *prices), volume = _threadx.columns_of(origin, ["timestamp", *names])
        prices = [p - 1 for p in prices]
        volume = None if volume is None else volume - 1
        times = _datetime_ms(index, origin)
    else:
        (time_at, *prices), volume = _threadx.columns_of(origin, names)
        times = _times(column(time_at), origin, names[time_at])
    o, h, l, c = (_f64(column(i), origin, names[i]) for i in prices)
    v = None if volume is None else _f64(column(volume), origin, names[volume])
    return _threadx.Bars.from_arrays(origin, times, o, h, l, c, v)


def _datetime_ms(values: Any, origin: str) -> np.ndarray:
    index = pd.DatetimeIndex(values)
    if index.hasnans:
        row = int(np.flatnonzero(index.isna())[0])
        raise ValueError(f"{origin}, row {row}, column `timestamp`: NaT is not a time")
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    ns = index.as_unit("ns").asi8 if hasattr(index, "as_unit") else index.asi8
    return np.floor_divide(ns, 1_000_000)


def _times(values: Any, origin: str, name: str) -> np.ndarray:
    """Epoch ms from a time column: datetimes, epoch numbers (s, ms, µs, ns by magnitude,
    as in CSV files) or date-time strings."""
    dtype = getattr(values, "dtype", None)
    if dtype is not None and (pd.api.types.is_datetime64_any_dtype(dtype)):
        return _datetime_ms(values, origin)
    if dtype is not None and pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return _threadx.epoch_ms(_f64(values, origin, name), origin, name)
    try:
        parsed = pd.to_datetime(pd.Series(values), utc=True)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{origin}, column `{name}`: {e}") from None
    return _datetime_ms(pd.DatetimeIndex(parsed), origin)


def _f64(values: Any, origin: str, name: str) -> np.ndarray:
    """float64 numbers: a view where the input already is float64 (no copy)."""
    try:
        if isinstance(values, (pd.Series, pd.DataFrame)):
            return values.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.asarray(values, dtype=np.float64)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{origin}{_first_not_a_number(values)}, column `{name}`: not numbers ({e})") from None


def _first_not_a_number(values: Any) -> str:
    """`, row R` of the first value that is no number (the error is rare: a slow look is fine)."""
    flat = pd.Series(np.asarray(values, dtype=object).ravel())
    bad = flat.notna() & pd.to_numeric(flat, errors="coerce").isna()
    return f", row {int(np.flatnonzero(bad.to_numpy())[0])}" if bad.any() else ""


def _by_symbol(value: Any, close: Any, name: str) -> Any:
    """``value`` laid out as ``close`` where both are frames (one column per symbol): its
    columns put in close's order, as pandas aligns by label; a symbol one has and the
    other lacks, or other bars, is an error naming them. Arrays are taken as they are."""
    if not (isinstance(value, pd.DataFrame) and isinstance(close, pd.DataFrame)):
        return value
    _same_bars(value, close, name)
    if value.columns.equals(close.columns):
        return value
    missing = [c for c in close.columns if c not in value.columns]
    extra = [c for c in value.columns if c not in close.columns]
    if missing or extra or value.columns.has_duplicates:
        raise ValueError(
            f"{name} has columns {list(value.columns)}; close has {list(close.columns)}: one column per symbol, "
            f"the same symbols (missing: {missing}, not in close: {extra})"
        )
    return value[close.columns]


def _same_bars(value: Any, close: Any, name: str) -> None:
    """Refuses ``value``, a Series or frame of one row per bar, whose index is not
    ``close``'s (both pandas): pandas would align them by label, and taking the rows by
    position would trade other bars' signals. Arrays are taken by position."""
    if not (isinstance(value, (pd.Series, pd.DataFrame)) and isinstance(close, (pd.Series, pd.DataFrame))):
        return
    if not value.index.equals(close.index):
        raise ValueError(
            f"{name} has other bars (index) than close: give it close's index (e.g. {name}.reindex(close.index)), "
            "or an array to take it by position"
        )


def _bools(values: Any, name: str) -> np.ndarray:
    array = values.to_numpy() if isinstance(values, (pd.Series, pd.DataFrame)) else np.asarray(values)
    if array.dtype == np.bool_:
        return array
    if np.issubdtype(array.dtype, np.integer):
        return array != 0
    raise ValueError(f"{name} must be booleans (or 0/1 integers); got dtype {array.dtype}")


def _utc_index(ms: np.ndarray) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(ms, unit="ms", utc=True), name="timestamp")


def _opt_float(value: Optional[float]) -> Optional[float]:
    return None if value is None else float(value)


def _opt_int(name: str, value: Optional[int]) -> Optional[int]:
    """An optional whole number ≥ 0 (a count, a seed), never a bool."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a whole number ≥ 0 (got {value!r})")
    return int(value)


def _finite(name: str, value: Optional[float]) -> Optional[float]:
    """An optional float that must be a finite number (JSON holds no inf or NaN)."""
    number = _opt_float(value)
    if number is not None and not np.isfinite(number):
        raise ValueError(f"{name}={number}: a finite number is needed")
    return number


def _axis_value(name: str, value: Any) -> Union[int, float, str]:
    """One parameter value as the request takes it: a number stays a number, a name a name."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r}: expected a number or a name, not a boolean")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    raise ValueError(f"{name}={value!r}: expected a number or a name")


def _text(name: str, value: Any) -> str:
    """A backtest's parameter value as the CLI takes it: numbers in their shortest exact
    form. A dict (``params={...}``) or a list of values is named for what it was meant as."""
    if isinstance(value, Mapping):
        raise ValueError(
            f"{name}={value!r}: parameters are keywords, e.g. backtest(data, bb_period=20), "
            f"or backtest(data, **{name}) for a dict of them"
        )
    if isinstance(value, (list, tuple, range, np.ndarray, pd.Series)):
        raise ValueError(
            f"{name}={value!r}: a backtest takes one value per parameter; "
            f"sweep(data, grid={{{name!r}: [...]}}) runs each of several"
        )
    number = _axis_value(name, value)
    return repr(number) if isinstance(number, float) else str(number)
