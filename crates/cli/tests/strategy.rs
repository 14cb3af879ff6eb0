//! Rule files as a user meets them on the command line: listed, shown and checked; a
//! rule file's backtest and sweep the same on every device; errors at file:line:column.

use crate::common;

use common::{binary, text, threadx_in_scratch as threadx};

#[test]
fn strategy_list_show_and_check() {
    let list = threadx(&["strategy", "list"], &[]);
    assert!(list.status.success());
    let list = text(&list.stdout);
    for name in [
        "bb_atr  Enter when close < lower Bollinger band",
        "ma_cross  ",
        "rsi_reversion  ",
        "    atr_mult=2  stop distance",
    ] {
        assert!(list.contains(name), "{list}");
    }
    let show = text(&threadx(&["strategy", "show", "rsi_reversion"], &[]).stdout);
    assert!(show.starts_with("# built-in rsi_reversion.toml\n"), "{show}");
    assert!(show.contains("stop = \"if(atr_mult > 0, close - atr_mult * atr(atr_period), nan)\""), "{show}");
    assert!(show.contains("#   highest(x, n)"), "{show}");

    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies");
    let file = format!("{examples}/donchian.toml");
    let check = threadx(&["strategy", "check", &file, "--grid", "n=10,20", "--grid", "m=1:3:1"], &[]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let check = text(&check.stdout);
    for line in [
        "donchian (",
        "  entry        close > highest(high, n)[1]\n               reads n; 2 rows",
        "  stop         close - m * atr(14)\n               reads m; 3 rows",
        "grid: 2 × 3 = 6 combos",
        "book: 4 decision rows, 4 stop/take-profit levels, 1 indicator series (atr_14)",
        "warm-up: 14 bars (n=10,m=1) with the smallest values, 20 bars (n=20,m=3) with the largest",
    ] {
        assert!(check.contains(line), "{line}\n---\n{check}");
    }
    let trend = text(&threadx(&["strategy", "check", &format!("{examples}/trend_rsi.toml")], &[]).stdout);
    assert!(trend.contains("grid: 2 × 2 × 3 × 2 × 2 = 48 combos (48 pass `require`)"), "{trend}");

    // A mistake: the place, a caret, a suggestion, and a failing exit status.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n[rules]\nentry = \"close > smaa(20)\"\n").unwrap();
    for args in [&["strategy", "check"][..], &["backtest", "--strategy"][..], &["sweep", "--strategy"][..]] {
        let mut args = args.to_vec();
        args.push(bad.to_str().unwrap());
        let out = threadx(&args, &[]);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("bad.toml:3:18: rule `entry`: unknown function 'smaa' (did you mean 'sma'?)")
                && stderr.contains("3 | entry = \"close > smaa(20)\"\n  |                  ^^^^"),
            "{args:?}: {stderr}"
        );
    }
    let missing = text(&threadx(&["backtest", "--strategy", "nowhere.toml"], &[]).stderr);
    assert!(missing.contains("strategy file nowhere.toml: No such file or directory"), "{missing}");
}

#[test]
fn a_rule_file_backtests_and_sweeps_the_same_on_every_device() {
    let dir = tempfile::tempdir().unwrap();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/macd_tp.toml");
    let mut outs = Vec::new();
    for device in ["cpu", "gpu"] {
        let out_file = dir.path().join(format!("{device}.csv"));
        let out = threadx(
            &[
                "--device",
                device,
                "sweep",
                "--quiet",
                "--strategy",
                file,
                "--data",
                "synthetic:bars=5000,seed=4",
                "--out",
                out_file.to_str().unwrap(),
            ],
            &[],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        outs.push(std::fs::read_to_string(&out_file).unwrap());
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0].lines().count(), 1 + 48, "the file's own grid: 48 combos");
    assert!(outs[0].starts_with("combo,fast,slow,signal,tp,sl,total_return,"));
    let summary = std::fs::read_to_string(dir.path().join("cpu.json")).unwrap();
    assert!(summary.contains("\"strategy_file\"") && summary.contains("\"rules\""), "{summary}");

    let trades = dir.path().join("trades.csv");
    let out = threadx(&["backtest", "--strategy", file, "--set", "tp=2", "--trades", trades.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let trades = std::fs::read_to_string(&trades).unwrap();
    for reason in [",take_profit\n", ",stop\n", ",signal\n"] {
        assert!(trades.contains(reason), "{reason}");
    }
}

/// A rule file that check passes, sweep and backtest must run; one that a sweep refuses,
/// check refuses with the same message: one set of rules for all three.
#[test]
fn strategy_check_refuses_what_sweep_refuses_with_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, params: &str, rules: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("name = \"t\"\n[params]\n{params}\n[rules]\n{rules}\n")).unwrap();
        path.display().to_string()
    };
    let require = write(
        "require.toml",
        "fast = { kind = \"int\", default = 10, min = 2, grid = \"20,30\" }\nslow = { kind = \"int\", default = 30, min = 2, grid = \"5,10\" }",
        "entry = \"sma(fast) > sma(slow)\"\nexit = \"sma(fast) < sma(slow)\"\nrequire = \"fast < slow\"",
    );
    let max_bars = write(
        "max_bars.toml",
        "n = { kind = \"int\", default = 5, min = 2, grid = \"2,3,4\" }",
        "entry = \"close > sma(n)\"\nexit = \"close < sma(n)\"\nmax_bars = \"n - 10\"",
    );
    let far = write(
        "far.toml",
        "n = { kind = \"int\", default = 5, min = 2, grid = \"2,3\" }",
        "entry = \"close > close[99999999999999999999]\"\nexit = \"close < sma(n)\"",
    );
    for (file, message) in [
        (&require, "no combo of the grid passes `require = \"fast < slow\"`"),
        // At the rule's text in the file, with the values that made it.
        (&max_bars, "max_bars.toml:7:13: rule `max_bars` with n=2: max_bars = -8: must be a whole number of bars ≥ 1"),
        (&far, "looks back 100000000000000000000 bars, more than the 1e9 a rule may"),
    ] {
        let check = threadx(&["strategy", "check", file], &[]);
        let sweep = threadx(
            &[
                "--device",
                "cpu",
                "sweep",
                "--strategy",
                file,
                "--data",
                "synthetic:bars=500",
                "--quiet",
                "--out",
                dir.path().join("o.csv").to_str().unwrap(),
            ],
            &[],
        );
        for (what, out) in [("check", &check), ("sweep", &sweep)] {
            assert!(!out.status.success(), "{what} {file} passed");
            assert!(text(&out.stderr).contains(message), "{what} {file}: {}", text(&out.stderr));
        }
    }
}

/// Mistakes only a parameter value reveals are shown at their text too, with the values.
#[test]
fn value_dependent_rule_errors_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    for (entry, at, message) in [
        ("close > close[n - 30]", "t.toml:5:24: rule `entry` with n=", "does not look back a whole number of bars"),
        (
            "close > sma(-5)",
            "t.toml:5:22: rule `entry`: sma: period `-5` = -5 is not a whole number from 1 to 1e9",
            "^^",
        ),
        ("close > sma(2.5)", "t.toml:5:22: rule `entry`: sma: period `2.5` = 2.5 is not a whole number", "^^^"),
    ] {
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            format!("name = \"t\"\n[params]\nn = {{ kind = \"int\", default = 5, min = 2, grid = \"2,3\" }}\n[rules]\nentry = \"{entry}\"\nexit = \"close < sma(n)\"\n"),
        )
        .unwrap();
        for args in [vec!["strategy", "check", "t.toml"], vec!["--device", "cpu", "backtest", "--strategy", "t.toml"]] {
            let out = binary()
                .current_dir(dir.path())
                .args(&args)
                .env("THREADX_GPU_THRESHOLD_PATH", dir.path().join("p.json"))
                .output()
                .unwrap();
            let stderr = text(&out.stderr);
            assert!(!out.status.success() && stderr.contains(at) && stderr.contains(message), "{args:?}: {stderr}");
        }
    }
}
