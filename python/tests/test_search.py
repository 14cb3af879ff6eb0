"""threadx.search: the CLI's trials in order, the best feasible row, stopping rules and
the refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import threadx
from conftest import grid_flags
from test_values import DATA, assert_same_as_csv

GRID = {"bb_period": list(range(10, 60, 5)), "bb_std": [1.5, 2, 2.5], "atr_period": [7, 14], "atr_mult": [1, 2, 3, 4]}


@pytest.mark.parametrize("method", ["tpe", "sobol"])
def test_a_search_is_the_clis_trials(cli, data: pd.DataFrame, method: str) -> None:
    found = threadx.search(data, method=method, trials=70, grid=GRID, batch=16, seed=4,
                           constraints=["trades >= 10"], device="cpu", progress=False)
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(GRID), "--search", method, "--trials", "70",
            "--batch", "16", "--seed", "4", "--constraint", "trades >= 10", "--out", "s.csv", "--quiet")
    want = cli.csv("s.csv", index_col="trial")
    assert found.trials.index.name == "trial" and list(found.trials.index) == list(range(70))
    assert_same_as_csv(found.trials, want)
    trials, best = found
    feasible = trials[trials["trades"] >= 10]
    assert best is not None and best.name == feasible["sharpe"].idxmax()
    assert best["sharpe"] == feasible["sharpe"].max()
    assert found.stop == "trials" and found.seconds >= found.search_seconds >= 0


def test_minimize_patience_and_target(data: pd.DataFrame) -> None:
    low = threadx.search(data, method="random", trials=200, grid=GRID, by="max_drawdown", minimize=True,
                         device="cpu", progress=False)
    assert low.best["max_drawdown"] == low.trials["max_drawdown"].min()
    patient = threadx.search(data, method="random", trials=240, grid=GRID, patience=15, progress=False)
    sharpe = patient.trials["sharpe"].to_numpy()
    best_before = np.fmax.accumulate(np.where(np.isnan(sharpe), -np.inf, sharpe))
    gains = np.flatnonzero(np.diff(best_before, prepend=-np.inf) > 0)
    assert patient.stop == "patience" and len(sharpe) == gains[-1] + 1 + 15
    target = float(np.sort(patient.trials["sharpe"].dropna())[-3])
    hit = threadx.search(data, method="random", trials=240, grid=GRID, target=target, progress=False)
    assert hit.stop == "target" and hit.trials["sharpe"].iloc[-1] >= target
    assert (hit.trials["sharpe"].iloc[:-1].dropna() < target).all()


def test_bad_search_arguments_are_refused(data: pd.DataFrame) -> None:
    # Said as a Python caller writes it: no position in the engine's JSON, no CLI flag.
    with pytest.raises(ValueError, match=r"unknown search method `grid` \(known: random, sobol, lhs, tpe\)$"):
        threadx.search(data, method="grid", trials=5, progress=False)
    with pytest.raises(ValueError, match=r"^target=inf: a finite number is needed"):
        threadx.search(data, trials=5, target=float("inf"), progress=False)
    with pytest.raises(ValueError, match=r"^blocks=7: must be an even number"):
        threadx.sweep(data, grid={"bb_period": [10, 20]}, overfitting={"blocks": 7}, progress=False)
    with pytest.raises(ValueError, match="unknown metric `profit`"):
        threadx.search(data, trials=5, constraints="profit > 1", progress=False)
    with pytest.raises(ValueError, match="trials must be a whole number"):
        threadx.search(data, trials=-1, progress=False)


def test_more_trials_than_the_grid_has_run_the_whole_grid_once(data: pd.DataFrame) -> None:
    small = {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.5], "atr_period": [7, 14]}
    for method in ("random", "sobol", "tpe"):
        whole = threadx.search(data, method=method, trials=10**9, grid=small, progress=False)
        assert sorted(whole.trials["combo"]) == list(range(12)), method
