//! `--minimize` on a grid: the best list is the smallest values of `--by` (read back from
//! the results file), the summary says so, the heatmap's outlined best cell is the smallest
//! and its colour scale keeps blue for the better side; shards merge to the same ranking;
//! the overfitting statistics' top combos are the best list and read their neighbours
//! smallest first; a walk-forward's windows pick their smallest; a universe's best combos
//! across its symbols are the smallest medians, and its symbols' rows are the same bytes.
//! Without it the summary has no `minimize` key (its bytes as before). Every metric ranks,
//! either way, and the terminal's table shows the ranking one.

use crate::common;

use common::{SMALL, text, threadx};
use std::path::Path;
use threadx_sweep::Summary;

/// [`SMALL`]'s grid into `out`, ranked by drawdown, with `more` flags.
fn sweep(dir: &Path, out: &str, more: &[&str]) -> String {
    let mut args = SMALL.to_vec();
    args.extend(["--by", "max_drawdown", "--top", "5", "--out", out]);
    args.extend(more);
    let run = threadx(dir, &args);
    assert!(run.status.success(), "{more:?}: {}", text(&run.stderr));
    text(&run.stdout)
}

/// Every row's (combo, max_drawdown) from a results CSV.
fn drawdowns(path: &Path) -> Vec<(u64, f64)> {
    column(path, "max_drawdown")
}

/// Every row's (combo, `name`) from a results CSV (an empty cell as NaN).
fn column(path: &Path, name: &str) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (combo, at) =
        (header.iter().position(|h| *h == "combo").unwrap(), header.iter().position(|h| *h == name).unwrap());
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            (cells[combo].parse().unwrap(), cells[at].parse().unwrap_or(f64::NAN))
        })
        .collect()
}

#[test]
fn every_metric_ranks_largest_or_smallest_first_and_the_terminal_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (by, minimize) in [
        ("cagr", false),
        ("volatility", true),
        ("sortino", false),
        ("calmar", false),
        ("profit_factor", false),
        ("expectancy", true),
        ("sqn", false),
    ] {
        let mut args = SMALL.to_vec();
        let out = format!("{by}.csv");
        args.extend(["--by", by, "--top", "5", "--out", &out]);
        if minimize {
            args.push("--minimize");
        }
        let run = threadx(d, &args);
        assert!(run.status.success(), "{by}: {}", text(&run.stderr));
        let said = text(&run.stdout);
        let header = said.lines().find(|l| l.trim_start().starts_with("rank")).unwrap();
        assert!(header.trim_end().ends_with(by), "{by}: the table's last column: {header}");
        // The best five from the rows: largest (or smallest) first, ties by the lower
        // combo, NaN never ranked.
        let mut rows: Vec<(u64, f64)> = column(&d.join(&out), by).into_iter().filter(|r| !r.1.is_nan()).collect();
        rows.sort_by(|a, b| if minimize { a.1.total_cmp(&b.1) } else { b.1.total_cmp(&a.1) }.then(a.0.cmp(&b.0)));
        assert!(rows.len() >= 5 && rows[0].1 != rows[4].1, "{by}: values to rank");
        let want: Vec<u64> = rows.iter().take(5).map(|r| r.0).collect();
        let summary = Summary::read(&d.join(format!("{by}.json"))).unwrap();
        let best: Vec<u64> = summary.best.as_ref().unwrap().rows.iter().map(|r| r.combo).collect();
        assert_eq!(best, want, "{by}");
    }
}

#[test]
fn a_grid_ranked_smallest_first_lists_the_smallest_and_outlines_them_on_the_heatmap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let said = sweep(d, "min.csv", &["--minimize"]);
    assert!(said.contains("top 5 by max_drawdown, smallest first:"), "{said}");
    let summary = Summary::read(&d.join("min.json")).unwrap();
    let best = summary.best.as_ref().unwrap();
    assert_eq!(best.minimize, Some(true));
    // The five smallest drawdowns (deepest), ties by the lower combo, from the rows.
    let mut rows = drawdowns(&d.join("min.csv"));
    rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let want: Vec<u64> = rows.iter().take(5).map(|r| r.0).collect();
    assert_eq!(best.rows.iter().map(|r| r.combo).collect::<Vec<_>>(), want);
    // The heatmap: its outlined cell holds the smallest value, and that cell is blue.
    let svg = std::fs::read_to_string(d.join("min-heatmap.svg")).unwrap();
    let outline = svg.split("<rect class=\"best\"").nth(1).expect("an outlined cell");
    let at =
        |rect: &str, key: &str| rect.split(&format!("{key}=\"")).nth(1).unwrap().split('"').next().unwrap().to_owned();
    let (x, y) = (at(outline, "x"), at(outline, "y"));
    let cells: Vec<(&str, f64)> = svg
        .split("<rect ")
        .filter(|r| r.contains("<title>"))
        .filter_map(|r| Some((r, r.split("max_drawdown ").nth(1)?.split(' ').next()?.parse().ok()?)))
        .collect();
    let (smallest, value) = cells.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert_eq!((at(smallest, "x"), at(smallest, "y")), (x, y), "the outline is not on the smallest cell");
    assert!((value - rows[0].1).abs() < 1e-4, "{value} against {}", rows[0].1);
    assert_eq!(at(smallest, "fill"), "#31549B", "the best cell is not full blue");
    // Shards merged rank as the whole run did.
    for i in ["0/2", "1/2"] {
        sweep(d, &format!("s{}.csv", &i[..1]), &["--minimize", "--shard", i]);
    }
    let merged = threadx(d, &["merge", "s0.csv", "s1.csv", "--by", "max_drawdown", "--top", "5", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(text(&merged.stdout).contains("smallest first"), "{}", text(&merged.stdout));
    let merged = Summary::read(&d.join("m.json")).unwrap();
    assert_eq!(merged.best.as_ref().unwrap().rows, best.rows);
    // Without --minimize: largest first, and no `minimize` key at all.
    sweep(d, "max.csv", &[]);
    assert!(!std::fs::read_to_string(d.join("max.json")).unwrap().contains("minimize"));
}

#[test]
fn the_overfitting_statistics_of_a_minimised_grid_read_its_neighbours_smallest_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let said = sweep(d, "o.csv", &["--minimize", "--overfitting", "--blocks", "8"]);
    let summary = Summary::read(&d.join("o.json")).unwrap();
    let (best, o) = (summary.best.as_ref().unwrap(), summary.overfitting.as_ref().unwrap());
    let top: Vec<u64> = o.top.iter().map(|t| t.combo).collect();
    assert_eq!(top[..5], best.rows.iter().map(|r| r.combo).collect::<Vec<_>>()[..]);
    assert!(o.top.iter().all(|t| t.minimize), "{:?}", o.top);
    // The stability line reads the best's neighbours as the minimised rule says.
    let t = &o.top[0];
    let shape = if t.neighbour_mean <= t.objective + 0.5 * t.objective.abs() { "a plateau" } else { "a spike" };
    assert!(said.contains(&format!("Stability: the best's max_drawdown is {:.4}", t.objective)), "{said}");
    assert!(said.lines().any(|l| l.starts_with("Stability:") && l.ends_with(shape)), "{said}");
    // Shards with their blocks merge to the same statistics.
    for i in ["0/2", "1/2"] {
        sweep(d, &format!("os{}.csv", &i[..1]), &["--minimize", "--overfitting", "--blocks", "8", "--shard", i]);
    }
    let merged = threadx(d, &["merge", "os0.csv", "os1.csv", "--by", "max_drawdown", "--top", "5", "--out", "om.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let merged = Summary::read(&d.join("om.json")).unwrap();
    let mo = merged.overfitting.unwrap();
    assert_eq!((mo.pbo.to_bits(), &mo.top), (o.pbo.to_bits(), &o.top));
}

#[test]
fn a_walk_forward_with_minimize_picks_each_train_windows_smallest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(threadx(d, &["data", "synth", "--bars", "3000", "--seed", "3", "--out", "d.csv"]).status.success());
    // The first train window's bars alone, as their own data.
    let lines: Vec<String> = std::fs::read_to_string(d.join("d.csv")).unwrap().lines().map(str::to_owned).collect();
    std::fs::write(d.join("t.csv"), lines[..1001].join("\n") + "\n").unwrap();
    let grid = ["--grid", "bb_period=10:40:10", "--grid", "atr_mult=1,2", "--by", "exposure"];
    let run = |args: &[&str]| {
        let mut all = vec!["--device", "cpu", "sweep"];
        all.extend(grid);
        all.extend(args);
        let out = threadx(d, &all);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let said = run(&["--data", "d.csv", "--minimize", "--walk-forward", "train=1000,test=500", "--out", "w.csv"]);
    assert!(said.contains("best by exposure, smallest first in each train window"), "{said}");
    let walk = Summary::read(&d.join("w.json")).unwrap();
    assert_eq!(walk.minimize, Some(true));
    run(&["--data", "t.csv", "--minimize", "--top", "1", "--out", "g.csv"]);
    let grid_best = Summary::read(&d.join("g.json")).unwrap().best.unwrap().rows[0].clone();
    let first = &walk.windows.as_ref().unwrap()[0].best;
    assert_eq!((first.combo, &first.params), (grid_best.combo, &grid_best.params));
    // Largest first without it, and no `minimize` key.
    run(&["--data", "d.csv", "--walk-forward", "train=1000,test=500", "--out", "w2.csv"]);
    assert!(!std::fs::read_to_string(d.join("w2.json")).unwrap().contains("minimize"));
    let largest = &Summary::read(&d.join("w2.json")).unwrap().windows.unwrap()[0].best;
    assert!(largest.metrics.exposure > first.metrics.exposure, "{largest:?} {first:?}");
}

#[test]
fn a_universe_with_minimize_lists_the_smallest_medians_across_its_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("u")).unwrap();
    for (symbol, seed) in [("AAA", "3"), ("BBB", "4"), ("CCC", "5")] {
        let out = format!("u/{symbol}.csv");
        assert!(threadx(d, &["data", "synth", "--bars", "2000", "--seed", seed, "--out", &out]).status.success());
    }
    let run = |out: &str, more: &[&str]| {
        let mut args = vec!["--device", "cpu", "sweep", "--data", "u", "--grid", "bb_period=10:40:10"];
        args.extend(["--grid", "atr_mult=1,2", "--by", "exposure", "--top", "3", "--out", out]);
        args.extend(more);
        let run = threadx(d, &args);
        assert!(run.status.success(), "{more:?}: {}", text(&run.stderr));
        text(&run.stdout)
    };
    let said = run("min.csv", &["--minimize"]);
    assert!(said.contains("by median exposure, smallest first:"), "{said}");
    let by_combo = Summary::read(&d.join("min.json")).unwrap().universe.unwrap().by_combo.unwrap();
    assert_eq!(by_combo.minimize, Some(true));
    // The three smallest medians of the by-combo table, ties by the lower combo.
    let table = std::fs::read_to_string(d.join("min-by-combo.csv")).unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (combo, median) = (at("combo"), at("median_exposure"));
    let mut rows: Vec<(u64, f64)> = lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            (cells[combo].parse().unwrap(), cells[median].parse().unwrap())
        })
        .collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let want: Vec<u64> = rows.iter().take(3).map(|r| r.0).collect();
    assert_eq!(by_combo.best_by_median.iter().map(|c| c.combo).collect::<Vec<_>>(), want);
    // Without it: the largest first, no `minimize` key, and the same rows and table.
    run("max.csv", &[]);
    let max = Summary::read(&d.join("max.json")).unwrap().universe.unwrap().by_combo.unwrap();
    assert_eq!(max.minimize, None);
    assert!(max.best_by_median[0].median > by_combo.best_by_median[0].median);
    let read = |name: &str| std::fs::read(d.join(name)).unwrap();
    assert_eq!(read("min-by-combo.csv"), read("max-by-combo.csv"));
}

#[test]
fn a_walk_forward_with_a_constraint_picks_each_windows_best_among_the_combos_that_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(threadx(d, &["data", "synth", "--bars", "3000", "--seed", "3", "--out", "d.csv"]).status.success());
    let lines: Vec<String> = std::fs::read_to_string(d.join("d.csv")).unwrap().lines().map(str::to_owned).collect();
    std::fs::write(d.join("t.csv"), lines[..1001].join("\n") + "\n").unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--device", "cpu", "sweep", "--grid", "bb_period=10:40:10", "--grid", "atr_mult=1,2"];
        all.extend(["--by", "total_return"]);
        all.extend(args);
        let out = threadx(d, &all);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    // The first window's trade counts, from a grid of its train bars alone.
    run(&["--data", "t.csv", "--top", "8", "--out", "g.csv"]);
    let rows = std::fs::read_to_string(d.join("g.csv")).unwrap();
    let header: Vec<&str> = rows.lines().next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut trades: Vec<u32> =
        rows.lines().skip(1).map(|l| l.split(',').nth(at("trades")).unwrap().parse().unwrap()).collect();
    trades.sort_unstable();
    // A bound that the fewest-trading combos of the first window break.
    let bound = trades[2];
    assert!(trades[0] < bound, "{trades:?}");
    let rule = format!("trades >= {bound}");
    run(&["--data", "t.csv", "--top", "1", "--constraint", &rule, "--out", "k.csv"]);
    let kept_best = Summary::read(&d.join("k.json")).unwrap().best.unwrap().rows[0].clone();
    let said =
        run(&["--data", "d.csv", "--walk-forward", "train=1000,test=500", "--constraint", &rule, "--out", "w.csv"]);
    assert!(said.contains(&format!("best by total_return among combos keeping {rule} in each train window")), "{said}");
    let walk = Summary::read(&d.join("w.json")).unwrap();
    assert_eq!(walk.constraints, Some(vec![rule.clone()]));
    let first = &walk.windows.as_ref().unwrap()[0].best;
    assert_eq!((first.combo, &first.params), (kept_best.combo, &kept_best.params));
    assert!(walk.windows.unwrap().iter().all(|w| w.best.metrics.trades >= bound));
    // No combo keeps an impossible rule: the window is named.
    let mut all = vec!["--device", "cpu", "sweep", "--data", "d.csv", "--grid", "bb_period=10:40:10"];
    all.extend(["--walk-forward", "train=1000,test=500", "--constraint", "trades >= 100000", "--out", "x.csv"]);
    let refused = threadx(d, &all);
    let said = text(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("walk-forward window 0") && said.contains("keeps trades >= 100000"),
        "{said}"
    );
}
