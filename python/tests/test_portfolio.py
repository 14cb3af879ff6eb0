"""`simulate(..., cash_sharing=True)`: many symbols' signals against one account equal
vectorbt 1.2's `Portfolio.from_signals(..., group_by=True, cash_sharing=True,
call_seq="auto")` (and, for target percents, which its `from_signals` lacks,
`from_orders` with the same orders): equity and cash at every bar, total return, every
trade's size, prices, fees and profit within 1e-9 relative, trade counts exact; on random
signals over 5 to 20 symbols, with cash to spare and running out, fees × slippage × lots
× symbols that start late. CI sets THREADX_REQUIRE_VECTORBT=1, so there the comparison
cannot be skipped."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple

import numpy as np
import pandas as pd
import pytest

import threadx
from conftest import REPO, Cli, grid_flags

if os.environ.get("THREADX_REQUIRE_VECTORBT") == "1":
    import vectorbt as vbt
else:
    vbt = pytest.importorskip("vectorbt")

RTOL = 1e-9


def universe(seed: int, symbols: int, bars: int = 400, late: bool = False) -> Tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Hourly closes of `symbols` random walks (with `late`, a third of them start after
    the first bars: NaN before), entries and exits never on the same bar."""
    rng = np.random.default_rng(seed)
    index = pd.date_range("2024-01-01", periods=bars, freq="h")
    names = [f"S{i:02d}" for i in range(symbols)]
    walk = 50.0 * np.exp(np.cumsum(rng.normal(0.0, 0.012, (bars, symbols)), axis=0))
    close = pd.DataFrame(walk, index=index, columns=names)
    if late:
        for s in range(0, symbols, 3):
            close.iloc[: rng.integers(5, bars // 4), s] = np.nan
    entries = pd.DataFrame(rng.random((bars, symbols)) < 0.08, index=index, columns=names)
    exits = pd.DataFrame(rng.random((bars, symbols)) < 0.08, index=index, columns=names) & ~entries
    return close, entries, exits


def compare(ours: pd.DataFrame, pf: Any, close: pd.DataFrame) -> None:
    """Every figure of the one account against vectorbt's portfolio."""
    np.testing.assert_allclose(ours.attrs["equity"].to_numpy(), pf.value().to_numpy(), rtol=RTOL, err_msg="equity")
    np.testing.assert_allclose(ours.attrs["cash"].to_numpy(), pf.cash().to_numpy(), rtol=RTOL, atol=1e-9, err_msg="cash")
    np.testing.assert_allclose(
        ours.attrs["positions"].to_numpy(), pf.assets().to_numpy(), rtol=RTOL, atol=1e-12, err_msg="positions"
    )
    # As growth (1 + return): a return near 0 has no relative precision to compare.
    np.testing.assert_allclose(1.0 + ours["total_return"].iloc[0], 1.0 + pf.total_return(), rtol=RTOL)
    trades = ours.attrs["trades"]
    theirs = pf.trades.records_readable
    assert len(trades) == len(theirs) == ours["trades"].iloc[0], (len(trades), len(theirs))
    assert (trades["exit_price"].notna()).sum() == ours["closed_trades"].iloc[0]
    # vectorbt lists trades by symbol, then entry: the same order here.
    ordered = trades.assign(column=close.columns.get_indexer(trades["symbol"])).sort_values(
        ["column", "entry_time"], kind="stable"
    )
    assert list(ordered["symbol"]) == list(theirs["Column"])
    assert list(ordered["entry_time"]) == list(theirs["Entry Timestamp"])
    for ours_name, theirs_name in [("size", "Size"), ("entry_price", "Avg Entry Price"), ("entry_fees", "Entry Fees")]:
        np.testing.assert_allclose(ordered[ours_name], theirs[theirs_name], rtol=RTOL, err_msg=ours_name)
    closed = ordered["exit_price"].notna().to_numpy()
    assert (theirs["Status"] == "Closed").to_numpy().tolist() == closed.tolist()
    for ours_name, theirs_name in [("exit_price", "Avg Exit Price"), ("exit_fees", "Exit Fees"), ("pnl", "PnL")]:
        np.testing.assert_allclose(
            ordered[ours_name][closed], theirs[theirs_name][closed], rtol=RTOL, atol=1e-9, err_msg=ours_name
        )


CASES: Dict[str, Dict[str, Any]] = {
    # size, size_type, init_cash: $400 a position from $1,000 runs out at the third.
    "value, cash running out": {"size": 400.0, "size_type": "value", "init_cash": 1000.0},
    "value, cash to spare": {"size": 10.0, "size_type": "value", "init_cash": 1_000_000.0},
    "percent of the cash left": {"size": 0.3, "size_type": "percent", "init_cash": 1000.0},
    "all the cash": {"size": 1.0, "size_type": "percent", "init_cash": 1000.0},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("symbols,seed", [(5, 1), (12, 2), (20, 3)])
@pytest.mark.parametrize("costs", [{"fees": 0.001}, {"fees": 0.002, "slippage": 0.001}])
def test_one_account_is_vectorbts_cash_sharing_portfolio(case: str, symbols: int, seed: int, costs: Dict[str, float]) -> None:
    close, entries, exits = universe(seed, symbols, late=seed == 3)
    sizing = CASES[case]
    ours = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, **sizing, **costs)
    pf = vbt.Portfolio.from_signals(
        close, entries, exits, **sizing, **costs, group_by=True, cash_sharing=True, call_seq="auto", freq="1h"
    )
    assert ours["trades"].iloc[0] > 10
    cash, trades = ours.attrs["cash"], ours.attrs["trades"]
    spent = trades["size"] * trades["entry_price"] + trades["entry_fees"]
    if case == "value, cash to spare":
        assert cash.min() > 0.99 * sizing["init_cash"]
    elif case == "value, cash running out":
        assert (spent < 0.999 * sizing["size"]).any(), "an entry gets less than asked: the cash left"
    elif case == "all the cash":
        assert (cash < 1e-9 * sizing["init_cash"]).any(), "the cash runs out"
    compare(ours, pf, close)


# Lots that are exact in binary: vectorbt also rounds an exit down to the lot, which with
# a lot such as 0.1 can leave a sliver open (5.1 // 0.1 == 50.0); ThreadX sells the whole
# position (crates/backtest/src/portfolio/orders.rs).
@pytest.mark.parametrize("lot,min_size", [(1.0, 0.0), (0.25, 2.0)])
def test_lots_and_minimum_sizes_are_vectorbts_granularity_and_min_size(lot: float, min_size: float) -> None:
    close, entries, exits = universe(4, 8)
    options = {"size": 0.25, "size_type": "percent", "init_cash": 2000.0, "fees": 0.001, "slippage": 0.0005}
    ours = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, lot=lot, min_size=min_size, **options)
    pf = vbt.Portfolio.from_signals(
        close, entries, exits, **options, size_granularity=lot, min_size=min_size,
        group_by=True, cash_sharing=True, call_seq="auto", freq="1h",
    )
    sizes = ours.attrs["trades"]["size"].to_numpy()
    np.testing.assert_allclose(sizes / lot, np.round(sizes / lot), atol=1e-9)
    assert sizes.min() >= min_size
    compare(ours, pf, close)


def alternating(entries: pd.DataFrame, exits: pd.DataFrame) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Each symbol's signals thinned to entry, exit, entry, …: what from_signals acts on
    when every entry fills, so that from_orders' target orders mean the same."""
    keep_entries, keep_exits = entries.copy(), exits.copy()
    for column in entries.columns:
        holding = False
        for i, (e, x) in enumerate(zip(entries[column].to_numpy(), exits[column].to_numpy())):
            keep_entries.iloc[i, keep_entries.columns.get_loc(column)] = e and not holding
            keep_exits.iloc[i, keep_exits.columns.get_loc(column)] = x and holding
            holding = (holding or e) and not x
    return keep_entries, keep_exits


@pytest.mark.parametrize("target", [0.15, 0.4])
def test_target_percent_is_vectorbts_target_percent_orders(target: float) -> None:
    close, entries, exits = universe(5, 10)
    entries, exits = alternating(entries, exits)
    options = {"init_cash": 5000.0, "fees": 0.001, "slippage": 0.001}
    ours = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, size=target, size_type="targetpercent", **options)
    orders = pd.DataFrame(np.nan, index=close.index, columns=close.columns).mask(entries, target).mask(exits, 0.0)
    pf = vbt.Portfolio.from_orders(
        close, orders, size_type="targetpercent", **options, group_by=True, cash_sharing=True, call_seq="auto", freq="1h"
    )
    compare(ours, pf, close)


def test_a_three_symbol_account_by_hand() -> None:
    """docs/portfolios.md's worked example, figure by figure."""
    close = pd.DataFrame({"A": [10.0, 11.0, 12.0, 12.0], "B": [20.0, 18.0, np.nan, 19.0], "C": [5.0, 6.0, 6.5, 7.0]})
    entries = pd.DataFrame({"A": [1, 0, 0, 0], "B": [1, 0, 1, 1], "C": [1, 0, 0, 0]}).astype(bool)
    exits = pd.DataFrame({"A": [0, 0, 1, 0], "B": [0, 1, 0, 0], "C": [0, 0, 0, 1]}).astype(bool)
    got = threadx.simulate(close, entries, exits, cash_sharing=True, size=40.0, size_type="value", init_cash=100.0,
                           fees=0.01, details=True)
    c_units = 19.2 / 1.01 / 5.0
    trades = got.attrs["trades"]
    assert list(trades["symbol"]) == ["A", "B", "C", "B"]
    np.testing.assert_allclose(trades["size"], [4.0, 2.0, c_units, 40.0 / 19.0], rtol=1e-12)
    np.testing.assert_allclose(got.attrs["cash"], [0.0, 35.64, 83.16, 83.16 + 7 * 0.99 * c_units - 40.4], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.attrs["equity"].iloc[-1], 83.16 + 7 * 0.99 * c_units - 0.4, rtol=1e-12)
    assert got.index.tolist() == ["portfolio"] and got["trades"].iloc[0] == 4 and got["closed_trades"].iloc[0] == 3


def test_what_one_account_cannot_take_is_named() -> None:
    close, entries, exits = universe(6, 5, bars=50)
    with pytest.raises(ValueError, match="fill: cash_sharing=True takes closes"):
        threadx.simulate(close, entries, exits, cash_sharing=True, sl_stop=0.01, short_entries=exits, fill="next_open")
    with pytest.raises(ValueError, match="size, size_type: sizing needs cash_sharing=True"):
        threadx.simulate(close["S00"], entries["S00"], exits["S00"], size=0.5, size_type="percent")
    with pytest.raises(ValueError, match="size_type='shares': one of percent, value, targetpercent"):
        threadx.simulate(close, entries, exits, cash_sharing=True, size_type="shares")
    with pytest.raises(ValueError, match="size=2: a percent size is a fraction of the account in \\(0, 1\\]"):
        threadx.simulate(close, entries, exits, cash_sharing=True, size=2.0)
    with pytest.raises(ValueError, match=r"exits has shape \(50, 4\); close has \(50, 5\)"):
        threadx.simulate(close, entries, exits.iloc[:, :4].to_numpy(), cash_sharing=True)
    with pytest.raises(ValueError, match=r"exits has columns .*: one column per symbol, the same symbols \(missing: \['S04'\]"):
        threadx.simulate(close, entries, exits.iloc[:, :4], cash_sharing=True)
    bad = close.copy()
    bad.iloc[7, 2] = -1.0
    with pytest.raises(ValueError, match="close at bar 7, symbol 2 is -1: a price is positive and finite"):
        threadx.simulate(bad, entries, exits, cash_sharing=True)


def test_frames_are_read_by_symbol_as_pandas_aligns_them() -> None:
    """Signal and level frames in another column order are the same account (their columns
    put in close's order); another symbol, or other bars, is named."""
    close, entries, exits = universe(8, 4, bars=120)
    short = exits.shift(3, fill_value=False)
    # A different stop per symbol, so that a column read as another symbol's would show.
    sl_frame = pd.DataFrame(np.tile(0.02 + 0.01 * np.arange(4), (len(close), 1)), index=close.index, columns=close.columns)
    expected = threadx.simulate(close, entries, exits, cash_sharing=True, size=0.3, short_entries=short,
                                sl_stop=sl_frame, details=True)
    order = list(reversed(close.columns))
    got = threadx.simulate(close, entries[order], exits[order], cash_sharing=True, size=0.3,
                           short_entries=short[order], sl_stop=sl_frame[order], details=True)
    pd.testing.assert_frame_equal(got, expected)
    pd.testing.assert_frame_equal(got.attrs["trades"], expected.attrs["trades"])
    # Positionally, the reversed columns would trade other symbols' signals.
    swapped = threadx.simulate(close, entries[order].to_numpy(), exits[order].to_numpy(), cash_sharing=True, size=0.3,
                               short_entries=short[order].to_numpy(), sl_stop=sl_frame[order].to_numpy())
    assert swapped["total_return"].iloc[0] != expected["total_return"].iloc[0]
    other = entries.rename(columns={close.columns[0]: "ZZZ"})
    with pytest.raises(ValueError, match=r"entries has columns .*ZZZ.*missing: \['S00'\], not in close: \['ZZZ'\]"):
        threadx.simulate(close, other, exits, cash_sharing=True)
    with pytest.raises(ValueError, match="exits has other bars \\(index\\) than close"):
        threadx.simulate(close, entries, exits.reset_index(drop=True), cash_sharing=True)


def symbol_frames() -> Dict[str, pd.DataFrame]:
    """Three symbols on different clocks: one later, one with every 7th bar missing."""
    a = threadx.synthetic(bars=3000, seed=1)
    b = threadx.synthetic(bars=3500, seed=2).iloc[500:]
    c = threadx.synthetic(bars=3000, seed=3)
    return {"AAA": a, "BBB": b, "CCC": c[np.arange(len(c)) % 7 != 3]}


# bb_atr (a stop on closes) and trend_trail (a trail checked inside the bar).
RULES = {
    "bb_atr": ("bb_atr", {"bb_period": 30, "atr_mult": 2}, {"bb_period": [20, 30], "atr_mult": [1, 2]}),
    "trend_trail": (str(REPO / "examples/strategies/trend_trail.toml"), {"fast": 10, "trail_mult": 2},
                    {"fast": [5, 10], "trail_mult": [2, 3]}),
    "bb_long_short": (str(REPO / "examples/strategies/bb_long_short.toml"), {"bb_period": 20, "bb_std": 1.5},
                      {"bb_period": [10, 20], "bb_std": [1.5, 2]}),
}


@pytest.mark.parametrize("rules", list(RULES))
def test_a_portfolio_backtest_is_its_sweeps_row_and_adds_up_at_every_bar(rules: str) -> None:
    frames = symbol_frames()
    strategy, params, grid = RULES[rules]
    sizing = {"size": 0.4, "size_type": "percent", "init_cash": 10_000.0}
    bt = threadx.backtest(frames, strategy, portfolio=True, **params, **sizing)
    rows = threadx.sweep(frames, strategy, grid=grid, portfolio=True, progress=False, **sizing)
    row = rows[np.logical_and.reduce([rows[name] == value for name, value in params.items()])].iloc[0]
    for metric in threadx.METRICS:
        assert (row[metric] == bt.metrics[metric]) or (np.isnan(row[metric]) and np.isnan(bt.metrics[metric])), metric
    # A portfolio's rows carry its turnover and mean positions held: the backtest's bits.
    assert list(rows.columns[-2:]) == ["turnover", "mean_positions"]
    assert row["turnover"] == bt.turnover and row["mean_positions"] == bt.mean_positions
    assert len(rows) == 4 and bt.metrics["trades"] == len(bt.trades) > 30
    assert ((bt.trades["exit_reason"] == "trail").sum() > 10) == (rules == "trend_trail")
    # Equity = cash + each symbol's units at its last close, at every bar of the clock.
    closes = pd.concat({name: f["close"] for name, f in frames.items()}, axis=1).ffill().fillna(0.0)
    closes.index = closes.index.tz_localize("UTC") if closes.index.tz is None else closes.index
    assert list(closes.index) == list(bt.equity.index)
    value = bt.cash + (bt.positions * closes[bt.positions.columns]).sum(axis=1)
    np.testing.assert_allclose(bt.equity, value, rtol=1e-12)
    assert set(bt.trades["symbol"]) == set(frames)
    assert ((bt.trades["side"] == "short").sum() > 10) == (rules == "bb_long_short")
    # The closed trades' profits and the open ones' at the last close (a short's: what its
    # sale took in less the units at that close) add up to the equity.
    closed = bt.trades["pnl"].notna()
    held = bt.trades.loc[~closed]
    sign = np.where(held["side"] == "short", -1.0, 1.0)
    moved = held["size"] * (closes.iloc[-1][held["symbol"]].to_numpy() - held["entry_price"])
    open_profit = (sign * moved - held["entry_fees"]).sum()
    np.testing.assert_allclose(10_000 + bt.trades.loc[closed, "pnl"].sum() + open_profit, bt.equity.iloc[-1], rtol=1e-9)
    # The turnover (every fill's value over the mean equity) and the positions held on average.
    traded = (bt.trades["size"] * (bt.trades["entry_price"] + bt.trades["exit_price"].fillna(0.0))).sum()
    np.testing.assert_allclose(bt.turnover, traded / bt.equity.mean(), rtol=1e-9)
    np.testing.assert_allclose(bt.mean_positions, (bt.positions != 0).sum(axis=1).mean(), rtol=1e-12)


def test_a_portfolio_search_ranks_by_its_own_metrics_and_a_single_run_cannot() -> None:
    frames = symbol_frames()
    grid = {"bb_period": [10, 15, 20, 25, 30], "atr_mult": [1, 2]}
    rows = threadx.sweep(frames, "bb_atr", grid=grid, portfolio=True, size=0.3, progress=False)
    trials, best = threadx.search(frames, "bb_atr", "random", 10, grid=grid, portfolio=True, size=0.3, by="turnover",
                                  minimize=True, constraints=["mean_positions > 0.4"], progress=False)
    kept = rows[rows["mean_positions"] > 0.4]
    assert len(trials) == 10 and best["turnover"] == kept["turnover"].min()
    for wrong in [{"by": "turnover"}, {"constraints": ["mean_positions > 1"]}]:
        with pytest.raises(ValueError, match="is a portfolio's metric: a single run's rows have none"):
            threadx.sweep(frames["AAA"], "bb_atr", grid=grid, progress=False, **wrong)
        with pytest.raises(ValueError, match="is a portfolio's metric: a single run's rows have none"):
            threadx.search(frames["AAA"], "bb_atr", "random", 4, grid=grid, progress=False, **wrong)


def test_one_symbol_with_all_the_cash_is_the_single_backtest() -> None:
    df = threadx.synthetic(bars=4000, seed=9)
    single = threadx.backtest(df, "bb_atr", bb_period=25)
    account = threadx.backtest({"X": df}, "bb_atr", portfolio=True, bb_period=25)
    for metric in ("total_return", "sharpe", "max_drawdown", "win_rate", "sqn"):
        assert abs(account.metrics[metric] - single.metrics[metric]) <= 1e-10 * max(abs(single.metrics[metric]), 1e-6), metric
    assert account.metrics["trades"] == single.metrics["trades"]


def test_sizing_without_a_portfolio_is_named_and_next_open_fills_run_as_a_portfolio() -> None:
    df = threadx.synthetic(bars=2000, seed=4)
    with pytest.raises(ValueError, match="size, init_cash: sizing needs portfolio=True"):
        threadx.backtest(df, "bb_atr", size=0.5, init_cash=100.0)
    with pytest.raises(ValueError, match="size_type: sizing needs portfolio=True"):
        threadx.sweep(df, size_type="value", progress=False)
    # Every rule file's rules run as a portfolio, next-open fills too: one symbol all in is its single run.
    rules = str(REPO / "examples" / "strategies" / "breakout_next_open.toml")
    single, account = threadx.backtest(df, rules), threadx.backtest({"A": df}, rules, portfolio=True)
    assert account.metrics["trades"] == single.metrics["trades"] > 3
    assert abs(account.metrics["total_return"] - single.metrics["total_return"]) <= 1e-10 * max(abs(single.metrics["total_return"]), 1e-6)


def test_a_portfolio_sweeps_overfitting_statistics_are_the_clis(cli: Cli) -> None:
    # The same three symbols as Parquet files for the CLI and as frames for Python.
    (cli.workdir / "u").mkdir()
    frames = {}
    for seed, name in enumerate(["AAA", "BBB", "CCC"], 1):
        cli.run("data", "synth", "--bars", "3000", "--seed", str(seed), "--out", f"u/{name}.parquet")
        frames[name] = pd.read_parquet(cli.workdir / "u" / f"{name}.parquet")
    grid = {"bb_period": [10, 20, 30], "atr_mult": [1, 2]}
    rows = threadx.sweep(frames, "bb_atr", grid=grid, portfolio=True, size=0.4, overfitting={"blocks": 8},
                         progress=False)
    cli.run("--device", "cpu", "sweep", "--data", "u/*.parquet", "--portfolio", "--size", "0.4", "--overfitting",
            "--blocks", "8", *grid_flags(grid), "--out", "p.csv", "--quiet")
    ours = dict(rows.attrs["overfitting"])
    theirs = json.loads((cli.workdir / "p.json").read_text())["overfitting"]
    for o in (ours, theirs):
        o.pop("seconds")
        o.pop("plots", None)
    assert ours == theirs
    assert ours["blocks"]["count"] == 8 and len(ours["top"]) == 6 and 0.0 <= ours["pbo"] <= 1.0
    assert list(rows["sharpe"]) == list(cli.csv("p.csv")["sharpe"])


def test_a_portfolios_walk_forward_is_the_clis(cli: Cli) -> None:
    # Three symbols, one ending early: its last windows trade the other two.
    (cli.workdir / "u").mkdir()
    frames = {}
    for seed, (name, bars) in enumerate([("AAA", 3000), ("BBB", 1800), ("CCC", 3000)], 1):
        cli.run("data", "synth", "--bars", str(bars), "--seed", str(seed), "--out", f"u/{name}.parquet")
        frames[name] = pd.read_parquet(cli.workdir / "u" / f"{name}.parquet")
    grid = {"bb_period": [10, 20, 30], "atr_mult": [1, 2]}
    windows = threadx.sweep(frames, "bb_atr", grid=grid, walk_forward="train=1000,test=500", portfolio=True,
                            size=0.4, by="total_return", progress=False)
    cli.run("sweep", "--data", "u/*.parquet", "--portfolio", "--size", "0.4", "--strategy", "bb_atr",
            *grid_flags(grid), "--walk-forward", "train=1000,test=500", "--by", "total_return", "--out", "w.csv")
    theirs = pd.read_csv(cli.workdir / "w.csv").set_index("window")
    assert len(windows) == len(theirs) == 4
    assert list(windows["combo"]) == list(theirs["combo"])
    for metric in ("in_sample_total_return", "total_return", "sharpe", "trades", "exposure"):
        np.testing.assert_array_equal(windows[metric].to_numpy(float), theirs[metric].to_numpy(float), err_msg=metric)
    assert (windows["trades"] > 0).all()


def test_a_portfolio_search_evaluates_the_sweeps_accounts() -> None:
    frames = symbol_frames()
    grid = {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.0], "atr_mult": [1, 2, 3]}
    sizing = {"size": 0.4, "init_cash": 5000.0}
    rows = threadx.sweep(frames, "bb_atr", grid=grid, portfolio=True, progress=False, **sizing)
    trials, best = threadx.search(frames, "bb_atr", "tpe", 10, grid=grid, seed=2, batch=4, portfolio=True,
                                  progress=False, overfitting={"blocks": 8}, **sizing)
    assert len(trials) == 10 and trials["combo"].is_unique
    columns = list(rows.columns)
    # The same bits, NaN where NaN.
    np.testing.assert_array_equal(trials[columns].to_numpy(), rows.loc[trials["combo"], columns].to_numpy())
    assert best["sharpe"] == trials["sharpe"].max()
    assert len(trials.attrs["overfitting"]["top"]) == 10
    with pytest.raises(ValueError, match="size: sizing needs portfolio=True"):
        threadx.search(frames["AAA"], "bb_atr", "random", 4, size=0.5, progress=False)


def test_a_rule_files_sizing_table_sizes_the_account_and_keywords_take_its_place(tmp_path: Any) -> None:
    rules = (REPO / "examples" / "strategies" / "donchian.toml").read_text()
    sized = tmp_path / "sized.toml"
    sized.write_text(rules + "\n[sizing]\nsize = 0.25\ninit_cash = 5000\nmax_positions = 2\n")
    plain = str(REPO / "examples" / "strategies" / "donchian.toml")
    frames = symbol_frames()
    by_table = threadx.backtest(frames, str(sized), portfolio=True)
    by_keywords = threadx.backtest(frames, plain, portfolio=True, size=0.25, init_cash=5000, max_positions=2)
    assert by_table.metrics == by_keywords.metrics and by_table.equity.iloc[0] <= 5000
    overridden = threadx.backtest(frames, str(sized), portfolio=True, size=0.5)
    assert overridden.metrics == threadx.backtest(frames, plain, portfolio=True, size=0.5, init_cash=5000,
                                                  max_positions=2).metrics
    rows = threadx.sweep(frames, str(sized), grid={"n": [20]}, portfolio=True, progress=False)
    assert rows["total_return"].iloc[0] == by_table.metrics["total_return"]
    with pytest.raises(ValueError, match="its \\[sizing\\] sizes each entry as an account does"):
        threadx.backtest(frames["AAA"], str(sized))
    # A size swept as a parameter: each row the account of its fixed size.
    swept = tmp_path / "frac.toml"
    frac = 'frac = { kind = "float", default = 0.5, min = 0.05, max = 1 }\nm = { kind'
    swept.write_text(rules.replace("m = { kind", frac) + '\n[sizing]\nsize = "frac"\ninit_cash = 1000\n')
    rows = threadx.sweep(frames, str(swept), grid={"n": [20], "frac": [0.25, 1.0]}, portfolio=True, progress=False)
    for f in (0.25, 1.0):
        fixed = threadx.backtest(frames, plain, portfolio=True, n=20, size=f, init_cash=1000)
        assert rows.loc[rows["frac"] == f, "total_return"].iloc[0] == fixed.metrics["total_return"]
    assert threadx.backtest(frames, str(swept), portfolio=True, n=20, frac=0.25).metrics == \
        threadx.backtest(frames, plain, portfolio=True, n=20, size=0.25, init_cash=1000).metrics


def test_max_positions_caps_the_positions_held_at_every_bar() -> None:
    close, entries, exits = universe(7, 12)
    options = {"size": 100.0, "size_type": "value", "init_cash": 1_000_000.0, "fees": 0.001}
    free = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, **options)
    capped = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, max_positions=3, **options)
    held = (capped.attrs["positions"] > 0).sum(axis=1)
    assert held.max() == 3 and ((free.attrs["positions"] > 0).sum(axis=1)).max() > 3
    assert 10 < capped["trades"].iloc[0] < free["trades"].iloc[0]
    with pytest.raises(ValueError, match="max_positions=0: at least 1 position"):
        threadx.simulate(close, entries, exits, cash_sharing=True, max_positions=0)


def test_a_leverage_cap_bounds_the_positions_and_a_sweeps_row_is_its_backtest() -> None:
    frames = symbol_frames()
    bt = threadx.backtest(frames, "bb_atr", fee=0.0, portfolio=True, size=0.6, leverage=0.5, bb_period=20)
    entered = bt.cash.diff() < 0
    held = bt.equity - bt.cash
    assert entered.sum() > 10
    assert (held[entered] <= 0.5 * bt.equity[entered] * (1 + 1e-12)).all()
    rows = threadx.sweep(frames, "bb_atr", grid={"bb_period": [20]}, fee=0.0, portfolio=True, size=0.6, leverage=0.5,
                         progress=False)
    assert rows["total_return"].iloc[0] == bt.metrics["total_return"]
    plain = threadx.backtest(frames, "bb_atr", fee=0.0, portfolio=True, size=0.6, bb_period=20)
    assert plain.metrics["total_return"] != bt.metrics["total_return"]
    with pytest.raises(ValueError, match="leverage=0: a leverage cap is a positive multiple"):
        threadx.backtest(frames, "bb_atr", portfolio=True, leverage=0)
