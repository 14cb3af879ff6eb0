"""Random OHLC bars and random signals of both sides: the data of the comparisons with
vectorbt (tests/test_market.py) and of its benchmark (benchmarks/market_vs_vectorbt.py)."""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import pandas as pd


def ohlc(bars: int, seed: int, freq: str = "h") -> pd.DataFrame:
    """A random walk whose opens gap away from the previous close."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, bars)))
    previous = np.concatenate([[close[0]], close[:-1]])
    open_ = previous * np.exp(rng.normal(0, 0.004, bars))
    high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.006, bars))
    low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.006, bars))
    index = pd.date_range("2024-01-01", periods=bars, freq=freq, name="timestamp")
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close}, index=index)


def signals(bars: int, columns: int, seed: int, rates: Tuple[float, float] = (0.02, 0.08)) -> Dict[str, np.ndarray]:
    """Random entries and exits of both sides, each column at its own rate between
    `rates`, with no two on one bar of one column."""
    rng = np.random.default_rng(seed)
    per_column = np.linspace(rates[0], rates[1], columns)
    entries, exits, short_entries, short_exits = (rng.random((bars, columns)) < per_column for _ in range(4))
    both = entries & short_entries
    entries &= ~both
    short_entries &= ~both
    exits &= ~(entries | short_entries)
    short_exits &= ~(entries | short_entries)
    return {"entries": entries, "exits": exits, "short_entries": short_entries, "short_exits": short_exits}
