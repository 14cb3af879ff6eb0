"""Optuna's TPE driving ThreadX: ask a batch of trials, evaluate the whole batch in one
``Session.evaluate`` call (the GIL released, every core or GPU busy), tell the values.

    pip install ./python optuna      # Optuna is this example's, not a dependency of threadx
    python examples/python/optuna_search.py [--trials 2000] [--batch 200]

The search space is the session's grid (each parameter's values as a categorical), so
every trial is a combo of the grid and its row is the very row ``threadx sweep`` writes
for it. At the end the best trial is compared with the best of the whole grid.
"""

from __future__ import annotations

import argparse
import math
import time

import optuna

import threadx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--by", default="sharpe")
    args = parser.parse_args()

    data = threadx.synthetic(bars=35_040, seed=42)
    grid = {
        "bb_period": range(10, 101, 2),
        "bb_std": [1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0],
        "atr_period": range(5, 51, 5),
        "atr_mult": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0],
    }
    session = threadx.Session(data, "bb_atr", grid=grid)
    print(f"{session!r}")
    space = {
        name: optuna.distributions.CategoricalDistribution(values) for name, values in session.parameters.items()
    }
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))

    started = time.perf_counter()
    evaluate_s = 0.0
    for _ in range(math.ceil(args.trials / args.batch)):
        trials = [study.ask(space) for _ in range(args.batch)]
        t = time.perf_counter()
        rows = session.evaluate([trial.params for trial in trials])
        evaluate_s += time.perf_counter() - t
        for trial, value in zip(trials, rows[args.by].to_numpy()):
            if math.isnan(value):
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, float(value))
    total_s = time.perf_counter() - started
    best = study.best_trial
    print(f"TPE: {len(study.trials)} trials in {total_s:.1f} s ({evaluate_s:.2f} s in ThreadX), "
          f"best {args.by} {best.value:.4f} at {best.params}")

    t = time.perf_counter()
    everything = threadx.sweep(data, "bb_atr", grid=grid, progress=False)
    print(f"the whole grid: {len(everything):,} combos in {time.perf_counter() - t:.1f} s, "
          f"best {args.by} {everything[args.by].max():.4f}")


if __name__ == "__main__":
    main()
