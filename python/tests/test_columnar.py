"""Parquet and Arrow with pandas on the other side: frames saved by pandas
(``to_parquet``, ``to_feather``, an unnamed or named time index) give the bars and the
rows of the CSV; the CLI's Parquet results read by pandas equal its CSV, dtypes included;
and the frames Python returns are those Parquet files' columns."""

from __future__ import annotations


import pandas as pd
import pytest

import threadx

from conftest import Cli

SWEEP = ["--device", "cpu", "sweep", "--grid", "bb_period=10,20", "--grid", "bb_std=1.5,2", "--quiet"]


def test_frames_saved_by_pandas_load_as_the_csv_bars(data: pd.DataFrame, tmp_path) -> None:
    csv = tmp_path / "bars.csv"
    data.to_csv(csv)
    want = threadx.load(csv)
    unnamed = data.rename_axis(None)
    saved = {
        "named index.parquet": lambda p: data.rename_axis("timestamp").to_parquet(p),
        "unnamed index.parquet": lambda p: unnamed.to_parquet(p),
        "snappy default, ns index in New York.parquet": lambda p: data.tz_convert("America/New_York").to_parquet(p),
        "feather.feather": lambda p: data.rename_axis("date").reset_index().to_feather(p),
        "float32 prices.parquet": lambda p: data.astype("float32").astype("float64").rename_axis("time").to_parquet(p),
    }
    for name, save in saved.items():
        path = tmp_path / name
        save(path)
        got = threadx.load(path)
        if name.startswith("float32"):
            want_here = threadx.load(_csv_of(data.astype("float32").astype("float64"), tmp_path))
        else:
            want_here = want
        pd.testing.assert_frame_equal(got, want_here, check_exact=True, obj=name)


def _csv_of(frame: pd.DataFrame, tmp_path) -> str:
    path = tmp_path / "other.csv"
    frame.to_csv(path)
    return str(path)


def test_the_clis_parquet_results_are_its_csv_in_pandas(cli: Cli, data: pd.DataFrame) -> None:
    data.to_parquet(cli.workdir / "bars.parquet")
    data.to_csv(cli.workdir / "bars.csv")
    cli.run(*SWEEP, "--data", "bars.csv", "--out", "r.csv")
    cli.run(*SWEEP, "--data", "bars.parquet", "--out", "r.parquet")
    cli.run(*SWEEP, "--data", "bars.parquet", "--out", "r.feather")
    want = cli.csv("r.csv")
    for name in ("r.parquet", "r.feather"):
        path = cli.workdir / name
        got = pd.read_parquet(path) if name.endswith("parquet") else pd.read_feather(path)
        # Values exactly; types by the schema, where pandas guesses them from CSV text (a
        # float parameter whose values are all whole numbers reads back as int64 there).
        pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=False, obj=name)
        ints = {"combo", "bb_period", "atr_period", "trades", "closed_trades"}
        assert {c for c, t in got.dtypes.items() if t == "int64"} == ints, got.dtypes
        assert all(t == "float64" for c, t in got.dtypes.items() if c not in ints), got.dtypes


def test_a_truncated_parquet_file_is_refused_by_name(cli: Cli, data: pd.DataFrame) -> None:
    path = cli.workdir / "bars.parquet"
    data.to_parquet(path)
    path.write_bytes(path.read_bytes()[:-40])
    assert "bars.parquet: not a readable Parquet file" in cli.fails(*SWEEP, "--data", "bars.parquet")
    with pytest.raises(ValueError, match="not a readable Parquet file"):
        threadx.load(path)


def test_every_table_the_cli_writes_as_parquet_is_its_csv(cli: Cli) -> None:
    """Trades, equity, indicators and walk-forward windows: times as UTC timestamps,
    counts as integers, the CSV's values exactly."""
    tables = {
        "t": ["entry_time", "exit_time"],
        "e": ["timestamp"],
        "i": ["timestamp"],
        "wf": ["train_start", "train_end", "test_start", "test_end"],
    }
    for ext in ("csv", "parquet", "feather"):
        cli.run("--device", "cpu", "backtest", "--trades", f"t.{ext}", "--equity", f"e.{ext}")
        cli.run("--device", "cpu", "indicators", "--data", "synthetic:bars=2000", "--ind", "bbands:period=20,std=2",
                "--ind", "atr:period=14", "--out", f"i.{ext}")
        cli.run("--device", "cpu", "sweep", "--data", "synthetic:bars=4000,seed=2", "--grid", "bb_period=10,20",
                "--walk-forward", "train=2000,test=500", "--quiet", "--out", f"wf.{ext}")
    for name, times in tables.items():
        want = cli.csv(f"{name}.csv", parse_dates=times)
        for column in times:
            want[column] = want[column].dt.tz_convert("UTC")
        for ext in ("parquet", "feather"):
            path = cli.workdir / f"{name}.{ext}"
            got = pd.read_parquet(path) if ext == "parquet" else pd.read_feather(path)
            pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=False, obj=f"{name}.{ext}")
            assert all(str(got[c].dtype) == "datetime64[ms, UTC]" for c in times), got.dtypes
            assert len(got) > 0


def test_arrow_tables_pass_as_arrow_with_the_files_rules(data: pd.DataFrame) -> None:
    import pyarrow as pa

    want = threadx.indicators(data, "bbands:period=20,std=2", "atr:period=14", device="cpu")
    frame = data.rename_axis("timestamp").reset_index()
    tables = {
        "a table with a time column": pa.Table.from_pandas(frame, preserve_index=False),
        "pandas' index as a column": pa.Table.from_pandas(data.rename_axis(None)),
        "a record batch": pa.RecordBatch.from_pandas(frame, preserve_index=False),
        "an Arrow C stream": pa.table(frame).to_reader(),
    }
    for name, table in tables.items():
        got = threadx.indicators(table, "bbands:period=20,std=2", "atr:period=14", device="cpu")
        pd.testing.assert_frame_equal(got, want, check_exact=True, check_freq=False, obj=name)
    closes = pa.array([None if i == 17 else v for i, v in enumerate(data["close"])], pa.float64())
    broken = pa.Table.from_pandas(frame, preserve_index=False).set_column(4, "close", closes)
    with pytest.raises(ValueError, match=r"row 17, column `close`: no value \(null\)"):
        threadx.backtest(broken)


def _as_parquet_reads(got: pd.DataFrame, want: pd.DataFrame) -> pd.DataFrame:
    """`got` with its categoricals (choices, symbols) as the text Parquet holds."""
    out = got.copy()
    for column, dtype in out.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            out[column] = out[column].astype(want[column].dtype)
    return out


def test_pythons_frames_are_the_clis_parquet_files(cli: Cli, data: pd.DataFrame) -> None:
    """Each table Python returns is built from the Arrow columns the CLI writes as Parquet:
    the same names, types (ints int64, NaN where Parquet holds a null) and values."""
    ma = ["--device", "cpu", "sweep", "--strategy", "ma_cross", "--grid", "fast=5,10", "--grid", "slow=30,60",
          "--grid", "ma_type=sma,ema", "--quiet", "--data", "bars.parquet"]
    data.to_parquet(cli.workdir / "bars.parquet")
    grid = {"fast": [5, 10], "slow": [30, 60], "ma_type": ["sma", "ema"]}

    rows = threadx.sweep(data, "ma_cross", grid=grid, device="cpu", progress=False)
    cli.run(*ma, "--out", "rows.parquet")
    want = pd.read_parquet(cli.workdir / "rows.parquet")
    assert isinstance(rows["ma_type"].dtype, pd.CategoricalDtype)
    assert list(rows["ma_type"].cat.categories) == ["sma", "ema"]
    pd.testing.assert_frame_equal(_as_parquet_reads(rows.reset_index(), want), want, check_exact=True)

    trials = threadx.search(data, "ma_cross", "random", 5, grid=grid, seed=4, device="cpu", progress=False).trials
    cli.run(*ma, "--search", "random", "--trials", "5", "--seed", "4", "--out", "trials.parquet")
    want = pd.read_parquet(cli.workdir / "trials.parquet")
    pd.testing.assert_frame_equal(_as_parquet_reads(trials.reset_index(), want), want, check_exact=True)

    symbols = {"AAA": data, "BBB": data.iloc[:2000]}
    for name, frame in symbols.items():
        frame.to_parquet(cli.workdir / f"{name}.parquet")
    universe = threadx.sweep(symbols, "ma_cross", grid=grid, device="cpu", progress=False, by="total_return")
    cli.run(*ma[:-1], "[AB]*.parquet", "--by", "total_return", "--out", "u.parquet")
    want = pd.read_parquet(cli.workdir / "u.parquet")
    assert list(universe.index.get_level_values("symbol").categories) == ["AAA", "BBB"]
    pd.testing.assert_frame_equal(_as_parquet_reads(universe.reset_index(), want), want, check_exact=True)
    want = pd.read_parquet(cli.workdir / "u-by-combo.parquet")
    by_combo = universe.attrs["by_combo"]
    pd.testing.assert_frame_equal(_as_parquet_reads(by_combo.reset_index(), want), want, check_exact=True)
