"""One account over many symbols: ``threadx.simulate(close, entries, exits,
cash_sharing=True, size=..., size_type=...)``, vectorbt's ``Portfolio.from_signals(...,
group_by=True, cash_sharing=True, call_seq="auto")``. The rules are docs/portfolios.md's."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import pandas as pd

from . import _tables, _threadx
from ._inputs import _bools, _datetime_ms, _f64, _opt_float

#: What ``size_type`` may be (vectorbt's names and meanings).
SIZE_TYPES = ("percent", "value", "targetpercent")


def simulate_portfolio(
    close: Any,
    entries: Any,
    exits: Any,
    *,
    size: Optional[float],
    size_type: Optional[str],
    lot: Optional[float],
    min_size: Optional[float],
    init_cash: float,
    fee: float,
    slippage: float,
    periods_per_year: Optional[float],
    details: bool,
) -> pd.DataFrame:
    """The one account's metrics row (index ``["portfolio"]``); with ``details``, its
    ``equity``, ``cash``, ``positions`` and ``trades`` in ``attrs``."""
    prices = _f64(close, "close", "close")
    if prices.ndim != 2:
        raise ValueError(
            f"close has shape {prices.shape}: with cash_sharing=True it is one column per symbol, (bars, symbols)"
        )
    signals = {}
    for name, value in (("entries", entries), ("exits", exits)):
        array = _bools(value, name)
        if array.ndim == 1 and prices.shape[1] == 1:
            array = array.reshape(-1, 1)
        if array.shape != prices.shape:
            raise ValueError(f"{name} has shape {array.shape}; close has {prices.shape} (bars, symbols)")
        signals[name] = array
    kind = "percent" if size_type is None else str(size_type).lower()
    if kind not in SIZE_TYPES:
        raise ValueError(f"size_type={size_type!r}: one of {', '.join(SIZE_TYPES)}")
    index = close.index if isinstance(close, pd.DataFrame) else pd.RangeIndex(prices.shape[0], name="bar")
    symbols = close.columns if isinstance(close, pd.DataFrame) else pd.RangeIndex(prices.shape[1], name="symbol")
    times = _datetime_ms(index, "close") if isinstance(index, pd.DatetimeIndex) else None
    table, record = _threadx.simulate_portfolio(
        np.ascontiguousarray(prices),
        np.ascontiguousarray(signals["entries"]),
        np.ascontiguousarray(signals["exits"]),
        size=1.0 if size is None else float(size),
        size_type=kind,
        lot=_opt_float(lot),
        min_size=0.0 if min_size is None else float(min_size),
        init_cash=float(init_cash),
        fee=fee,
        slippage=float(slippage),
        periods_per_year=_opt_float(periods_per_year),
        times=times,
        details=bool(details),
    )
    frame = _tables.frame(table)
    frame.index = pd.Index(["portfolio"], name="account")
    frame.attrs["device"] = "cpu"
    if record is not None:
        frame.attrs["equity"] = pd.Series(record["equity"], index=index, name="equity")
        frame.attrs["cash"] = pd.Series(record["cash"], index=index, name="cash")
        frame.attrs["positions"] = pd.DataFrame(record["positions"], index=index, columns=symbols)
        frame.attrs["trades"] = _trades(record["trades"], index, symbols)
    return frame


def _trades(raw: Dict[str, Any], bars: pd.Index, symbols: pd.Index) -> pd.DataFrame:
    """The trades in the order filled, indexed by ``trade``: symbol, entry and exit
    (``bars`` at their bars, and the bars; an open trade's exit is missing), units,
    prices, fees, profit in cash and return on the cash spent."""
    entry_bar = np.asarray(raw["entry_bar"])
    exit_bar = np.asarray(raw["exit_bar"])
    closed = exit_bar >= 0
    exit_time = pd.Series(bars.take(np.where(closed, exit_bar, 0))).where(closed)
    trades = pd.DataFrame(
        {
            "symbol": symbols.take(np.asarray(raw["symbol"])),
            "entry_time": bars.take(entry_bar),
            "entry_bar": entry_bar,
            "exit_time": exit_time.to_numpy(),
            "exit_bar": pd.array(np.where(closed, exit_bar, 0), dtype="Int64", copy=True),
            "size": raw["size"],
            "entry_price": raw["entry_price"],
            "exit_price": raw["exit_price"],
            "entry_fees": raw["entry_fees"],
            "exit_fees": raw["exit_fees"],
            "pnl": raw["pnl"],
            "return": raw["return"],
        }
    )
    trades.loc[~closed, "exit_bar"] = pd.NA
    trades.index.name = "trade"
    return trades
