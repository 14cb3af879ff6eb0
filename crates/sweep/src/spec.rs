//! [`SweepSpec`]: a sweep request validated, made only by
//! [`SweepRequest::check`](crate::SweepRequest::check): the grid, the fee, sampling,
//! walk-forward, chunking and the run's settings, every value checked once.

use crate::error::SweepError;
use crate::overfit::options::OverfittingOptions;
use crate::search::SearchOptions;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::ops::ControlFlow;
use threadx_backtest::{Costs, Grid, RuleKind, Strategy, check_bars_per_year};
use threadx_dispatch::DeviceMode;

/// Monte-Carlo sampling: `n` distinct combos of the grid drawn with `seed` (default 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    pub n: u64,
    #[serde(default)]
    pub seed: u64,
}

/// Walk-forward windows in bars: optimize on `train` bars, evaluate the best combo on the
/// `test` bars that follow, move on by `step` bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WalkForwardInput")]
pub struct WalkForward {
    pub train: usize,
    pub test: usize,
    pub step: usize,
}

/// [`WalkForward`] as a request gives it: `{train, test, step}` (`step` defaults to
/// `test`), or the text `train=BARS,test=BARS[,step=BARS]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum WalkForwardInput {
    Text(String),
    Fields(WalkForwardFields),
    /// Anything else (another key, a value that is not a whole number of bars): named
    /// with the forms that are taken, where serde would only say that none matched.
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalkForwardFields {
    train: Option<usize>,
    test: Option<usize>,
    step: Option<usize>,
}

impl TryFrom<WalkForwardInput> for WalkForward {
    type Error = String;
    fn try_from(input: WalkForwardInput) -> Result<Self, String> {
        let f = match input {
            WalkForwardInput::Text(text) => return Self::parse(&text).map_err(|e| e.to_string()),
            WalkForwardInput::Fields(f) => f,
            WalkForwardInput::Other(_) => {
                return Err("walk_forward: expected text like \"train=500,test=100[,step=100]\" or a table of \
                            train, test[, step], each a whole number of bars"
                    .into());
            }
        };
        let (Some(train), Some(test)) = (f.train, f.test) else {
            return Err("walk_forward: train and test are both needed (bars)".into());
        };
        let step = f.step.unwrap_or(test);
        if train == 0 || test == 0 || step == 0 {
            return Err("walk_forward train, test and step must be ≥ 1".into());
        }
        Ok(Self { train, test, step })
    }
}

impl WalkForward {
    /// Parses `train=BARS,test=BARS[,step=BARS]` (step defaults to test).
    pub fn parse(text: &str) -> Result<Self, SweepError> {
        let bad = |problem: String| SweepError::Spec(format!("--walk-forward {text}: {problem}"));
        let (mut train, mut test, mut step) = (None, None, None);
        for part in text.split(',') {
            let (key, value) = part.split_once('=').ok_or_else(|| bad(format!("expected key=BARS, got `{part}`")))?;
            let key = key.trim();
            let slot = match key {
                "train" => &mut train,
                "test" => &mut test,
                "step" => &mut step,
                other => return Err(bad(format!("unknown key `{other}` (known: train, test, step)"))),
            };
            if slot.is_some() {
                return Err(bad(format!("{key} is given twice")));
            }
            let bars: usize =
                value.trim().parse().ok().filter(|&b| b > 0).ok_or_else(|| {
                    bad(format!("{key} must be a positive whole number of bars, got `{}`", value.trim()))
                })?;
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

/// A sweep, validated: a [`Grid`] (the strategy and one checked list of values per
/// parameter; combos are their Cartesian product in docs/strategies.md's order), the costs,
/// optionally sampling or walk-forward, the chunking, and where and with how much the run
/// may work. Made only by [`SweepRequest::check`](crate::SweepRequest::check).
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    grid: Grid,
    costs: Costs,
    sample: Option<Sample>,
    whole_grid: Option<WholeGrid>,
    search: Option<SearchOptions>,
    walk_forward: Option<WalkForward>,
    overfitting: Option<OverfittingOptions>,
    chunk_size: Option<u64>,
    periods_per_year: Option<f64>,
    threads: Option<usize>,
    device: DeviceMode,
    max_memory: Option<u64>,
}

/// More combos asked (`--random N`, a search's `--trials N`) than the grid has: the whole
/// grid runs instead, each combo once, as samplers do; the run says so and its summary
/// records it (`whole_grid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeGrid {
    /// The combos asked for.
    pub asked: u64,
}

impl WholeGrid {
    /// The line a run prints: `20,000 combos asked, more than the grid has (10,000): the
    /// whole grid runs, each combo once`.
    pub fn note(&self, grid: u64) -> String {
        format!(
            "{} combos asked, more than the grid has ({}): the whole grid runs, each combo once",
            threadx_dispatch::thousands(self.asked),
            threadx_dispatch::thousands(grid)
        )
    }
}

/// The fields of a [`SweepSpec`] before their checks.
pub(crate) struct SpecParts {
    pub grid: Grid,
    pub fee: f64,
    pub slippage: f64,
    pub sample: Option<Sample>,
    pub whole_grid: Option<WholeGrid>,
    pub search: Option<SearchOptions>,
    pub walk_forward: Option<WalkForward>,
    pub overfitting: Option<OverfittingOptions>,
    pub chunk_size: Option<u64>,
    pub periods_per_year: Option<f64>,
    pub threads: Option<usize>,
    pub device: DeviceMode,
    pub max_memory: Option<u64>,
}

impl SweepSpec {
    /// Checks what the grid cannot see alone: the costs, the sample size, the chunk size,
    /// the threads, and that some combo passes the strategy's rules and every rule binds.
    pub(crate) fn checked(parts: SpecParts) -> Result<Self, SweepError> {
        let spec = Self {
            grid: parts.grid,
            costs: Costs::new(parts.fee, parts.slippage)?,
            sample: parts.sample,
            whole_grid: parts.whole_grid,
            search: parts.search,
            walk_forward: parts.walk_forward,
            overfitting: parts.overfitting,
            chunk_size: parts.chunk_size,
            periods_per_year: parts.periods_per_year,
            threads: parts.threads,
            device: parts.device,
            max_memory: parts.max_memory,
        };
        if let Some(p) = spec.periods_per_year {
            check_bars_per_year(p)?;
        }
        if spec.sample.is_some_and(|sample| sample.n == 0) {
            return Err(SweepError::Spec("--random N needs N ≥ 1".into()));
        }
        if spec.chunk_size == Some(0) {
            return Err(SweepError::Spec("the chunk size must be at least 1 combo".into()));
        }
        if let (Some(_), Some(_)) = (spec.sample, spec.walk_forward) {
            return Err(SweepError::Spec("--random and --walk-forward cannot be combined".into()));
        }
        if spec.search.is_some() && spec.sample.is_some() {
            return Err(SweepError::Spec(
                "--search and --random cannot be combined (--random N is --search random --trials N)".into(),
            ));
        }
        if spec.overfitting.is_some() && spec.walk_forward.is_some() {
            return Err(SweepError::Spec(
                "--overfitting and --walk-forward cannot be combined: each window's sweep would need its own".into(),
            ));
        }
        if spec.search.is_some() && spec.walk_forward.is_some() {
            return Err(SweepError::Spec("--search and --walk-forward cannot be combined".into()));
        }
        if let Some(n) = spec.threads {
            check_threads(n).map_err(|problem| SweepError::Spec(format!("threads: {problem}")))?;
        }
        if !spec.any_allowed() {
            let rule = spec.strategy().rule(RuleKind::Require).unwrap_or_default();
            return Err(SweepError::Spec(format!(
                "{}: no combo of the grid passes `require = \"{rule}\"`",
                spec.strategy()
            )));
        }
        spec.check_bindings()?;
        Ok(spec)
    }

    /// The spec a walk-forward's train windows run: no windows of their own, the Sharpe
    /// annualised with `per_year` bars.
    pub(crate) fn for_training(&self, per_year: f64) -> Result<Self, SweepError> {
        let per_year = per_year.is_finite().then_some(per_year).map(check_bars_per_year).transpose()?;
        Ok(Self { walk_forward: None, periods_per_year: per_year, ..self.clone() })
    }

    pub fn strategy(&self) -> &Strategy {
        self.grid.strategy()
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The parameter lists, schema order.
    pub fn axes(&self) -> &[Vec<f64>] {
        self.grid.axes()
    }

    /// Combos in the full grid (before sampling or skipping combos the rules refuse).
    pub fn grid_len(&self) -> u64 {
        self.grid.len()
    }

    /// The fee and the slippage.
    pub fn costs(&self) -> Costs {
        self.costs
    }

    pub fn sample(&self) -> Option<Sample> {
        self.sample
    }

    /// More combos asked than the grid has (the whole grid runs instead), if so.
    pub fn whole_grid(&self) -> Option<WholeGrid> {
        self.whole_grid
    }

    /// The search that proposes the combos, when one does instead of the grid.
    pub fn search(&self) -> Option<&SearchOptions> {
        self.search.as_ref()
    }

    /// The overfitting statistics asked for, if any.
    pub fn overfitting(&self) -> Option<&OverfittingOptions> {
        self.overfitting.as_ref()
    }

    pub fn walk_forward(&self) -> Option<WalkForward> {
        self.walk_forward
    }

    /// Combos per chunk; `None` takes [`chunk_size`](crate::chunk_size) of the data length.
    /// Part of the sweep's identity: a resume or merge needs the same value.
    pub fn chunk_size(&self) -> Option<u64> {
        self.chunk_size
    }

    /// Bars per year that annualise the Sharpe ratio; `None` infers them from the data's
    /// timestamps ([`Ohlcv::bars_per_year`](threadx_indicators::Ohlcv::bars_per_year)).
    pub fn periods_per_year(&self) -> Option<f64> {
        self.periods_per_year
    }

    /// Worker threads; `None`: one per core.
    pub fn threads(&self) -> Option<usize> {
        self.threads
    }

    pub fn device(&self) -> DeviceMode {
        self.device
    }

    /// The most memory preparing may take; `None`: what is available when it starts.
    pub fn max_memory(&self) -> Option<u64> {
        self.max_memory
    }

    /// Binds every rule for every binding of the parameters the rules read (up to
    /// 100,000 bindings, the other parameters at their first values) that `require`
    /// allows, so that a rule no combo can bind (a `max_bars` below 1, a lookahead made by
    /// a parameter) is refused before any work, with the message a backtest gives.
    fn check_bindings(&self) -> Result<(), SweepError> {
        let checked = self.visit_bindings(&RuleKind::ALL, 100_000, |values| {
            match self.strategy().allows(values).then(|| self.strategy().check(values)) {
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
            if self.strategy().allows(values) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
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
            .flat_map(|&kind| self.strategy().depends_on(kind))
            .filter_map(|name| self.strategy().param_index(name).ok())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        let count =
            deps.iter().try_fold(1usize, |n, &i| n.checked_mul(self.axes()[i].len())).filter(|&n| n <= limit)?;
        let mut values: Vec<f64> = self.axes().iter().map(|a| a[0]).collect();
        Some((0..count).try_for_each(|mut k| {
            for &i in deps.iter().rev() {
                values[i] = self.axes()[i][k % self.axes()[i].len()];
                k /= self.axes()[i].len();
            }
            visit(&values)
        }))
    }

    /// The spec as JSON: what the summary records and what a checkpoint or shard must
    /// match to be resumed or merged.
    pub fn to_json(&self) -> Value {
        let schema = self.strategy().schema();
        let grid: serde_json::Map<String, Value> = schema
            .iter()
            .zip(self.axes())
            .map(|(p, axis)| {
                let values: Vec<Value> = axis.iter().map(|&v| p.to_json(v)).collect();
                (p.name.to_owned(), Value::Array(values))
            })
            .collect();
        let mut spec = json!({
            "strategy": self.strategy().name(),
            "grid": grid,
            "fee": self.costs.fee,
            "random": self.sample.map(|s| json!({"n": s.n, "seed": s.seed})),
            "walk_forward": self.walk_forward.map(|w| json!({"train": w.train, "test": w.test, "step": w.step})),
        });
        // Only when set: a run without slippage keeps the identity it always had.
        if self.costs.slippage != 0.0 {
            spec["slippage"] = json!(self.costs.slippage);
        }
        if let Some(p) = self.periods_per_year {
            spec["periods_per_year"] = json!(p);
        }
        if let Some(search) = &self.search {
            spec["search"] = search.to_json();
        }
        if let Some(overfitting) = &self.overfitting {
            spec["overfitting"] = overfitting.to_json();
        }
        if !self.strategy().is_builtin() {
            // A rule file is part of the identity: a resume or merge needs the same rules.
            spec["strategy_file"] = json!(self.strategy().origin());
            spec["rules"] = json!(format!("{:016x}", fnv1a(self.strategy().source().as_bytes())));
        }
        spec
    }

    /// The spec a summary's JSON ([`SweepSpec::to_json`]) records, read back as a
    /// request (its rule file loaded again) and checked.
    pub fn from_identity(spec: &Value) -> Result<Self, SweepError> {
        let bad = |e: serde_json::Error| SweepError::Merge(format!("the summaries' spec cannot be read: {e}"));
        let mut fields = spec.clone();
        if let Some(object) = fields.as_object_mut() {
            if let Some(file) = object.remove("strategy_file") {
                object.insert("strategy".into(), file);
            }
            object.remove("rules");
        }
        let mut request: crate::SweepRequest = serde_json::from_value(fields).map_err(bad)?;
        request.device = Some(DeviceMode::Cpu);
        let spec = request.check()?;
        // A summary records every parameter's values; one left out would silently take its default.
        let named = request.grid.unwrap_or_default();
        if let Some(p) = spec.strategy().schema().iter().find(|p| !named.iter().any(|(n, _)| *n == p.name)) {
            return Err(SweepError::Merge(format!("the summaries' spec has no values for parameter {}", p.name)));
        }
        Ok(spec)
    }
}

/// Worker threads allowed per logical core: more only adds start-up time and switching.
const THREADS_PER_CORE: usize = 16;

/// `n` worker threads, or why not: zero, or more than [`THREADS_PER_CORE`] per logical
/// core, is refused. The one rule of the request and of every front end's flag.
pub fn check_threads(n: usize) -> Result<usize, String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let max = THREADS_PER_CORE * cores;
    if n == 0 {
        return Err("at least 1 is needed".into());
    }
    if n > max {
        return Err(format!(
            "{n} is more than the {max} allowed ({THREADS_PER_CORE} per core of the {cores} this machine has)"
        ));
    }
    Ok(n)
}

/// FNV-1a (64-bit) of `bytes`: the identity hash of data sets and rule files, and the
/// checksum of a checkpoint chunk's rows.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    std::hash::Hasher::write(&mut hasher, bytes);
    std::hash::Hasher::finish(&hasher)
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn fnv1a_is_the_published_64_bit_fnv_1a() {
        // The reference vectors of the FNV authors (isthe.com/chongo/tech/comp/fnv).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
