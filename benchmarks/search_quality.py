"""Issue #28's goals for search, on one 5-parameter rule file whose grid has 983,040
combos, on FX-like synthetic data (a year of 15-minute bars):

- quality: `threadx sweep --search tpe --trials 2000` over --seeds seeds; where its best
  ranks in the exhaustive sweep (goal: median in the top 0.1 %), against Optuna's
  TPESampler with the same trials over the exhaustive results as a lookup table (only
  the search differs);
- speed: the search's own share of its run (goal < 10 %), and evaluations per second
  against Optuna calling threadx.backtest one trial at a time (goal ≥ 100×);
- designs: the centred L2 discrepancy of 2,000 random, sobol and lhs trials (lower is
  more even).

    cargo build --release && pip install ./python optuna scipy pandas
    python benchmarks/search_quality.py [--seeds 10] [--trials 2000] [--workdir /tmp/tx-search]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
STRATEGY = ROOT / "examples" / "strategies" / "trend_rsi.toml"
DATA = "synthetic:bars=35040,seed=11,market=fx"
# 16 · 16 · 16 · 16 · 15 = 983,040 combos.
GRID = {
    "trend": "50:800:50",
    "rsi_period": "2:32:2",
    "buy_below": "10:47.5:2.5",
    "sell_above": "50:87.5:2.5",
    "max_hold": "10:150:10",
}
BY = "sharpe"


def threadx_cli(binary: Path, workdir: Path, *args: str) -> str:
    grid = [f"--grid={k}={v}" for k, v in GRID.items()]
    cmd = [str(binary), "--device", "cpu", "sweep", "--data", DATA, "--strategy", str(STRATEGY), *grid, "--by", BY,
           "--quiet", *args]
    return subprocess.run(cmd, cwd=workdir, check=True, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--optuna-backtests", type=int, default=100, help="trials timed for Optuna + threadx.backtest")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tx-search"))
    parser.add_argument("--threadx", type=Path, default=ROOT / "target" / "release" / "threadx")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    out: dict = {"data": DATA, "grid": GRID, "trials": args.trials, "seeds": args.seeds}

    # The exhaustive sweep: the lookup table and the ranks.
    full_csv = args.workdir / "full.csv"
    if not full_csv.exists():
        t = time.perf_counter()
        threadx_cli(args.threadx, args.workdir, "--out", "full.csv", "--heatmap", "full.svg")
        out["exhaustive_s"] = time.perf_counter() - t
    full = pd.read_csv(full_csv, usecols=["combo", *GRID, BY]).set_index("combo").sort_index()
    values = full[BY].to_numpy()
    finite = np.sort(values[np.isfinite(values)])[::-1]
    top = finite[max(0, int(len(values) * 0.001) - 1)]
    out["grid_combos"] = len(full)
    out["top_0.1pct_threshold"] = float(top)
    out["grid_best"] = float(finite[0])

    def share_above(v: float) -> float:
        """The share of the grid's combos strictly better than v (its top-quantile rank)."""
        return float(np.sum(finite > v)) / len(values)

    # ThreadX TPE.
    tpe = []
    for seed in range(args.seeds):
        name = f"tpe-{seed}.csv"
        threadx_cli(args.threadx, args.workdir, "--search", "tpe", "--trials", str(args.trials), "--seed", str(seed),
                    "--out", name, "--heatmap", f"tpe-{seed}-heatmap.svg")
        summary = json.loads((args.workdir / f"tpe-{seed}.json").read_text())["search"]
        best = summary["best"]["value"]
        tpe.append({"seed": seed, "best": best, "top_share": share_above(best),
                    "evals_per_s": summary["evaluations_per_s"], "search_share": summary["search_share"]})
    out["threadx_tpe"] = tpe

    # Optuna's TPESampler over the lookup table: each axis an int over its ranks.
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    axes = [np.unique(full[name].to_numpy()) for name in GRID]
    lens = [len(a) for a in axes]
    strides = np.cumprod([1] + lens[::-1])[::-1][1:]
    floor = float(finite[-1]) - 1.0  # a NaN value (no trade) counts as worse than any

    def objective(trial: "optuna.Trial") -> float:
        combo = sum(trial.suggest_int(name, 0, n - 1) * int(s) for name, n, s in zip(GRID, lens, strides))
        v = values[combo]
        return float(v) if np.isfinite(v) else floor

    opt = []
    for seed in range(args.seeds):
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
        t = time.perf_counter()
        study.optimize(objective, n_trials=args.trials)
        opt.append({"seed": seed, "best": study.best_value, "top_share": share_above(study.best_value),
                    "seconds": time.perf_counter() - t})
    out["optuna_tpe_lookup"] = opt

    # Optuna calling threadx.backtest, one trial at a time.
    import threadx

    data = threadx.load(DATA)
    axis_values = {name: a for name, a in zip(GRID, axes)}

    def backtest_objective(trial: "optuna.Trial") -> float:
        params = {name: axis_values[name][trial.suggest_int(name, 0, len(axis_values[name]) - 1)] for name in GRID}
        params = {k: (int(v) if float(v).is_integer() and k in ("trend", "rsi_period", "max_hold") else float(v))
                  for k, v in params.items()}
        v = threadx.backtest(data, str(STRATEGY), device="cpu", **params).metrics[BY]
        return v if np.isfinite(v) else floor

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
    t = time.perf_counter()
    study.optimize(backtest_objective, n_trials=args.optuna_backtests)
    out["optuna_backtest_evals_per_s"] = args.optuna_backtests / (time.perf_counter() - t)

    # Designs: the centred L2 discrepancy of their trials' points in the unit cube.
    from scipy.stats import qmc

    design = {}
    for method in ["random", "sobol", "lhs"]:
        d = []
        for seed in range(args.seeds):
            name = f"{method}-{seed}.csv"
            threadx_cli(args.threadx, args.workdir, "--search", method, "--trials", str(args.trials), "--seed",
                        str(seed), "--out", name, "--heatmap", f"{method}-{seed}-heatmap.svg")
            trials = pd.read_csv(args.workdir / name, usecols=["combo"])["combo"].to_numpy()
            ranks = [(trials // int(s)) % n for n, s in zip(lens, strides)]
            points = np.column_stack([(r + 0.5) / n for r, n in zip(ranks, lens)])
            d.append(qmc.discrepancy(points, method="CD"))
        design[method] = {"mean": float(np.mean(d)), "min": float(np.min(d)), "max": float(np.max(d))}
    out["discrepancy_cd"] = design

    tx_median = statistics.median(r["top_share"] for r in tpe)
    op_median = statistics.median(r["top_share"] for r in opt)
    rate = statistics.median(r["evals_per_s"] for r in tpe)
    out["summary"] = {
        "threadx_tpe_median_top_share": tx_median,
        "optuna_tpe_median_top_share": op_median,
        "threadx_tpe_in_top_0.1pct": sum(r["top_share"] < 0.001 for r in tpe),
        "optuna_tpe_in_top_0.1pct": sum(r["top_share"] < 0.001 for r in opt),
        "search_share_max": max(r["search_share"] for r in tpe),
        "threadx_evals_per_s_median": rate,
        "speedup_vs_optuna_backtest": rate / out["optuna_backtest_evals_per_s"],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
