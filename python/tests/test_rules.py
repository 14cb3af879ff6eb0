"""Strategies written as rule files: the same results as the CLI's, exit reasons of
take-profits and time limits, and a mistake's place and caret in the error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import threadx

from conftest import grid_flags
from test_values import DATA, assert_same_as_csv

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "strategies"


@pytest.mark.parametrize("name", ["donchian", "trend_rsi", "macd_tp"])
def test_a_rule_file_sweeps_as_the_cli(cli, data: pd.DataFrame, name: str) -> None:
    path = EXAMPLES / f"{name}.toml"
    got = threadx.sweep(data, path, device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, "--strategy", str(path), "--out", "r.csv", "--quiet")
    want = cli.csv("r.csv", index_col="combo")
    assert_same_as_csv(got, want)
    assert got["trades"].sum() > len(got), "the combos trade"
    # The same file by name as a str, with a grid of our own.
    grid = {"fast": [8, 12], "tp": [2.5]} if name == "macd_tp" else None
    if grid is not None:
        small = threadx.sweep(data, str(path), grid=grid, device="cpu", progress=False)
        cli.run("--device", "cpu", "sweep", "--data", DATA, "--strategy", str(path), *grid_flags(grid),
                "--out", "g.csv", "--quiet")
        assert_same_as_csv(small, cli.csv("g.csv", index_col="combo"))
        assert list(small["fast"]) == [8, 12]


def test_a_rule_file_backtest_reports_take_profits_and_time_exits(data: pd.DataFrame) -> None:
    macd = threadx.backtest(data, EXAMPLES / "macd_tp.toml", tp=2)
    assert {"take_profit", "stop", "signal"} <= set(macd.trades["exit_reason"].astype(str))
    assert list(macd.trades["exit_reason"].cat.categories) == threadx.EXIT_REASONS
    assert macd.params["tp"] == 2
    trend = threadx.backtest(data, str(EXAMPLES / "trend_rsi.toml"), trend=50, buy_below=45, max_hold=3)
    held = trend.trades["exit_bar"] - trend.trades["entry_bar"]
    by_time = trend.trades["exit_reason"] == "max_bars"
    assert by_time.any() and (held[by_time] == 3).all() and (held <= 3).all()


def test_a_mistake_in_a_rule_file_is_shown_at_its_place(tmp_path: Path, data: pd.DataFrame) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[rules]\nentry = "close > smaa(20)"\n')
    for call in (lambda: threadx.sweep(data, bad, progress=False), lambda: threadx.backtest(data, bad)):
        with pytest.raises(ValueError) as caught:
            call()
        message = str(caught.value)
        assert "bad.toml:3:18: rule `entry`: unknown function 'smaa' (did you mean 'sma'?)" in message
        assert message.endswith('3 | entry = "close > smaa(20)"\n  |                  ^^^^')
    with pytest.raises(ValueError, match="looks 1 bar"):
        bad.write_text('name = "peek"\n[rules]\nentry = "close[-1] > close"\n')
        threadx.backtest(data, bad)
    with pytest.raises(ValueError, match="strategy file nowhere.toml"):
        threadx.sweep(data, "nowhere.toml", progress=False)
    assert np.isfinite(threadx.backtest(data, "bb_atr").metrics["total_return"])
