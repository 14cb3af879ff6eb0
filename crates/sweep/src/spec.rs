//! [`SweepSpec`]: what a sweep runs, from `name=values` flags and/or a TOML file, checked
//! against the strategy's schema before any work.

use crate::SweepError;
use serde_json::{Value, json};
use std::ops::ControlFlow;
use threadx_backtest::{RuleKind, Strategy, check_bars_per_year, check_fee};

/// Monte-Carlo sampling: `n` distinct combos of the grid drawn with `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub n: u64,
    pub seed: u64,
}

/// Walk-forward windows in bars: optimize on `train` bars, evaluate the best combo on the
/// `test` bars that follow, move on by `step` bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkForward {
    pub train: usize,
    pub test: usize,
    pub step: usize,
}

impl WalkForward {
    /// Parses `train=BARS,test=BARS[,step=BARS]` (step defaults to test).
    pub fn parse(text: &str) -> Result<Self, SweepError> {
        let bad = |problem: String| SweepError::Spec(format!("--walk-forward {text}: {problem}"));
        let (mut train, mut test, mut step) = (None, None, None);
        for part in text.split(',') {
            let (key, value) = part.split_once('=').ok_or_else(|| bad(format!("expected key=BARS, got `{part}`")))?;
            let bars: usize = value
                .trim()
                .parse()
                .ok()
                .filter(|&b| b > 0)
                .ok_or_else(|| bad(format!("{} must be a positive number of bars", key.trim())))?;
            let slot = match key.trim() {
                "train" => &mut train,
                "test" => &mut test,
                "step" => &mut step,
                other => return Err(bad(format!("unknown key `{other}` (known: train, test, step)"))),
            };
            *slot = Some(bars);
        }
        let (Some(train), Some(test)) = (train, test) else {
            return Err(bad("train=BARS and test=BARS are both needed".into()));
        };
        Ok(Self { train, test, step: step.unwrap_or(test) })
    }

    /// The windows over `bars` bars: (train start, test start, test end), test windows
    /// back to back when step = test.
    pub fn windows(&self, bars: usize) -> Vec<(usize, usize, usize)> {
        (0..)
            .map(|w| w * self.step)
            .map(|start| (start, start + self.train, start + self.train + self.test))
            .take_while(|&(_, _, end)| end <= bars)
            .collect()
    }
}

/// A sweep: a strategy, one list of values per parameter (schema order; combos are their
/// Cartesian product in docs/strategies.md's order), the fee, and optionally sampling or
/// walk-forward. Every value is checked when it is set.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    pub strategy: Strategy,
    axes: Vec<Vec<f64>>,
    pub fee: f64,
    pub sample: Option<Sample>,
    pub walk_forward: Option<WalkForward>,
    /// Combos per chunk; `None` takes [`chunk_size`](crate::chunk_size) of the data length.
    /// Part of the sweep's identity: a resume or merge needs the same value.
    pub chunk_size: Option<u64>,
    /// Bars per year that annualise the Sharpe ratio; `None` infers them from the data's
    /// timestamps ([`Ohlcv::bars_per_year`](threadx_indicators::Ohlcv::bars_per_year)).
    pub periods_per_year: Option<f64>,
}

impl SweepSpec {
    /// A one-combo spec: every parameter at its default, fee 0.001.
    pub fn new(strategy: Strategy) -> Self {
        let axes = strategy.schema().iter().map(|p| vec![p.default]).collect();
        Self { strategy, axes, fee: 0.001, sample: None, walk_forward: None, chunk_size: None, periods_per_year: None }
    }

    /// The strategy's own grid (each parameter's `grid` in its rule file, else its
    /// default), for a sweep run without `--grid`: bb_atr's is 20 bb_period × 5 bb_std ×
    /// 10 atr_period × 10 atr_mult = 10,000 combos.
    pub fn default_grid(strategy: Strategy) -> Self {
        let axes = strategy.default_axes();
        Self { axes, ..Self::new(strategy) }
    }

    /// The strategy's own grid when `grid` is `None`; else every parameter at its default
    /// but those `grid` names (`name`, values as [`SweepSpec::set_axis`] reads them).
    pub fn with_grid<S: AsRef<str>>(strategy: Strategy, grid: Option<&[(S, S)]>) -> Result<Self, SweepError> {
        let Some(grid) = grid else { return Ok(Self::default_grid(strategy)) };
        let mut spec = Self::new(strategy);
        for (k, (name, values)) in grid.iter().enumerate() {
            let (name, values) = (name.as_ref(), values.as_ref());
            if let Some((_, first)) = grid[..k].iter().find(|(other, _)| other.as_ref() == name) {
                return Err(SweepError::Spec(format!(
                    "{name} is given twice ({name}={} and {name}={values}): give each parameter once, with all its values",
                    first.as_ref()
                )));
            }
            spec.set_axis(name, values)?;
        }
        Ok(spec)
    }

    /// Sets the values of one parameter from text: a list `1.5,2,2.5` (names for choice
    /// parameters: `sma,ema`) or an inclusive range `start:stop:step`.
    pub fn set_axis(&mut self, name: &str, text: &str) -> Result<(), SweepError> {
        let i = self.strategy.param_index(name)?;
        self.axes[i] = self.strategy.schema()[i].axis(text)?;
        Ok(())
    }

    /// The parameter lists, schema order.
    pub fn axes(&self) -> &[Vec<f64>] {
        &self.axes
    }

    /// Combos in the full grid (before sampling or skipping combos the strategy's rules
    /// refuse), or an error when the count does not fit in 64 bits.
    pub fn grid_len(&self) -> Result<u64, SweepError> {
        self.axes
            .iter()
            .try_fold(1u64, |n, a| n.checked_mul(a.len() as u64))
            .ok_or_else(|| SweepError::Spec("the grid has more than 2^64 combos; narrow it or use --random N".into()))
    }

    /// Checks what `set_axis` cannot see alone: the fee, the sample size, and that some
    /// combo passes the strategy's rules.
    pub fn check(&self) -> Result<(), SweepError> {
        check_fee(self.fee)?;
        if let Some(p) = self.periods_per_year {
            check_bars_per_year(p)?;
        }
        let grid = self.grid_len()?;
        if let Some(sample) = self.sample {
            if sample.n == 0 {
                return Err(SweepError::Spec("--random N needs N ≥ 1".into()));
            }
            if sample.n > grid {
                return Err(SweepError::Spec(format!(
                    "--random {} asks for more combos than the grid has ({grid}); run the whole grid instead",
                    sample.n
                )));
            }
        }
        if self.chunk_size == Some(0) {
            return Err(SweepError::Spec("the chunk size must be at least 1 combo".into()));
        }
        if let (Some(_), Some(_)) = (self.sample, self.walk_forward) {
            return Err(SweepError::Spec("--random and --walk-forward cannot be combined".into()));
        }
        if !self.any_allowed() {
            let rule = self.strategy.rule(RuleKind::Require).unwrap_or_default();
            return Err(SweepError::Spec(format!(
                "{}: no combo of the grid passes `require = \"{rule}\"`",
                self.strategy
            )));
        }
        self.check_bindings()
    }

    /// Binds every rule for every binding of the parameters the rules read (up to
    /// 100,000 bindings, the other parameters at their first values) that `require`
    /// allows, so that a rule no combo can bind (a `max_bars` below 1, a lookahead made by
    /// a parameter) is refused before any work, with the message a backtest gives.
    fn check_bindings(&self) -> Result<(), SweepError> {
        let checked = self.visit_bindings(&RuleKind::ALL, 100_000, |values| {
            match self.strategy.allows(values).then(|| self.strategy.check(values)) {
                Some(Err(e)) => ControlFlow::Break(e),
                _ => ControlFlow::Continue(()),
            }
        });
        match checked {
            Some(ControlFlow::Break(e)) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Whether some combo obeys the strategy's `require` rule: every binding of the
    /// parameters it reads is tried (a rule over more than a million of them is assumed
    /// to pass some).
    fn any_allowed(&self) -> bool {
        let found = self.visit_bindings(&[RuleKind::Require], 1_000_000, |values| {
            if self.strategy.allows(values) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        found.is_none_or(|flow| flow.is_break())
    }

    /// Calls `visit` with every binding of the parameters the rules of `kinds` read (the
    /// other parameters at their first values) until it breaks; `None`, visiting none,
    /// when there are more than `limit` bindings.
    fn visit_bindings<B>(
        &self,
        kinds: &[RuleKind],
        limit: usize,
        mut visit: impl FnMut(&[f64]) -> ControlFlow<B>,
    ) -> Option<ControlFlow<B>> {
        let mut deps: Vec<usize> = kinds
            .iter()
            .flat_map(|&kind| self.strategy.depends_on(kind))
            .filter_map(|name| self.strategy.param_index(name).ok())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        let count = deps.iter().try_fold(1usize, |n, &i| n.checked_mul(self.axes[i].len())).filter(|&n| n <= limit)?;
        let mut values: Vec<f64> = self.axes.iter().map(|a| a[0]).collect();
        Some((0..count).try_for_each(|mut k| {
            for &i in deps.iter().rev() {
                values[i] = self.axes[i][k % self.axes[i].len()];
                k /= self.axes[i].len();
            }
            visit(&values)
        }))
    }

    /// The spec as JSON: what the summary records and what a checkpoint or shard must
    /// match to be resumed or merged.
    pub fn to_json(&self) -> Value {
        let schema = self.strategy.schema();
        let grid: serde_json::Map<String, Value> = schema
            .iter()
            .zip(&self.axes)
            .map(|(p, axis)| {
                let values: Vec<Value> = axis.iter().map(|&v| p.to_json(v)).collect();
                (p.name.to_owned(), Value::Array(values))
            })
            .collect();
        let mut spec = json!({
            "strategy": self.strategy.name(),
            "grid": grid,
            "fee": self.fee,
            "random": self.sample.map(|s| json!({"n": s.n, "seed": s.seed})),
            "walk_forward": self.walk_forward.map(|w| json!({"train": w.train, "test": w.test, "step": w.step})),
        });
        if let Some(p) = self.periods_per_year {
            spec["periods_per_year"] = json!(p);
        }
        if !self.strategy.is_builtin() {
            // A rule file is part of the identity: a resume or merge needs the same rules.
            spec["strategy_file"] = json!(self.strategy.origin());
            spec["rules"] = json!(format!("{:016x}", crate::output::fnv1a(self.strategy.source().as_bytes())));
        }
        spec
    }

    /// The strategy a spec's JSON ([`SweepSpec::to_json`]) names: a built-in, or its rule file.
    pub fn strategy_of(spec: &Value) -> Result<Strategy, SweepError> {
        Ok(match spec["strategy_file"].as_str() {
            Some(path) => Strategy::load(path)?,
            None => Strategy::parse(spec["strategy"].as_str().unwrap_or_default())?,
        })
    }

    /// A spec from a TOML file's text (see the README for the layout); `--grid` flags may
    /// then override single parameters.
    pub fn from_toml(text: &str) -> Result<Self, SweepError> {
        let bad = |problem: String| SweepError::Spec(format!("config: {problem}"));
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| bad(e.message().to_owned()))?;
        let strategy = match table.get("strategy") {
            Some(toml::Value::String(name)) => Strategy::load(name)?,
            Some(_) => return Err(bad("strategy must be a string, e.g. \"bb_atr\" or \"my_rules.toml\"".into())),
            None => Strategy::parse("bb_atr")?,
        };
        let mut spec = Self::new(strategy);
        for (key, value) in &table {
            match (key.as_str(), value) {
                ("strategy", _) => {}
                ("fee", v) => spec.fee = number(v).ok_or_else(|| bad("fee must be a number".into()))?,
                ("periods_per_year", v) => {
                    spec.periods_per_year =
                        Some(number(v).ok_or_else(|| bad("periods_per_year must be a number".into()))?);
                }
                ("chunk_size", toml::Value::Integer(n)) if *n > 0 => spec.chunk_size = Some(*n as u64),
                ("chunk_size", _) => return Err(bad("chunk_size must be a whole number ≥ 1".into())),
                ("grid", toml::Value::Table(grid)) => {
                    for (name, values) in grid {
                        let text = match values {
                            toml::Value::String(s) => s.clone(),
                            toml::Value::Array(items) => items
                                .iter()
                                .map(|v| match v {
                                    toml::Value::String(s) => Ok(s.clone()),
                                    v => number(v).map(|x| x.to_string()).ok_or(()),
                                })
                                .collect::<Result<Vec<_>, ()>>()
                                .map_err(|()| bad(format!("grid.{name}: expected numbers or names")))?
                                .join(","),
                            v => number(v)
                                .map(|x| x.to_string())
                                .ok_or_else(|| bad(format!("grid.{name}: expected a list, a range or a value")))?,
                        };
                        spec.set_axis(name, &text)?;
                    }
                }
                ("random", toml::Value::Table(t)) => {
                    let n = integer(t, "n").map_err(&bad)?.ok_or_else(|| bad("random.n is needed".into()))?;
                    spec.sample = Some(Sample { n, seed: integer(t, "seed").map_err(&bad)?.unwrap_or(0) });
                }
                ("walk_forward", toml::Value::Table(t)) => {
                    let get = |k: &str| integer(t, k).map_err(&bad);
                    let (Some(train), Some(test)) = (get("train")?, get("test")?) else {
                        return Err(bad("walk_forward needs train and test (bars)".into()));
                    };
                    let step = get("step")?.unwrap_or(test);
                    if train == 0 || test == 0 || step == 0 {
                        return Err(bad("walk_forward train, test and step must be ≥ 1".into()));
                    }
                    spec.walk_forward =
                        Some(WalkForward { train: train as usize, test: test as usize, step: step as usize });
                }
                (key @ ("grid" | "random" | "walk_forward"), _) => return Err(bad(format!("[{key}] must be a table"))),
                (other, _) => {
                    return Err(bad(format!(
                        "unknown key `{other}` (known: strategy, fee, periods_per_year, chunk_size, grid, random, walk_forward)"
                    )));
                }
            }
        }
        Ok(spec)
    }
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

fn integer(table: &toml::Table, key: &str) -> Result<Option<u64>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
        Some(_) => Err(format!("{key} must be a whole number ≥ 0")),
    }
}
