"""The overfitting statistics: ``threadx.pbo`` against pypbo's procedure written out in
numpy (concatenated halves, Sharpe ratio per column, ranks with ties averaged, first
argmax, logit of rank / (N + 1)); ``threadx.deflated_sharpe`` against the paper's formula;
``sweep(overfitting=True)`` against ``threadx sweep --overfitting``'s summary."""

from __future__ import annotations

import itertools
import json
import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

import threadx
from conftest import grid_flags

DATA = "synthetic:bars=3000,seed=7"


def rankdata(x: np.ndarray) -> np.ndarray:
    """scipy.stats.rankdata's average ranks (1-based), without scipy."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pypbo_procedure(M: np.ndarray, S: int) -> tuple[float, np.ndarray, list[int]]:
    T, N = M.shape
    M = M[T % S :]
    sub = len(M) // S
    chunks = [M[i * sub : (i + 1) * sub] for i in range(S)]
    logits, bests = [], []
    for picked in itertools.combinations(range(S), S // 2):
        rest = [i for i in range(S) if i not in picked]
        J = np.concatenate([chunks[i] for i in picked])
        Jb = np.concatenate([chunks[i] for i in rest])
        R = J.mean(axis=0) / J.std(axis=0, ddof=1)
        Rb = Jb.mean(axis=0) / Jb.std(axis=0, ddof=1)
        n = int(np.argmax(rankdata(R)))
        w = rankdata(Rb)[n] / (N + 1)
        logits.append(math.log(w / (1 - w)))
        bests.append(n)
    logits_a = np.array(logits)
    return float((logits_a <= 0).mean()), logits_a, bests


def test_pbo_is_pypbos_procedure_on_noise_and_on_an_edge() -> None:
    rng = np.random.default_rng(3)
    M = rng.normal(0, 0.01, size=(1203, 30))
    M[:, 7] += 0.002  # a planted edge
    frame = pd.DataFrame(M, columns=[f"s{i}" for i in range(30)])
    got = threadx.pbo(frame, S=10)
    want_pbo, want_logits, want_best = pypbo_procedure(M, 10)
    assert got.exhaustive and len(got.splits) == math.comb(10, 5)
    np.testing.assert_allclose(got.splits["logit"].to_numpy(), want_logits, rtol=0, atol=1e-12)
    assert list(got.splits["best"]) == [f"s{i}" for i in want_best]
    assert got.pbo == want_pbo
    assert got.pbo < 0.1
    noise = threadx.pbo(rng.normal(0, 0.01, size=(1600, 40)), S=16)
    assert 0.25 < noise.pbo < 0.75


def test_pbo_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="blocks"):
        threadx.pbo(np.zeros((100, 3)), S=7)
    with pytest.raises(ValueError, match="not a finite return"):
        threadx.pbo(np.array([[0.0, np.nan]] * 50), S=4)
    # The sweep's words for the sweep's own checks (a negative seed was an OverflowError).
    with pytest.raises(ValueError, match=r"seed must be a whole number ≥ 0 \(got -1\)"):
        threadx.pbo(np.zeros((100, 3)), S=4, seed=-1)
    with pytest.raises(ValueError, match="splits=0: at least 1 random split is needed"):
        threadx.pbo(np.zeros((100, 3)), S=4, splits=0)


def test_pbo_is_undefined_where_nothing_is_ranked() -> None:
    rng = np.random.default_rng(5)
    one = rng.normal(0, 0.01, (400, 1))
    assert math.isnan(threadx.pbo(one, S=8).pbo), "one strategy"
    assert math.isnan(threadx.pbo(np.repeat(one, 6, axis=1), S=8).pbo), "six identical strategies"
    assert math.isnan(threadx.pbo(np.zeros((400, 4)), S=8).pbo), "no trades"
    assert 0.0 <= threadx.pbo(rng.normal(0, 0.01, (400, 6)), S=8).pbo <= 1.0


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_deflated_sharpe_is_the_papers_formula() -> None:
    rng = np.random.default_rng(5)
    M = rng.standard_t(5, size=(2500, 20)) * 0.01 + 0.0004
    got = threadx.deflated_sharpe(pd.DataFrame(M))
    sharpe = M.mean(axis=0) / M.std(axis=0, ddof=1)
    np.testing.assert_allclose(got["sharpe"], sharpe, rtol=1e-12)
    d = M - M.mean(axis=0)
    m2 = (d**2).mean(axis=0)
    skew, kurt = (d**3).mean(axis=0) / m2**1.5, (d**4).mean(axis=0) / m2**2
    np.testing.assert_allclose(got["skew"], skew, rtol=1e-9)
    np.testing.assert_allclose(got["kurtosis"], kurt, rtol=1e-9)
    g = 0.5772156649015329
    ppf = NormalDist().inv_cdf
    emax = (1 - g) * ppf(1 - 1 / 20) + g * ppf(1 - 1 / (20 * math.e))
    sr0 = sharpe.std(ddof=1) * emax
    assert got.attrs["sr0"] == pytest.approx(sr0, rel=1e-9)
    for i in range(20):
        spread = 1 - skew[i] * sharpe[i] + (kurt[i] - 1) / 4 * sharpe[i] ** 2
        dsr = normal_cdf((sharpe[i] - sr0) * math.sqrt(2499) / math.sqrt(spread))
        psr = normal_cdf(sharpe[i] * math.sqrt(2499) / math.sqrt(spread))
        assert got["dsr"].iloc[i] == pytest.approx(dsr, rel=1e-9, abs=1e-12)
        assert got["psr"].iloc[i] == pytest.approx(psr, rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="sharpe_std"):
        threadx.deflated_sharpe(M[:, 0])
    with pytest.raises(ValueError, match="trials=0: must be a number of trials, at least 1"):
        threadx.deflated_sharpe(M, trials=0)
    with pytest.raises(ValueError, match="sharpe_std=-0.01: must be a spread"):
        threadx.deflated_sharpe(M, sharpe_std=-0.01)
    one = threadx.deflated_sharpe(M[:, 0], trials=100, sharpe_std=0.01)
    assert one.attrs["trials"] == 100 and 0 <= one["dsr"].iloc[0] <= 1


def test_sweep_overfitting_is_the_clis(cli, data: pd.DataFrame) -> None:
    grid = {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.0, 2.5], "atr_period": [14], "atr_mult": [1.0, 2.0, 3.0]}
    rows = threadx.sweep(data, "bb_atr", grid=grid, device="cpu", progress=False, overfitting={"blocks": 8})
    got = rows.attrs["overfitting"]
    cli.run("--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid), "--blocks", "8", "--out", "r.csv")
    want = json.loads((cli.workdir / "r.json").read_text())["overfitting"]
    for key in ["pbo", "prob_oos_loss", "degradation_slope", "logit_quantiles", "dsr", "psr", "sr0", "top", "trials"]:
        assert got[key] == want[key], key
    assert want["splits"] == {"count": 70, "exhaustive": True, "seed": None}
    assert want["blocks"]["count"] == 8 and want["blocks"]["bars"] == 3000 // 8
    assert len(want["top"]) == 10 and want["top"][0]["neighbours"] >= 1
    assert (cli.workdir / "r-pbo.svg").exists() and (cli.workdir / "r-oos.svg").exists()
    assert "overfitting" not in threadx.sweep(data, "bb_atr", grid=grid, device="cpu", progress=False).attrs


def test_search_overfitting_is_the_clis(cli, data: pd.DataFrame) -> None:
    grid = {"bb_period": [10, 20, 30], "bb_std": [1.5, 2.0, 2.5], "atr_period": [14], "atr_mult": [1.0, 2.0, 3.0]}
    found = threadx.search(
        data, "bb_atr", "sobol", 20, grid=grid, batch=8, seed=3, device="cpu", progress=False, overfitting={"blocks": 8}
    )
    got = found.trials.attrs["overfitting"]
    cli.run(
        "--device", "cpu", "sweep", "--data", DATA, *grid_flags(grid),
        "--search", "sobol", "--trials", "20", "--batch", "8", "--seed", "3", "--blocks", "8", "--out", "s.csv",
    )  # fmt: skip
    want = json.loads((cli.workdir / "s.json").read_text())["overfitting"]
    for key in ["pbo", "prob_oos_loss", "degradation_slope", "logit_quantiles", "dsr", "psr", "sr0", "top", "trials"]:
        assert got[key] == want[key], key
    assert want["trials"] == {"n": 20.0, "source": "combos evaluated"}
    assert "overfitting" not in threadx.search(data, "bb_atr", "sobol", 20, grid=grid, progress=False).trials.attrs
