//! Searches: TPE finds a known optimum better than random draws; designs propose each
//! combo once; patience, targets and constraints stop and rank as their rules say; a
//! search over a session gives the same trials and bytes on the CPU and every adapter.

use std::sync::Arc;
use threadx_backtest::Metrics;
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_indicators::Ohlcv;
use threadx_sweep::{
    Constraint, Objective, SearchMethod, SearchOptions, SearchReport, SearchSpace, Session, Stop, SweepError,
    SweepRequest, search,
};

/// Metrics whose sharpe is `value` and whose trades are `trades`.
fn metrics(value: f64, trades: u32) -> Metrics {
    Metrics {
        total_return: 0.0,
        trades,
        closed_trades: trades,
        win_rate: 0.5,
        max_drawdown: 0.0,
        sharpe: value,
        sharpe_annual: value,
        exposure: 0.5,
        ..Metrics::from_values([0.0; Metrics::NAMES.len()])
    }
}

fn options(method: SearchMethod, trials: u64, batch: usize, seed: u64) -> SearchOptions {
    SearchOptions {
        method,
        trials,
        batch,
        seed,
        patience: None,
        target: None,
        objective: Objective::new("sharpe", false, Vec::new()).unwrap(),
    }
}

/// Four ordinal axes of 30 values; the objective peaks at ranks (21, 7, 13, 25).
fn peaked(space: &SearchSpace) -> impl FnMut(&[u64]) -> Result<Vec<Metrics>, SweepError> + '_ {
    move |combos: &[u64]| {
        Ok(combos
            .iter()
            .map(|&c| {
                let r = space.ranks(c);
                let d: f64 = r.iter().zip([21.0, 7.0, 13.0, 25.0]).map(|(&x, c)| (x as f64 - c).powi(2)).sum();
                metrics(-d, 100)
            })
            .collect())
    }
}

fn run(space: &SearchSpace, options: &SearchOptions) -> SearchReport {
    search(space.clone(), options, &mut peaked(space), &mut |_| Ok(())).unwrap()
}

fn best(report: &SearchReport) -> f64 {
    report.best.map_or(f64::NAN, |b| report.trials[b].value.unwrap())
}

#[test]
fn tpe_finds_a_known_optimum_better_than_random_draws() {
    let space = SearchSpace::of_axes(&[(30, false); 4]);
    let (mut tpe, mut random) = (Vec::new(), Vec::new());
    for seed in 0..9 {
        tpe.push(best(&run(&space, &options(SearchMethod::Tpe, 300, 16, seed))));
        random.push(best(&run(&space, &options(SearchMethod::Random, 300, 16, seed))));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (tpe, random) = (median(&mut tpe), median(&mut random));
    // 810,000 combos; 300 random draws land about 10 ranks² from the peak.
    assert!(tpe > random, "median best: tpe {tpe}, random {random}");
    assert!(tpe >= -6.0, "tpe's median best {tpe} is more than 6 ranks² from the peak");
}

#[test]
fn every_method_proposes_each_combo_once_and_the_same_trials_for_a_seed() {
    let space = SearchSpace::of_axes(&[(5, false), (4, true), (3, false)]);
    let error = "grid".parse::<SearchMethod>().unwrap_err().to_string();
    assert_eq!(error, "unknown search method `grid` (known: random, sobol, lhs, tpe)");
    for method in [SearchMethod::Random, SearchMethod::Sobol, SearchMethod::Lhs, SearchMethod::Tpe] {
        assert_eq!(method.to_string().to_uppercase().parse::<SearchMethod>().unwrap(), method);
        let report = run(&space, &options(method, 60, 7, 3));
        let mut combos: Vec<u64> = report.trials.iter().map(|t| t.combo).collect();
        assert_eq!(combos.len(), 60, "{method}");
        assert_eq!(run(&space, &options(method, 60, 7, 3)).trials, report.trials, "{method}: same seed");
        combos.sort_unstable();
        combos.dedup();
        assert_eq!(combos.len(), 60, "{method}: a combo proposed twice");
        // Past the space's 60 combos there is nothing left to propose.
        let all = run(&space, &options(method, 100, 7, 3));
        assert_eq!((all.trials.len(), all.stop), (60, Stop::Exhausted), "{method}");
        // So too when the batch the space cuts short is the last one (62 = 8 × 7 + 6).
        let all = run(&space, &options(method, 62, 7, 3));
        assert_eq!((all.trials.len(), all.stop), (60, Stop::Exhausted), "{method}: the last batch cut short");
    }
}

#[test]
fn patience_stops_after_k_trials_without_improvement_and_targets_when_reached() {
    let space = SearchSpace::of_axes(&[(30, false); 4]);
    for k in [1, 5, 40] {
        let report = run(&space, &SearchOptions { patience: Some(k), ..options(SearchMethod::Random, 5000, 16, 2) });
        assert_eq!(report.stop, Stop::Patience);
        // The last k trials brought nothing better than the best before them, and no
        // earlier run of k trials did so.
        let values: Vec<f64> = report.trials.iter().map(|t| t.value.unwrap()).collect();
        let mut best = f64::NEG_INFINITY;
        let mut since = 0;
        let mut stop = None;
        for (i, &v) in values.iter().enumerate() {
            if v > best {
                best = v;
                since = 0;
            } else {
                since += 1;
            }
            if since == k && stop.is_none() {
                stop = Some(i);
            }
        }
        assert_eq!(stop, Some(values.len() - 1), "patience {k}");
    }
    let report = run(&space, &SearchOptions { target: Some(-20.0), ..options(SearchMethod::Tpe, 5000, 16, 2) });
    assert_eq!(report.stop, Stop::Target);
    assert!(best(&report) >= -20.0);
    assert!(report.trials[..report.trials.len() - 1].iter().all(|t| t.value.unwrap() < -20.0));
}

#[test]
fn an_infeasible_combo_never_wins() {
    let space = SearchSpace::of_axes(&[(20, false), (20, false)]);
    // The best sharpe comes with few trades: infeasible under `trades >= 30`.
    let mut evaluate = |combos: &[u64]| -> Result<Vec<Metrics>, SweepError> {
        Ok(combos
            .iter()
            .map(|&c| {
                let r = space.ranks(c);
                metrics((r[0] + r[1]) as f64, if r[0] >= 15 { 10 } else { 50 })
            })
            .collect())
    };
    let constraint: Constraint = "trades >= 30".parse().unwrap();
    for method in [SearchMethod::Random, SearchMethod::Tpe] {
        let options = SearchOptions {
            objective: Objective::new("sharpe", false, vec![constraint]).unwrap(),
            ..options(method, 200, 16, 4)
        };
        let report = search(space.clone(), &options, &mut evaluate, &mut |_| Ok(())).unwrap();
        let best = &report.trials[report.best.unwrap()];
        assert!(best.metrics.trades >= 30, "{method}: {best:?}");
        let feasible = report.trials.iter().filter(|t| t.metrics.trades >= 30);
        assert_eq!(best.value, feasible.map(|t| t.value.unwrap()).reduce(f64::max), "{method}");
        assert!(report.trials.iter().filter(|t| t.metrics.trades < 30).all(|t| t.value.is_none()));
    }
    for (text, problem) in [
        ("trades 30", "expected METRIC OP VALUE"),
        ("profit >= 1", "unknown metric `profit`"),
        ("bb_period < 30", "parameters are limited by --grid or a rule file's `require`"),
        ("trades >= many", "`many` is not a number"),
    ] {
        let error = text.parse::<Constraint>().unwrap_err().to_string();
        assert!(error.contains(problem), "{text}: {error}");
    }
    assert_eq!("sharpe<=0.5".parse::<Constraint>().unwrap().to_string(), "sharpe <= 0.5");
}

#[test]
fn a_search_over_a_session_is_the_same_on_every_device() {
    let data = Arc::new(Ohlcv::load("synthetic:bars=3000,seed=5").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let request = |mode| SweepRequest {
        device: Some(mode),
        ..SweepRequest::new(
            "bb_atr",
            &[("bb_period", "10:40:5"), ("bb_std", "1.5,2,2.5"), ("atr_period", "7,14,21"), ("atr_mult", "1:3:0.5")],
        )
    };
    let mut modes = vec![DeviceMode::Cpu];
    if !adapters().is_empty() {
        modes.push(DeviceMode::Gpu);
    }
    for method in [SearchMethod::Random, SearchMethod::Sobol, SearchMethod::Lhs, SearchMethod::Tpe] {
        let mut seen: Option<Vec<(u64, [u64; 15])>> = None;
        for &mode in &modes {
            let spec = request(mode).check().unwrap();
            let dispatcher = Arc::new(dispatcher_in(dir.path(), mode));
            let session = Session::new(&spec, data.clone(), dispatcher, &mut |_| {}).unwrap();
            let (report, trials) = session.search(&options(method, 120, 32, 9), &mut |_| Ok(())).unwrap();
            assert_eq!(trials.combos, report.trials.iter().map(|t| t.combo).collect::<Vec<_>>());
            let rows: Vec<(u64, [u64; 15])> =
                report.trials.iter().map(|t| (t.combo, t.metrics.values().map(f64::to_bits))).collect();
            assert_eq!(rows.len(), 120);
            // Each row is the full evaluation's row for its combo.
            let combos: Vec<u64> = rows.iter().map(|r| r.0).collect();
            let direct = session.evaluate(&combos).unwrap();
            assert_eq!(
                direct.metrics.iter().map(|m| m.values().map(f64::to_bits)).collect::<Vec<_>>(),
                rows.iter().map(|r| r.1).collect::<Vec<_>>()
            );
            match &seen {
                None => seen = Some(rows),
                Some(first) => assert_eq!(&rows, first, "{method} on {mode:?}"),
            }
        }
    }
}
