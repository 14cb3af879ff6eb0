"""Data in every accepted form gives the same bars; bad data is refused with the CLI's
message, naming the row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import threadx

SPECS = ("bbands:period=20,std=2", "atr:period=14", "rsi:period=14")


def test_synthetic_is_a_utc_frame_and_the_same_as_the_cli_spec(data: pd.DataFrame) -> None:
    assert list(data.columns) == ["open", "high", "low", "close", "volume"]
    assert isinstance(data.index, pd.DatetimeIndex) and str(data.index.tz) == "UTC"
    assert len(data) == 3000 and data.index.is_monotonic_increasing
    assert all(data[c].dtype == np.float64 for c in data.columns)
    pd.testing.assert_frame_equal(data, threadx.load("synthetic:bars=3000,seed=7"))
    assert not data.equals(threadx.synthetic(bars=3000, seed=8))


def test_every_form_of_the_same_bars_gives_the_same_values(data: pd.DataFrame, tmp_path) -> None:
    want = threadx.indicators(data, *SPECS, device="cpu")
    assert want.index.equals(data.index)
    path = tmp_path / "bars.csv"
    data.to_csv(path)
    ms = data.index.as_unit("ms").asi8 if hasattr(data.index, "as_unit") else data.index.asi8 // 10**6
    shuffled = data.rename(columns=str.upper)[["VOLUME", "CLOSE", "LOW", "HIGH", "OPEN"]]
    forms = {
        "csv path": str(path),
        "mixed-case columns in any order": shuffled,
        "tz-aware index elsewhere": data.tz_convert("America/New_York"),
        "epoch-seconds column": data.reset_index(drop=True).assign(time=ms // 1000),
        "epoch-ms column": data.reset_index(drop=True).assign(Timestamp=ms),
        "date-time strings": data.reset_index(drop=True).assign(date=data.index.strftime("%Y-%m-%d %H:%M:%S")),
        "dict of arrays": {"timestamp": ms, **{c: data[c].to_numpy() for c in data.columns}},
    }
    for name, form in forms.items():
        got = threadx.indicators(form, *SPECS, device="cpu")
        np.testing.assert_array_equal(got.to_numpy(), want.to_numpy(), err_msg=name)
        if isinstance(form, pd.DataFrame):
            assert got.index.equals(form.index), f"{name}: indexed like the data"


def test_volume_is_optional(data: pd.DataFrame) -> None:
    a = threadx.backtest(data.drop(columns="volume"), "bb_atr")
    b = threadx.backtest(data, "bb_atr")
    assert a.metrics == b.metrics


def _bad_csv_message(cli, frame: pd.DataFrame) -> str:
    frame.to_csv(cli.workdir / "bad.csv", na_rep="NaN")
    return cli.fails("indicators", "--data", "bad.csv", "--ind", "sma:period=3", "--out", "x.csv")


@pytest.mark.parametrize(
    "change, column, problem",
    [
        (lambda d: d.assign(close=d["close"].where(d.index != d.index[3], np.nan)), "close", "NaN is not a finite number"),
        (lambda d: d.assign(low=d["low"].where(d.index != d.index[3], -1.0)), "low", "price -1 is not positive"),
        (lambda d: d.assign(high=d["high"].where(d.index != d.index[3], 1.0)), "high", "high 1 is below low"),
    ],
)
def test_bad_prices_are_refused_with_the_clis_problem_and_the_row(cli, data, change, column, problem) -> None:
    bad = change(data.iloc[:50].copy())
    with pytest.raises(ValueError) as raised:
        threadx.indicators(bad, "sma:period=3")
    message = str(raised.value)
    assert message.startswith(f"DataFrame, row 3, column `{column}`: {problem}"), message
    cli_message = _bad_csv_message(cli, bad)
    assert f"line 5, column `{column}`: {message.split(': ', 1)[1]}" in cli_message, cli_message


def test_bad_frames_are_refused(data: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"DataFrame: no `close` column \(found: timestamp, open, high, low, volume\)"):
        threadx.indicators(data.drop(columns="close"), "sma:period=3")
    with pytest.raises(ValueError, match="row 2, column `timestamp`: out of order"):
        threadx.indicators(data.iloc[[0, 2, 1]], "sma:period=3")
    with pytest.raises(ValueError, match="row 1, column `timestamp`: duplicate"):
        threadx.indicators(data.iloc[[0, 0]], "sma:period=1")
    with pytest.raises(ValueError, match="no bars"):
        threadx.indicators(data.iloc[:0], "sma:period=3")
    with pytest.raises(ValueError, match="column `close`: not numbers"):
        threadx.indicators(data.assign(close="x"), "sma:period=3")
    with pytest.raises(ValueError, match="needs at least 50 bars"):
        threadx.indicators(data.iloc[:10], "sma:period=50")
    with pytest.raises(ValueError, match="unknown indicator"):
        threadx.indicators(data, "smaa:period=3")
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        threadx.indicators("missing.csv", "sma:period=3")
    with pytest.raises(TypeError, match="data must be"):
        threadx.indicators(42, "sma:period=3")  # type: ignore[arg-type]


def test_every_time_the_package_returns_is_a_utc_datetime(data: pd.DataFrame, tmp_path) -> None:
    """No time comes back as epoch milliseconds: bars, indicators, a backtest's equity and
    trades, and data read back from Parquet, CSV and epoch-integer columns."""
    data.to_parquet(tmp_path / "bars.parquet")
    epoch = data.reset_index()
    epoch["timestamp"] = data.index.as_unit("ms").asi8 if hasattr(data.index, "as_unit") else data.index.asi8 // 10**6
    epoch.to_csv(tmp_path / "epoch.csv", index=False)
    run = threadx.backtest(data, "bb_atr", device="cpu")
    times = {
        "synthetic": data.index,
        "load(parquet)": threadx.load(tmp_path / "bars.parquet").index,
        "load(epoch csv)": threadx.load(tmp_path / "epoch.csv").index,
        "indicators": threadx.indicators(data, "atr:period=14", device="cpu").index,
        "equity": run.equity.index,
        "entry_time": pd.DatetimeIndex(run.trades["entry_time"]),
        "exit_time": pd.DatetimeIndex(run.trades["exit_time"]),
    }
    assert len(run.trades) > 0
    for name, index in times.items():
        assert isinstance(index, pd.DatetimeIndex) and str(index.tz) == "UTC", f"{name}: {index.dtype}"
        # Real dates of the synthetic year, not 1970 plus a few milliseconds.
        assert index.min() >= pd.Timestamp("2024-01-01", tz="UTC"), f"{name}: {index.min()}"
    assert times["load(epoch csv)"].equals(data.index.as_unit(times["load(epoch csv)"].unit))
