"""A sweep over many symbols from Python: a dict of frames, a long frame and a long Arrow
table with a ``symbol`` column, and a folder of Parquet files give, symbol by symbol,
the rows of each symbol's own sweep; ``.attrs["by_combo"]`` holds their statistics,
computed here again from those rows."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import threadx

GRID = {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.0]}


def _symbols() -> dict:
    """Three symbols of different lengths; ETH's bars have gaps (every 7th left out)."""
    btc = threadx.synthetic(bars=3000, seed=1)
    eth = threadx.synthetic(bars=3500, seed=2)
    eth = eth[np.arange(len(eth)) % 7 != 3]
    sol = threadx.synthetic(bars=2500, seed=3).iloc[200:]
    return {"SOL": sol, "BTC": btc, "ETH": eth}


def _sweep(data) -> pd.DataFrame:
    return threadx.sweep(data, grid=GRID, device="cpu", progress=False)


def _check(rows: pd.DataFrame, symbols: dict) -> None:
    assert list(rows.index.names) == ["symbol", "combo"]
    assert list(rows.index.get_level_values("symbol").unique()) == sorted(symbols)
    for name, frame in symbols.items():
        pd.testing.assert_frame_equal(rows.loc[name], _sweep(frame), check_exact=True, obj=name)
    by_combo = rows.attrs["by_combo"]
    for combo, line in by_combo.iterrows():
        sharpe = [rows.loc[(name, combo), "sharpe"] for name in sorted(symbols)]
        values = [v for v in sharpe if not np.isnan(v)]
        mean = 0.0
        for v in values:
            mean += v
        assert line["symbols"] == len(values)
        assert line["mean_sharpe"] == mean / len(values)
        assert line["median_sharpe"] == float(np.median(values))
        assert line["min_sharpe"] == min(values)
        positive = sum(rows.loc[(name, combo), "total_return"] > 0 for name in symbols)
        assert line["positive_return_share"] == positive / len(symbols)
    assert list(by_combo.columns[:2]) == ["bb_period", "bb_std"]


def test_a_dict_of_frames_gives_each_symbols_own_sweep() -> None:
    symbols = _symbols()
    rows = _sweep(symbols)
    assert len(rows) == 3 * 6
    _check(rows, symbols)


def test_a_long_frame_and_a_long_arrow_table_give_the_same_rows(tmp_path) -> None:
    symbols = _symbols()
    want = _sweep(symbols)
    long = pd.concat([f.assign(symbol=name) for name, f in symbols.items()]).sort_index(kind="stable")
    pd.testing.assert_frame_equal(_sweep(long), want, check_exact=True)
    table = pa.Table.from_pandas(long.rename_axis("timestamp").reset_index())
    pd.testing.assert_frame_equal(_sweep(table), want, check_exact=True)
    # A folder of Parquet files, a symbol each, and a glob pattern over it.
    for name, frame in symbols.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    pd.testing.assert_frame_equal(_sweep(tmp_path), want, check_exact=True)
    matched = _sweep(str(tmp_path / "[BE]*.parquet"))
    assert list(matched.index.get_level_values("symbol").unique()) == ["BTC", "ETH"]
    for name in ["BTC", "ETH"]:
        pd.testing.assert_frame_equal(matched.loc[name], want.loc[name], check_exact=True)


def test_what_many_symbols_cannot_do_is_refused() -> None:
    symbols = _symbols()
    with pytest.raises(ValueError, match="overfitting statistics run on one symbol's data"):
        threadx.sweep(symbols, grid=GRID, device="cpu", progress=False, overfitting=True)
    with pytest.raises(ValueError, match="a search, walk_forward and overfitting"):
        threadx.sweep(symbols, grid=GRID, device="cpu", progress=False, walk_forward="train=1000,test=500")
    with pytest.raises(ValueError, match='the symbol name "a,b"'):
        _sweep({"a,b": symbols["BTC"], "c": symbols["ETH"]})
    # One backtest, search, session or indicator call takes one data set: a dict of frames
    # is named as the universe it is (not read as a dict of columns).
    universe = "data is a dict of 3 symbols' data \\(SOL, BTC, ETH\\): a universe, where this takes one data set"
    with pytest.raises(ValueError, match=universe):
        threadx.backtest(symbols)
    with pytest.raises(ValueError, match=universe):
        threadx.indicators(symbols, "sma:period=5")
    with pytest.raises(ValueError, match="data is an empty dict"):
        threadx.backtest({})


def test_constraints_count_the_symbols_each_combo_keeps_them_on() -> None:
    symbols = _symbols()
    rows = _sweep(symbols)
    bound = int(rows["trades"].median())
    kept = threadx.sweep(symbols, grid=GRID, device="cpu", progress=False, constraints=f"trades >= {bound}")
    pd.testing.assert_frame_equal(kept, rows, check_exact=True)
    by_combo = kept.attrs["by_combo"]
    passing = rows["trades"].ge(bound).groupby(level="combo").sum()
    assert by_combo["passing_symbols"].tolist() == passing.loc[by_combo.index].tolist()
    assert by_combo["passing_symbols"].nunique() > 1
    # Without constraints, no such column (the CLI's table as before).
    assert "passing_symbols" not in rows.attrs["by_combo"].columns
