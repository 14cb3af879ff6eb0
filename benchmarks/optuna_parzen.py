"""Optuna's own Parzen-estimator numbers, the golden values of
crates/sweep/src/search/tpe.rs's tests: `pip install optuna==5.0.0`, then run this file."""

from __future__ import annotations

import numpy as np
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator, _ParzenEstimatorParameters
from optuna.samplers._tpe.sampler import default_gamma, default_weights

PARAMS = _ParzenEstimatorParameters(
    prior_weight=1.0,
    consider_magic_clip=True,
    consider_endpoints=False,
    weights=default_weights,
    multivariate=False,
)


def pmf(observed: list[int], distribution: IntDistribution | CategoricalDistribution, size: int) -> list[float]:
    """The estimator's probability of each rank (or choice), from its log-density."""
    estimator = _ParzenEstimator({"x": np.array(observed, dtype=float)}, {"x": distribution}, PARAMS)
    return np.exp(estimator.log_pdf({"x": np.arange(size, dtype=float)})).tolist()


def main() -> None:
    observed = [3, 3, 0, 9, 4, 7, 1, 3, 8, 2, 5, 6, 3, 3, 4, 2, 9, 0, 1, 1, 4, 5, 6, 7, 8, 2, 3, 4, 11, 10]
    print("ordinal, 12 ranks:", pmf(observed, IntDistribution(0, 11), 12))
    print("ordinal, one observation:", pmf([2], IntDistribution(0, 4), 5))
    print("ordinal, none:", pmf([], IntDistribution(0, 4), 5))
    print("categorical:", pmf([2, 0, 2, 3], CategoricalDistribution(["a", "b", "c", "d", "e"]), 5))
    print("default_weights(30):", default_weights(30).tolist())
    print("default_gamma:", [default_gamma(n) for n in [0, 1, 9, 10, 11, 100, 250, 251, 1000]])


if __name__ == "__main__":
    main()
