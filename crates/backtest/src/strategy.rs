//! [`Strategy`]: a strategy defined by a rule file (docs/writing-strategies.md), either
//! one of the built-ins embedded in the binary (`bb_atr`, `ma_cross`, `rsi_reversion`) or
//! a user's `.toml` file. Its parameter schema ([`ParamSpec`]) checks values before any
//! work; its rules say what each row of a signal book holds.

use crate::BacktestError;
use crate::rules::{Rule, RuleKind, StrategyFile};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// What values a parameter takes.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamKind {
    /// A whole number (periods).
    Int,
    /// A real number.
    Float,
    /// One of a few names; the value is the name's index.
    Choice(Vec<String>),
}

/// One parameter of a strategy: its name, kind, default, valid range and default sweep
/// values.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub kind: ParamKind,
    pub default: f64,
    pub min: f64,
    /// Whether `min` itself is refused (e.g. `atr_mult > 0`).
    pub min_exclusive: bool,
    pub max: f64,
    pub help: String,
    /// The values a sweep takes when none are given (`10:50:5`, `1,2,3`, `sma,ema`);
    /// `None`: the default alone.
    pub grid: Option<String>,
}

/// The most values one parameter may take (a range longer than this is a typo).
pub const MAX_AXIS_VALUES: usize = 1_000_000;

impl ParamSpec {
    /// A parameter with an inclusive range, no help and no default sweep values.
    pub fn new(name: &str, kind: ParamKind, default: f64, min: f64, max: f64) -> Self {
        Self { name: name.into(), kind, default, min, min_exclusive: false, max, help: String::new(), grid: None }
    }

    fn bad(&self, value: String, problem: String) -> BacktestError {
        BacktestError::BadValue { param: self.name.clone(), value, problem }
    }

    /// Parses and checks one value given as text (`20`, `2.5`, `ema`).
    pub fn parse(&self, text: &str) -> Result<f64, BacktestError> {
        let text = text.trim();
        let value = match &self.kind {
            ParamKind::Choice(names) => match names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
                Some(i) => i as f64,
                None => return Err(self.bad(text.into(), format!("expected one of {}", names.join(", ")))),
            },
            ParamKind::Int | ParamKind::Float => text
                .parse::<f64>()
                .map_err(|_| self.bad(text.into(), format!("not a number (expected {})", self.range())))?,
        };
        self.check(value).map_err(|e| match e {
            BacktestError::BadValue { problem, .. } => self.bad(text.into(), problem),
            other => other,
        })?;
        Ok(value)
    }

    /// Checks a value against the kind and range.
    pub fn check(&self, value: f64) -> Result<(), BacktestError> {
        let bad = |problem: String| self.bad(self.format(value), problem);
        if !value.is_finite() {
            return Err(bad("not a finite number".into()));
        }
        if !matches!(self.kind, ParamKind::Float) && value.fract() != 0.0 {
            return Err(bad("must be a whole number".into()));
        }
        let below = if self.min_exclusive { value <= self.min } else { value < self.min };
        if below || value > self.max {
            return Err(bad(format!("out of range: must be {}", self.range())));
        }
        Ok(())
    }

    /// The valid range in words, e.g. `> 0 and ≤ 100`.
    pub fn range(&self) -> String {
        if let ParamKind::Choice(names) = &self.kind {
            return format!("one of {}", names.join(", "));
        }
        let low = (self.min > f64::MIN).then(|| format!("{} {}", if self.min_exclusive { ">" } else { "≥" }, self.min));
        let high = (self.max < f64::MAX).then(|| format!("≤ {}", self.max));
        match (low, high) {
            (Some(l), Some(h)) => format!("{l} and {h}"),
            (l, h) => l.or(h).unwrap_or_else(|| "any finite number".into()),
        }
    }

    /// A value as every JSON writes it: whole-number parameters as integers (`20`), floats
    /// in their shortest round-trip form (`2.0`, `2.5`), choices by name (`"ema"`).
    pub fn to_json(&self, value: f64) -> serde_json::Value {
        match self.kind {
            ParamKind::Choice(_) => serde_json::json!(self.format(value)),
            ParamKind::Int => serde_json::json!(value as i64),
            ParamKind::Float => serde_json::json!(value),
        }
    }

    /// A value as the user writes it (`20`, `2.5`, `ema`).
    pub fn format(&self, value: f64) -> String {
        match &self.kind {
            ParamKind::Choice(names) if value >= 0.0 && (value as usize) < names.len() => names[value as usize].clone(),
            _ => format!("{value}"),
        }
    }

    /// The values of one axis from a list (`1.5,2,2.5`, `sma,ema`) or an inclusive range
    /// `start:stop:step`, each checked against the schema; no value may repeat.
    pub fn axis(&self, text: &str) -> Result<Vec<f64>, BacktestError> {
        let bad = |problem: String| BacktestError::Axis(format!("{}={text}: {problem}", self.name));
        let text = text.trim();
        let values = if text.contains(':') {
            if matches!(self.kind, ParamKind::Choice(_)) {
                return Err(bad(format!("a range needs numbers; list the names instead ({})", self.range())));
            }
            let parts: Vec<&str> = text.split(':').collect();
            let [start, stop, step] = parts[..] else {
                return Err(bad("a range is start:stop:step (inclusive), e.g. 10:50:5".into()));
            };
            let num = |what: &str, s: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(format!("{what} `{s}` is not a number")))
            };
            let (start, stop, step) = (num("start", start)?, num("stop", stop)?, num("step", step)?);
            if step <= 0.0 {
                return Err(bad("the step must be positive".into()));
            }
            if start > stop {
                return Err(bad(format!("empty range: start {start} is after stop {stop}")));
            }
            // A tolerance keeps 0.5:5:0.5 inclusive of 5 despite binary rounding.
            let count = ((stop - start) / step + 1e-9).floor() + 1.0;
            if count > MAX_AXIS_VALUES as f64 {
                return Err(bad(format!("{count} values; at most {MAX_AXIS_VALUES} per parameter")));
            }
            // Values are rounded to 10 decimals so that 0.1 steps read 0.3, not 0.30000000000000004.
            (0..count as usize).map(|i| ((start + i as f64 * step) * 1e10).round() / 1e10).collect::<Vec<_>>()
        } else {
            let items: Vec<&str> = text.split(',').map(str::trim).collect();
            if items.iter().any(|s| s.is_empty()) {
                return Err(bad("empty value in the list".into()));
            }
            items.iter().map(|s| self.parse(s)).collect::<Result<Vec<_>, _>>()?
        };
        for &v in &values {
            self.check(v)?;
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!("{} is listed twice", self.format(w[0]))));
        }
        Ok(values)
    }
}

/// The most parameters a strategy may have.
pub const MAX_PARAMS: usize = 8;

/// One parameter set in schema order, held inline (no allocation); reads as a `&[f64]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamValues {
    values: [f64; MAX_PARAMS],
    len: usize,
}

impl ParamValues {
    /// # Panics
    /// If `values` has more than [`MAX_PARAMS`] entries.
    pub fn new(values: &[f64]) -> Self {
        let mut inline = [0.0; MAX_PARAMS];
        inline[..values.len()].copy_from_slice(values);
        Self { values: inline, len: values.len() }
    }
}

impl std::ops::Deref for ParamValues {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.values[..self.len]
    }
}

/// A strategy: long only, one position at a time, all cash in, filled at the close, with
/// the fee, equity and metric rules of docs/strategies.md; its decisions come from its
/// rules. Cheap to clone (shared).
#[derive(Clone)]
pub struct Strategy(Arc<StrategyFile>);

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Strategy").field(&self.0.name).field(&self.0.origin).finish()
    }
}

impl PartialEq for Strategy {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || (self.0.name == other.0.name && self.0.source == other.0.source)
    }
}

impl Eq for Strategy {}

/// The built-in strategies' rule files, embedded in the binary.
const BUILTIN_FILES: [(&str, &str); 3] = [
    ("bb_atr.toml", include_str!("../strategies/bb_atr.toml")),
    ("ma_cross.toml", include_str!("../strategies/ma_cross.toml")),
    ("rsi_reversion.toml", include_str!("../strategies/rsi_reversion.toml")),
];

impl Strategy {
    /// The built-in strategies, in `threadx strategy list` order.
    pub fn builtins() -> &'static [Strategy] {
        static BUILTINS: OnceLock<Vec<Strategy>> = OnceLock::new();
        BUILTINS.get_or_init(|| {
            BUILTIN_FILES
                .iter()
                .map(|(file, text)| {
                    let file = StrategyFile::parse(text, &format!("built-in {file}"), true);
                    Strategy(Arc::new(file.unwrap_or_else(|e| panic!("a built-in strategy file is wrong: {e}"))))
                })
                .collect()
        })
    }

    /// The built-in strategy called `name` (`bb_atr`, `ma_cross`, `rsi_reversion`).
    pub fn parse(name: &str) -> Result<Self, BacktestError> {
        Self::builtins().iter().find(|s| s.name().eq_ignore_ascii_case(name.trim())).cloned().ok_or_else(|| {
            let names = Self::builtins().iter().map(|s| s.name());
            let hint = crate::rules::nearest(name.trim(), names.clone())
                .map_or_else(String::new, |k| format!("; did you mean '{k}'?"));
            BacktestError::UnknownStrategy {
                name: name.to_owned(),
                known: format!(
                    "{}, or a rule file such as my_strategy.toml{hint}",
                    names.collect::<Vec<_>>().join(", ")
                ),
            }
        })
    }

    /// A built-in by name, or a rule file by path (a name ending in `.toml`, or holding a
    /// path separator).
    pub fn load(name_or_path: &str) -> Result<Self, BacktestError> {
        let text = name_or_path.trim();
        if !(text.ends_with(".toml") || text.contains('/') || text.contains('\\')) {
            return Self::parse(text);
        }
        let source = std::fs::read_to_string(text)
            .map_err(|e| BacktestError::Definition(format!("strategy file {text}: {e}")))?;
        Self::from_toml(&source, text)
    }

    /// A strategy from the text of a rule file; `origin` names it in errors (a path).
    pub fn from_toml(source: &str, origin: &str) -> Result<Self, BacktestError> {
        Ok(Strategy(Arc::new(StrategyFile::parse(source, origin, false)?)))
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    pub fn description(&self) -> &str {
        &self.0.description
    }

    /// Where it was defined: `built-in bb_atr.toml`, or the file's path.
    pub fn origin(&self) -> &str {
        &self.0.origin
    }

    pub fn is_builtin(&self) -> bool {
        self.0.builtin
    }

    /// The rule file's text.
    pub fn source(&self) -> &str {
        &self.0.source
    }

    /// The parameters, in combo order (the last varies fastest in a grid).
    pub fn schema(&self) -> &[ParamSpec] {
        &self.0.params
    }

    /// The text of rule `kind`, if the strategy has one.
    pub fn rule(&self, kind: RuleKind) -> Option<&str> {
        self.compiled(kind).map(|r| r.text.as_str())
    }

    /// The parameters rule `kind` reads, schema order.
    pub fn depends_on(&self, kind: RuleKind) -> Vec<&str> {
        self.compiled(kind).map_or_else(Vec::new, |r| r.deps.iter().map(|&i| self.0.params[i].name.as_str()).collect())
    }

    pub(crate) fn compiled(&self, kind: RuleKind) -> Option<&Rule> {
        self.0.rules.iter().find(|r| r.kind == kind)
    }

    /// The values a sweep takes when none are given: each parameter's `grid`, or its default.
    pub fn default_axes(&self) -> Vec<Vec<f64>> {
        self.schema()
            .iter()
            // A grid was checked when the file was read.
            .map(|p| p.grid.as_deref().and_then(|g| p.axis(g).ok()).unwrap_or_else(|| vec![p.default]))
            .collect()
    }

    /// The position of parameter `name` in [`Strategy::schema`].
    pub fn param_index(&self, name: &str) -> Result<usize, BacktestError> {
        self.schema().iter().position(|p| p.name == name.trim()).ok_or_else(|| {
            let names = self.schema().iter().map(|p| p.name.as_str());
            let hint = crate::rules::nearest(name.trim(), names.clone())
                .map_or_else(String::new, |k| format!("; did you mean '{k}'?"));
            BacktestError::UnknownParam {
                strategy: self.name().to_owned(),
                param: name.to_owned(),
                known: format!("{}{hint}", names.collect::<Vec<_>>().join(", ")),
            }
        })
    }

    /// Parameter values in schema order from `name=value` pairs; unnamed ones take their
    /// default. Every value and the combination are checked.
    pub fn params<S: AsRef<str>>(&self, pairs: &[(S, S)]) -> Result<Vec<f64>, BacktestError> {
        let mut values: Vec<f64> = self.schema().iter().map(|p| p.default).collect();
        let mut seen = vec![false; values.len()];
        for (name, text) in pairs {
            let i = self.param_index(name.as_ref())?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(BacktestError::Duplicate { param: self.schema()[i].name.clone() });
            }
            values[i] = self.schema()[i].parse(text.as_ref())?;
        }
        self.check(&values)?;
        Ok(values)
    }

    /// Checks a full set of values (schema order): each against its range, then the
    /// `require` rule, then that every rule can be formed with them (periods ≥ 1, no
    /// lookahead, a `max_bars` ≥ 1).
    pub fn check(&self, values: &[f64]) -> Result<(), BacktestError> {
        let schema = self.schema();
        let combo = |problem: String| BacktestError::Combo { strategy: self.name().to_owned(), problem };
        if values.len() != schema.len() {
            return Err(combo(format!("{} values given for {} parameters", values.len(), schema.len())));
        }
        for (spec, &v) in schema.iter().zip(values) {
            spec.check(v)?;
        }
        if !self.allows(values) {
            let rule = self.compiled(RuleKind::Require).map_or("", |r| r.text.as_str());
            return Err(combo(format!(
                "{} breaks the rule `require = \"{rule}\"`",
                self.describe_only(values, RuleKind::Require)
            )));
        }
        for rule in &self.0.rules {
            // A binding error is shown at its text in the file, with the values that made it.
            let bound = rule.bind(values, schema).map_err(|e| {
                let at = rule.start + e.span.start..rule.start + e.span.end;
                let with = self.describe_only(values, rule.kind);
                let with = if with.is_empty() { String::new() } else { format!(" with {with}") };
                let message = format!("rule `{}`{with}: {}", rule.kind.name(), e.message);
                BacktestError::Definition(crate::rules::render(&self.0.origin, &self.0.source, at, &message))
            })?;
            if rule.kind == RuleKind::MaxBars {
                crate::rules::max_bars_of(&bound).map_err(combo)?;
            }
        }
        Ok(())
    }

    /// Whether in-range values (schema order) obey the `require` rule. A sweep asks it
    /// per combo and skips the combos it refuses; it allocates only for a rule that calls
    /// a function.
    pub fn allows(&self, values: &[f64]) -> bool {
        self.compiled(RuleKind::Require).is_none_or(
            |rule| matches!(rule.bind(values, self.schema()), Ok(crate::rules::Bound::Const(v)) if v != 0.0),
        )
    }

    /// The first bar on which a parameter set may enter: the first bar where every series
    /// its rules read has a value (and, for crossings and lookbacks, the bars before it too).
    pub fn warmup(&self, values: &[f64]) -> Result<usize, BacktestError> {
        self.check(values)?;
        let mut warmup = 0;
        for rule in &self.0.rules {
            let bound = rule.bind(values, self.schema()).map_err(|e| BacktestError::Definition(e.message))?;
            warmup = warmup.max(crate::rules::warmup_of(rule.kind, &bound));
        }
        Ok(warmup)
    }

    /// `name=value` pairs of a parameter set, as the user writes them.
    pub fn describe(&self, values: &[f64]) -> String {
        self.schema()
            .iter()
            .zip(values)
            .map(|(p, &v)| format!("{}={}", p.name, p.format(v)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `name=value` pairs of the parameters rule `kind` reads.
    fn describe_only(&self, values: &[f64], kind: RuleKind) -> String {
        let deps = self.compiled(kind).map_or(&[][..], |r| &r.deps);
        deps.iter()
            .map(|&i| format!("{}={}", self.schema()[i].name, self.schema()[i].format(values[i])))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks a fee (fraction of traded value per side).
pub fn check_fee(fee: f64) -> Result<(), BacktestError> {
    if (0.0..1.0).contains(&fee) { Ok(()) } else { Err(BacktestError::Fee(fee)) }
}

/// Every built-in strategy with its parameters, defaults and ranges, for `--help` texts.
pub fn strategy_help() -> String {
    let builtins = Strategy::builtins().iter().map(|s| {
        let params: String = s
            .schema()
            .iter()
            .map(|p| format!("\n  {}={}  {}; {}", p.name, p.format(p.default), p.help, p.range()))
            .collect();
        format!("{}:{params}", s.name())
    });
    let mut help = builtins.collect::<Vec<_>>().join("\n");
    help.push_str("\nor a rule file: --strategy my_strategy.toml (see `threadx strategy show bb_atr`)");
    help
}
