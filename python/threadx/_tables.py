"""The native module's tables into pandas: each is an Arrow table (the columns, types and
values of the CLI's Parquet file of it) that pyarrow imports through the Arrow C stream
interface and turns into a DataFrame; choices and symbols become categoricals."""

from __future__ import annotations

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
