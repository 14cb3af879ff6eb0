"""The native module's tables into pandas: each is an Arrow table (the columns, types and
values of the CLI's Parquet file of it) that pyarrow imports through the Arrow C stream
interface and turns into a DataFrame; choices and symbols become categoricals."""

from __future__ import annotations

from typing import Any, Dict

import pandas as pd
import pyarrow as pa

from . import _threadx


def frame(table: _threadx.Table) -> pd.DataFrame:
    """`table` as a DataFrame with a RangeIndex: integers int64, floats float64 (a null,
    the CSV's empty field, is NaN), times datetime64[ms, UTC], the categorical columns
    pandas categoricals with their categories in the engine's order."""
    out = pa.table(table).to_pandas()
    for name, categories in table.categories:
        out[name] = pd.Categorical(out[name], categories=categories)
    return out


#: Why a trade ended, the categories of a trades frame's ``exit_reason``.
EXIT_REASONS = ["signal", "stop", "trail", "take_profit", "max_bars", "reverse", "end"]
#: Which way a trade faced, the categories of a trades frame's ``side``.
SIDES = ["long", "short"]


def trades_frame(raw: Dict[str, Any], index: pd.Index) -> pd.DataFrame:
    """The native module's trades (columns of arrays) as a frame indexed by ``trade``:
    side, entry and exit times (``index`` at their bars), bars and prices, return and
    why each ended, sides and reasons categorical."""
    trades = pd.DataFrame(
        {
            "side": pd.Categorical(raw["side"], categories=SIDES),
            "entry_time": index.take(raw["entry_bar"]),
            "entry_bar": raw["entry_bar"],
            "entry_price": raw["entry_price"],
            "exit_time": index.take(raw["exit_bar"]),
            "exit_bar": raw["exit_bar"],
            "exit_price": raw["exit_price"],
            "return": raw["return"],
            "exit_reason": pd.Categorical(raw["exit_reason"], categories=EXIT_REASONS),
        },
    )
    trades.index.name = "trade"
    return trades
