"""Is the winner real? CSCV's probability of backtest overfitting and the deflated
Sharpe ratio on your own returns (the arithmetic ``threadx sweep --overfitting`` uses).
See docs/overfitting.md."""

from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import pandas as pd

from . import _threadx
from ._inputs import _opt_int

Returns = Union[pd.DataFrame, pd.Series, np.ndarray]


@dataclass(frozen=True)
class PboResult:
    """What CSCV says of a set of strategies' returns.

    ``pbo``: the share of splits whose in-sample best ranks at or below the median out
    of sample; NaN (undefined) with one strategy, or when every split ranks all
    strategies alike out of sample (identical ones, or no trades). ``prob_oos_loss``: the share whose in-sample best has an out-of-sample
    Sharpe ratio below 0. ``slope``, ``intercept``: least squares of out-of-sample on
    in-sample Sharpe ratio over the splits' bests. ``splits``: one row per split with the
    ``logit``, the in-sample ``best`` (a column label) and its ``is_sharpe`` and
    ``oos_sharpe`` (per bar). ``exhaustive``: every split was used (else a seeded draw)."""

    pbo: float
    prob_oos_loss: float
    slope: float
    intercept: float
    exhaustive: bool
    splits: pd.DataFrame


def _matrix(returns: Returns) -> "tuple[np.ndarray, list[Any]]":
    if isinstance(returns, pd.Series):
        returns = returns.to_frame()
    if isinstance(returns, pd.DataFrame):
        return np.ascontiguousarray(returns.to_numpy(dtype=np.float64)), list(returns.columns)
    values = np.asarray(returns, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"returns must be T bars × N strategies (got {values.ndim} dimensions)")
    return np.ascontiguousarray(values), list(range(values.shape[1]))


def pbo(returns: Returns, S: int = 16, *, splits: int = 1000, seed: int = 0) -> PboResult:
    """The probability of backtest overfitting of ``returns`` (T bars × N strategies, a
    frame or an array), by combinatorially symmetric cross-validation (Bailey, Borwein,
    López de Prado & Zhu, 2015): the first T mod S bars dropped, S blocks of T div S bars,
    every split of the blocks into halves while N·C(S, S/2) ≤ 2·10^8, else ``splits``
    random ones drawn with ``seed``. Ranks ascend with ties averaged; a NaN Sharpe ratio
    ranks below every number."""
    values, labels = _matrix(returns)
    if not _opt_int("splits", splits):
        raise ValueError(f"splits={splits}: at least 1 random split is needed")
    out = _threadx.pbo(values, int(S), int(splits), _opt_int("seed", seed) or 0)
    table = pd.DataFrame(
        {
            "logit": out["logits"],
            "best": [labels[i] for i in out["best"]],
            "is_sharpe": out["is_sharpe"],
            "oos_sharpe": out["oos_sharpe"],
        }
    )
    table.index.name = "split"
    return PboResult(
        pbo=float(out["pbo"]),
        prob_oos_loss=float(out["prob_oos_loss"]),
        slope=float(out["slope"]),
        intercept=float(out["intercept"]),
        exhaustive=bool(out["exhaustive"]),
        splits=table,
    )


def deflated_sharpe(
    returns: Returns, trials: Optional[float] = None, sharpe_std: Optional[float] = None
) -> pd.DataFrame:
    """The probabilistic and deflated Sharpe ratios (Bailey & López de Prado, 2014) of
    each column of ``returns`` (T bars × N strategies): one row per column with the
    ``sharpe`` ratio (per bar, ddof 1), the returns' ``skew`` and (non-excess)
    ``kurtosis``, ``psr`` against 0 and ``dsr`` against SR₀ = ``sharpe_std`` × E[max of
    ``trials`` standard normals]. ``trials`` defaults to the number of columns and
    ``sharpe_std`` to the columns' Sharpe ratios' standard deviation; a single series
    needs both. SR₀ and the numbers used are in ``.attrs``."""
    values, labels = _matrix(returns)
    if trials is not None and not (np.isfinite(trials) and trials >= 1):
        raise ValueError(f"trials={trials}: must be a number of trials, at least 1")
    if sharpe_std is not None and not (np.isfinite(sharpe_std) and sharpe_std >= 0):
        raise ValueError(f"sharpe_std={sharpe_std}: must be a spread of Sharpe ratios, ≥ 0")
    out = _threadx.deflated_sharpe_table(
        values, None if trials is None else float(trials), None if sharpe_std is None else float(sharpe_std)
    )
    table = pd.DataFrame(
        {name: out[name] for name in ("sharpe", "psr", "dsr", "skew", "kurtosis")},
        index=pd.Index(labels, name="strategy"),
    )
    table.attrs.update({"sr0": out["sr0"], "sharpe_std": out["sharpe_std"], "trials": out["trials"]})
    return table
