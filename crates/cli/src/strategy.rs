//! `threadx strategy list | show | check`: the built-in strategies, a strategy's rule
//! file, and what a user's rule file compiles to.

use crate::request::grid_pairs;
use anyhow::Result;
use clap::Subcommand;
use std::fmt::Write as _;
use threadx_backtest::{Axis, BookLayout, Fill, Fills, Grid, RuleKind, Strategy, rule_functions};
use threadx_dispatch::DeviceMode;
use threadx_dispatch::thousands;
use threadx_sweep::SweepRequest;

#[derive(Debug, Subcommand)]
pub enum StrategyAction {
    /// The built-in strategies with their parameters.
    List,
    /// A strategy's rule file (a built-in's is the file embedded in the binary: copy it
    /// to start your own), and the functions rules can call.
    Show {
        /// A built-in name or a FILE.toml.
        name: String,
    },
    /// Check a rule file and say what it compiles to: parameters, rules and what each
    /// depends on, rows and combos for a grid, the warm-up.
    Check {
        /// A rule file (or a built-in name).
        file: String,
        /// Values of one parameter, repeatable, as for `sweep --grid` (default: the
        /// file's own grid).
        #[arg(long = "grid", value_name = "NAME=VALUES")]
        grid: Vec<String>,
    },
}

pub fn run(action: &StrategyAction) -> Result<()> {
    let text = match action {
        StrategyAction::List => list(),
        StrategyAction::Show { name } => show(&Strategy::load(name)?),
        StrategyAction::Check { file, grid } => check(&Strategy::load(file)?, grid)?,
    };
    out!("{text}");
    Ok(())
}

fn list() -> String {
    let mut out = String::new();
    for s in Strategy::builtins() {
        let _ = writeln!(out, "{}  {}", s.name(), s.description());
        for p in s.schema() {
            let _ = writeln!(out, "    {}={}  {}; {}", p.name, p.format(p.default), p.help, p.range());
        }
    }
    out.push_str("\nYour own: write a rule file (`threadx strategy show bb_atr` prints one to start from) and pass\n--strategy my_rules.toml to backtest or sweep. docs/writing-strategies.md explains the language.\n");
    out
}

fn show(strategy: &Strategy) -> String {
    let mut out = format!("# {}\n{}", strategy.origin(), strategy.source());
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("\n# Functions rules can call:\n");
    for (usage, help) in rule_functions() {
        let _ = writeln!(out, "#   {usage:<40} {help}");
    }
    out
}

/// How a strategy trades, in words: sides, fills, where stops are checked, which device.
fn trading(strategy: &Strategy) -> String {
    let fills = strategy.fills();
    let shorts = strategy.rule(RuleKind::ShortEntry).is_some();
    let sides = match (strategy.rule(RuleKind::Entry).is_some(), shorts) {
        (true, true) => "long and short (an opposite entry reverses)",
        (false, true) => "short only",
        _ => "long only",
    };
    let fill = match fills.fill {
        Fill::Close => "filled at the close",
        Fill::NextOpen => "filled at the next open",
    };
    let stops = if fills.intrabar { "stops checked inside the bar" } else { "stops checked at the close" };
    let trail = if strategy.rule(RuleKind::Trail).is_some() { ", a trailing stop" } else { "" };
    let plain = !shorts && fills == Fills::default() && trail.is_empty();
    let devices = if plain { "every device runs it" } else { "every device runs it (on a GPU, the market kernel)" };
    format!("{sides}, {fill}, {stops}{trail}; {devices}")
}

fn check(strategy: &Strategy, grid: &[String]) -> Result<String> {
    let pairs = grid_pairs(grid)?;
    let request = SweepRequest {
        strategy: Some(strategy.locator().to_owned()),
        grid: (!pairs.is_empty()).then(|| pairs.into_iter().map(|(name, text)| (name, Axis::Text(text))).collect()),
        device: Some(DeviceMode::Cpu),
        ..Default::default()
    };
    // What a sweep of this grid would refuse, check refuses: no combo passing `require`,
    // a rule that some combo cannot bind.
    let spec = request.check()?;
    let axes = spec.axes();
    let mut out = format!("{} ({}): OK\n", strategy.name(), strategy.origin());
    if !strategy.description().is_empty() {
        let _ = writeln!(out, "{}", strategy.description());
    }
    out.push_str("\nparameters:\n");
    for (p, axis) in strategy.schema().iter().zip(axes) {
        let values: Vec<String> = axis.iter().take(8).map(|&v| p.format(v)).collect();
        let more = if axis.len() > 8 { format!(", … ({} values)", axis.len()) } else { String::new() };
        let _ = writeln!(
            out,
            "  {:<14} {}; default {}; grid {}{more}",
            p.name,
            p.range(),
            p.format(p.default),
            values.join(", ")
        );
    }
    let layout = BookLayout::new(Grid::new(strategy.clone(), axes)?, None)?;
    out.push_str("\nrules:\n");
    for kind in RuleKind::ALL {
        let Some(text) = strategy.rule(kind) else { continue };
        let deps = strategy.depends_on(kind);
        let reads = if deps.is_empty() { "no parameter".to_owned() } else { deps.join(", ") };
        let rows = if matches!(kind, RuleKind::Require | RuleKind::Rank) {
            String::new()
        } else {
            let rows = layout.rows_of(kind);
            format!("; {} row{}", thousands(rows), if rows == 1 { "" } else { "s" })
        };
        let _ = writeln!(out, "  {:<12} {text}\n  {:<12} reads {reads}{rows}", kind.name(), "");
    }
    let _ = writeln!(out, "\ntrading: {}", trading(strategy));
    let combos = layout.grid().len();
    let sizes: Vec<String> = axes.iter().map(|a| a.len().to_string()).collect();
    let _ = write!(out, "\ngrid: {} = {} combos", sizes.join(" × "), thousands(combos));
    if strategy.rule(RuleKind::Require).is_some() && combos <= 1_000_000 {
        let grid = layout.grid();
        let allowed = (0..combos).filter(|&c| strategy.allows(&grid.values(c))).count() as u64;
        let _ = write!(out, " ({} pass `require`)", thousands(allowed));
    }
    let names: Vec<String> = layout.indicators().iter().map(|i| i.label()).collect();
    let shown = if names.len() > 12 { format!("{}, …", names[..12].join(", ")) } else { names.join(", ") };
    let _ = writeln!(
        out,
        "\nbook: {} decision rows, {} stop/take-profit levels, {} indicator series{}",
        thousands(layout.decision_rows()),
        thousands(layout.stops()),
        names.len(),
        if names.is_empty() { String::new() } else { format!(" ({shown})") }
    );
    let extreme = |pick: fn(f64, f64) -> f64, start: f64| -> Vec<f64> {
        axes.iter().map(|a| a.iter().copied().fold(start, pick)).collect()
    };
    let warmups: Vec<String> = [extreme(f64::min, f64::MAX), extreme(f64::max, f64::MIN)]
        .iter()
        .map(|values| match strategy.warmup(values) {
            Ok(w) => format!("{w} bars ({})", strategy.describe(values)),
            Err(e) => format!("— ({}: {e})", strategy.describe(values)),
        })
        .collect();
    let _ = writeln!(out, "warm-up: {} with the smallest values, {} with the largest", warmups[0], warmups[1]);
    Ok(out)
}
