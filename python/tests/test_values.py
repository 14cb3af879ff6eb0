"""Values equal to the Rust API's, read from the `threadx` command's files: indicators,
one backtest (metrics, trades, equity), sweeps of every strategy (grid, random sample,
walk-forward) with the CSV's shapes and dtypes; and the same bytes on every device."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import threadx
from conftest import REQUIRE_GPU, grid_flags

DATA = "synthetic:bars=3000,seed=7"


def test_indicators_are_the_clis(cli, data: pd.DataFrame) -> None:
    specs = ["bbands:period=20,std=2", "atr:period=14", "macd:fast=12,slow=26,signal=9", "ema:period=30"]
    got = threadx.indicators(data, *specs, device="cpu")
    cli.run("--device", "cpu", "indicators", "--data", DATA, *[f"--ind={s}" for s in specs], "--out", "ind.csv")
    want = cli.csv("ind.csv", index_col="timestamp")
    assert list(got.columns) == list(want.columns)
    assert got.dtypes.eq(np.float64).all()
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    # The specs as one list give the same frame.
    pd.testing.assert_frame_equal(threadx.indicators(data, specs, device="cpu"), got, check_exact=True)


def test_cci_and_obv_are_pandas_own(data: pd.DataFrame) -> None:
    """CCI and OBV (no GPU kernel: a GPU declines them) against their definitions in
    pandas: OBV the same bits (the same additions in the same order), CCI to 1e-10."""
    got = threadx.indicators(data, "cci:period=14", "obv", device="gpu" if REQUIRE_GPU else "auto")
    sign = np.sign(data["close"].diff()).fillna(0.0)
    obv = (sign * data["volume"]).where(sign != 0, 0.0)
    obv.iloc[0] = data["volume"].iloc[0]
    np.testing.assert_array_equal(got["obv"].to_numpy(), obv.cumsum().to_numpy())
    tp = (data["high"] + data["low"] + data["close"]) / 3
    mean = tp.rolling(14).mean()
    deviation = tp.rolling(14).apply(lambda w: np.abs(w - w.mean()).mean(), raw=True)
    cci = (tp - mean) / (0.015 * deviation)
    assert got["cci_14"].isna().sum() == 13
    np.testing.assert_allclose(got["cci_14"].to_numpy()[13:], cci.to_numpy()[13:], rtol=1e-10)


def test_vwap_is_pandas_own(data: pd.DataFrame) -> None:
    """The session VWAP: each UTC day's cumulative Σ tp · volume over Σ volume (pandas'
    grouped cumulative sums are compensated, ours plain: within 1e-13; the Rust test holds
    the plain sums' bits)."""
    got = threadx.indicators(data, "vwap", device="cpu")["vwap"]
    tp = (data["high"] + data["low"] + data["close"]) / 3
    day = data.index.floor("D")
    want = (tp * data["volume"]).groupby(day).cumsum() / data["volume"].groupby(day).cumsum()
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-13)
    assert day.nunique() > 20


def test_one_backtest_is_the_clis(cli, data: pd.DataFrame) -> None:
    bt = threadx.backtest(data, "bb_atr", fee=0.002, bb_period=25, bb_std=1.5, atr_mult=3)
    out = cli.run(
        "backtest", "--data", DATA, "--fee", "0.002", "--set", "bb_period=25", "--set", "bb_std=1.5",
        "--set", "atr_mult=3", "--trades", "trades.csv", "--equity", "equity.csv", "--json",
    )
    report = json.loads(out)
    assert bt.params == report["params"] == {"bb_period": 25, "bb_std": 1.5, "atr_period": 14, "atr_mult": 3.0}
    for name, value in bt.metrics.items():
        want = report[name]
        assert (value == want) or (np.isnan(value) and want is None), name
    assert bt.metrics["trades"] > 10
    trades = cli.csv("trades.csv")
    assert len(bt.trades) == len(trades)
    for column in ["entry_bar", "entry_price", "exit_bar", "exit_price", "return"]:
        np.testing.assert_array_equal(bt.trades[column].to_numpy(), trades[column].to_numpy(), err_msg=column)
    assert list(bt.trades["exit_reason"].astype(str)) == list(trades["exit_reason"])
    assert (bt.trades["entry_time"] == data.index[bt.trades["entry_bar"]]).all()
    np.testing.assert_array_equal(bt.equity.to_numpy(), cli.csv("equity.csv")["equity"].to_numpy())
    assert bt.equity.index.equals(data.index)


def assert_same_as_csv(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The rows of a sweep equal those of its CSV, value for value, in the CSV's columns."""
    assert got.index.equals(want.index)
    assert list(got.columns) == list(want.columns)
    for column in want.columns:
        mine = got[column]
        if isinstance(mine.dtype, pd.CategoricalDtype):
            assert list(mine.astype(str)) == list(want[column]), column
        elif mine.dtype == np.float64:
            # A float parameter's whole values read back from the CSV as integers.
            np.testing.assert_array_equal(mine.to_numpy(), want[column].to_numpy(np.float64), err_msg=column)
        else:
            assert mine.dtype == want[column].dtype == np.int64, column
            np.testing.assert_array_equal(mine.to_numpy(), want[column].to_numpy(), err_msg=column)


CASES = [
    ("bb_atr", {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.0, 2.5], "atr_period": [7, 14], "atr_mult": [1.0, 2.5]}),
    ("ma_cross", {"ma_type": ["sma", "ema"], "fast": [5, 10], "slow": [30, 60]}),
    ("rsi_reversion", {"rsi_period": [7, 14], "rsi_low": [25, 30], "rsi_high": [70], "atr_mult": [0, 2]}),
]


@pytest.mark.parametrize("strategy, grid", CASES, ids=[c[0] for c in CASES])
def test_sweeps_are_the_clis_csv(cli, data: pd.DataFrame, strategy: str, grid: dict) -> None:
    got = threadx.sweep(data, strategy, grid=grid, fee=0.0015, device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, "--strategy", strategy, *grid_flags(grid),
            "--fee", "0.0015", "--out", "r.csv", "--quiet")
    want = cli.csv("r.csv", index_col="combo")
    assert len(got) == int(np.prod([len(v) for v in grid.values()])) == len(want)
    assert got.index.name == "combo" and got.index.dtype == np.int64
    assert_same_as_csv(got, want)
    assert got["trades"].sum() > len(got), "the combos trade"


def test_a_random_sample_and_walk_forward_are_the_clis(cli, data: pd.DataFrame) -> None:
    grid = {"bb_period": list(range(10, 60, 5)), "bb_std": [1.5, 2, 2.5], "atr_mult": [1, 2, 3]}
    got = threadx.sweep(data, grid=grid, random=17, seed=3, device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--random", "17", "--seed", "3",
            "--out", "s.csv", "--quiet")
    # The CLI's --random N is a random search: the same combos, in trial order.
    want = cli.csv("s.csv").drop(columns="trial").set_index("combo").sort_index()
    assert_same_as_csv(got, want)
    assert len(got) == 17
    walk = threadx.sweep(data, grid={"bb_period": [20, 30]}, walk_forward="train=1200,test=600", by="total_return",
                         progress=False)
    for name in ("w.csv", "w.parquet"):
        cli.run("sweep", "--data", DATA, "--grid", "bb_period=20,30", "--walk-forward", "train=1200,test=600",
                "--by", "total_return", "--out", name, "--quiet")
    times = ["train_start", "train_end", "test_start", "test_end"]
    want = cli.csv("w.csv", index_col="window", parse_dates=times)
    # The CSV's values; the types of its Parquet file (times in ms, as the engine keeps them).
    pd.testing.assert_frame_equal(walk, want, check_exact=True, check_dtype=False)
    pd.testing.assert_frame_equal(walk, pd.read_parquet(cli.workdir / "w.parquet").set_index("window"), check_exact=True)
    assert all(str(walk[t].dtype) == "datetime64[ms, UTC]" for t in times)
    assert len(walk) == 3


def test_minimize_ranks_smallest_first_as_the_cli_does(cli, data: pd.DataFrame) -> None:
    grid = {"bb_period": [10, 20, 30, 40], "atr_mult": [1, 2]}
    # A walk-forward: each window's winner is its train window's smallest exposure, the
    # CLI's windows with --minimize.
    walk = threadx.sweep(data, grid=grid, walk_forward="train=1200,test=600", by="exposure", minimize=True,
                         device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--walk-forward", "train=1200,test=600",
            "--by", "exposure", "--minimize", "--out", "w.csv", "--quiet")
    times = ["train_start", "train_end", "test_start", "test_end"]
    pd.testing.assert_frame_equal(walk, cli.csv("w.csv", index_col="window", parse_dates=times), check_exact=True,
                                  check_dtype=False)
    largest = threadx.sweep(data, grid=grid, walk_forward="train=1200,test=600", by="exposure", device="cpu",
                            progress=False)
    assert (walk["in_sample_exposure"] < largest["in_sample_exposure"]).all()
    # A grid: the rows are the same; the overfitting statistics' top combos and the
    # report's best list rank the smallest first, as the CLI's summary does.
    rows = threadx.sweep(data, grid=grid, by="exposure", minimize=True, overfitting=True, device="cpu",
                         progress=False)
    pd.testing.assert_frame_equal(rows, threadx.sweep(data, grid=grid, device="cpu", progress=False),
                                  check_exact=True)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--by", "exposure", "--minimize",
            "--overfitting", "--out", "g.csv", "--quiet")
    summary = json.loads((cli.workdir / "g.json").read_text())
    top = [t["combo"] for t in rows.attrs["overfitting"]["top"]]
    assert top == [t["combo"] for t in summary["overfitting"]["top"]]
    assert top[0] == int(rows["exposure"].idxmin())
    page = rows._html()
    assert "exposure, smallest first" in page


def test_constraints_rank_as_the_cli_does(cli, data: pd.DataFrame) -> None:
    grid = {"bb_period": [10, 20, 30, 40], "atr_mult": [1, 2]}
    rows = threadx.sweep(data, grid=grid, device="cpu", progress=False)
    # A bound the fewest-trading combos of some train window (bars 0..1200, 600..1800,
    # 1200..2400) break, and most combos of each keep.
    trains = [threadx.sweep(data.iloc[a:a + 1200], grid=grid, device="cpu", progress=False) for a in (0, 600, 1200)]
    bound = min(int(np.sort(t["trades"].to_numpy())[2]) for t in trains)
    assert any((t["trades"] < bound).any() for t in trains)
    rule = f"trades >= {bound}"
    # A walk-forward's winners keep the rule: the CLI's windows with --constraint.
    walk = threadx.sweep(data, grid=grid, walk_forward="train=1200,test=600", by="total_return", constraints=rule,
                         device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--walk-forward", "train=1200,test=600",
            "--by", "total_return", "--constraint", rule, "--out", "w.csv", "--quiet")
    times = ["train_start", "train_end", "test_start", "test_end"]
    pd.testing.assert_frame_equal(walk, cli.csv("w.csv", index_col="window", parse_dates=times), check_exact=True,
                                  check_dtype=False)
    # A grid: the overfitting statistics' top combos are the CLI's, all keeping a rule
    # that the fewest-trading combos of the whole data break.
    bound = int(np.sort(rows["trades"].to_numpy())[2])
    rule = f"trades >= {bound}"
    kept = threadx.sweep(data, grid=grid, constraints=[rule], overfitting=True, device="cpu", progress=False)
    pd.testing.assert_frame_equal(kept, rows, check_exact=True)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--constraint", rule, "--overfitting",
            "--out", "g.csv", "--quiet")
    summary = json.loads((cli.workdir / "g.json").read_text())
    top = [t["combo"] for t in kept.attrs["overfitting"]["top"]]
    assert top == [t["combo"] for t in summary["overfitting"]["top"]]
    assert all(rows.loc[c, "trades"] >= bound for c in top) and len(top) < len(rows)
    page = kept._html()
    assert f"among the {int((rows['trades'] >= bound).sum())} of 8 combos that keep trades &gt;= {bound}" in page
    with pytest.raises(ValueError, match="constraint `trades >> 3`"):
        threadx.sweep(data, grid=grid, constraints="trades >> 3", progress=False)


def test_a_sweep_is_the_same_bytes_on_every_device(data: pd.DataFrame) -> None:
    grid = {"bb_period": [10, 20, 30, 40], "bb_std": [1.5, 2.5], "atr_period": [7, 14], "atr_mult": [1, 2, 3]}
    frames = {d: threadx.sweep(data, grid=grid, device=d, chunk_size=7, progress=False) for d in ["cpu", "gpu", "all", "auto"]}
    for device, frame in frames.items():
        pd.testing.assert_frame_equal(frame, frames["cpu"], check_exact=True, obj=device)


def test_a_grid_takes_ranges_numbers_and_cli_text(data: pd.DataFrame) -> None:
    a = threadx.sweep(data, grid={"bb_period": range(10, 35, 10), "bb_std": 2, "atr_mult": "1:3:1"}, progress=False)
    b = threadx.sweep(data, grid={"bb_period": [10, 20, 30], "bb_std": [2.0], "atr_mult": [1, 2, 3]}, progress=False)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(a) == 9 and set(a["bb_std"]) == {2.0}
    default = threadx.sweep(threadx.synthetic(bars=800, seed=1), progress=False)
    assert len(default) == 10_000, "no grid: the strategy's built-in grid"


def test_gpu_is_there_when_required() -> None:
    adapters = threadx.devices()
    if REQUIRE_GPU:
        assert adapters, "THREADX_REQUIRE_GPU=1 but no adapter"
    assert sum(a["default"] for a in adapters) == (1 if adapters else 0)
    for a in adapters:
        assert {"rank", "name", "backend", "device_type", "software", "why"} <= set(a)
