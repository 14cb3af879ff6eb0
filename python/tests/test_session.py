"""``threadx.Session``: a batch of parameter sets gives the CLI's rows for them, on the
CPU and on every adapter (lavapipe in CI), from a list of dicts or a DataFrame; bad
batches are refused with the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import threadx
from conftest import grid_flags
from test_values import DATA, assert_same_as_csv

GRID = {"bb_period": [10, 20, 30, 40], "bb_std": [1.5, 2.0, 2.5], "atr_period": [7, 14], "atr_mult": [1.0, 2.0, 3.0]}


@pytest.fixture(scope="module")
def csv_rows(tmp_path_factory) -> pd.DataFrame:
    from conftest import Cli, _cli_path

    cli = Cli(_cli_path(), tmp_path_factory.mktemp("session"))
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(GRID), "--out", "r.csv", "--quiet")
    return cli.csv("r.csv", index_col="combo")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_evaluate_gives_the_clis_rows_for_random_combos(data: pd.DataFrame, csv_rows: pd.DataFrame, device: str) -> None:
    session = threadx.Session(data, "bb_atr", grid=GRID, device=device)
    assert session.grid_len == len(csv_rows) == 72
    assert session.parameters == GRID
    combos = np.random.default_rng(5).choice(len(csv_rows), size=40, replace=True)
    want = csv_rows.iloc[combos]
    params = want[list(GRID)].to_dict("records")
    got = session.evaluate(params)
    assert_same_as_csv(got, want)
    # A DataFrame of parameter columns gives the same rows; so do batches of one.
    assert_same_as_csv(session.evaluate(want[list(GRID)]), want)
    assert_same_as_csv(session.evaluate(params[:1]), want.iloc[:1])


def test_a_parameter_with_one_value_may_be_left_out_and_choices_go_by_name(data: pd.DataFrame) -> None:
    session = threadx.Session(data, "ma_cross", grid={"ma_type": ["sma", "ema"], "fast": [5, 10]}, device="cpu")
    rows = session.evaluate([{"ma_type": "ema", "fast": 10}, {"ma_type": "SMA", "fast": 5}])
    whole = threadx.sweep(data, "ma_cross", grid={"ma_type": ["sma", "ema"], "fast": [5, 10]}, device="cpu",
                          progress=False)
    pd.testing.assert_frame_equal(rows, whole.loc[[3, 0]], check_exact=True)


def test_bad_batches_are_refused_with_the_reason(data: pd.DataFrame) -> None:
    session = threadx.Session(data, "bb_atr", grid=GRID, device="cpu")
    with pytest.raises(ValueError, match=r"bb_period=15: not on the session's grid \(its values: 10, 20, 30, 40\)"):
        session.evaluate([{"bb_period": 15, "bb_std": 2.0, "atr_period": 7, "atr_mult": 1.0}])
    with pytest.raises(ValueError, match="no column `atr_mult`, and the grid gives it 3 values"):
        session.evaluate([{"bb_period": 10, "bb_std": 2.0, "atr_period": 7}])
    # A misspelt parameter is named beside the one it leaves out.
    with pytest.raises(ValueError, match=r"no column `atr_mult` \(given, and no parameter: atr_mul\), .*"
                       r"the parameters are bb_period, bb_std, atr_period, atr_mult"):
        session.evaluate([{"bb_period": 10, "bb_std": 2.0, "atr_period": 7, "atr_mul": 1.0}])
    # No parameter set at all (an optimiser that asks none): no rows, the sweep's columns.
    empty = session.evaluate([])
    assert empty.empty and list(empty.columns[:4]) == list(GRID)
    with pytest.raises(TypeError, match="unexpected options"):
        threadx.Session(data, "bb_atr", colour="red")
    with pytest.raises(ValueError, match="bb_period=1: out of range"):
        threadx.Session(data, "bb_atr", grid={"bb_period": [1, 2]})
