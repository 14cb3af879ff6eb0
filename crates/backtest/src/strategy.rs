//! [`Strategy`]: a strategy defined by a rule file (docs/writing-strategies.md), either
//! one of the built-ins embedded in the binary (`bb_atr`, `ma_cross`, `rsi_reversion`) or
//! a user's `.toml` file. Its parameter schema ([`ParamSpec`]) checks values before any
//! work; its rules say what each row of a signal book holds.

use crate::costs::Fills;
use crate::error::BacktestError;
use crate::param::ParamSpec;
use crate::portfolio::{SizeType, Sizing, SizingRequest};
use crate::rules::{Rule, RuleKind, StrategyFile};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A strategy: one position at a time (long, short or flat), all cash in, filled at the
/// close or the next open, with the cost, equity and metric rules of docs/strategies.md;
/// its decisions come from its rules. Cheap to clone (shared).
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

    /// What [`Strategy::load`] takes to load it again: a built-in's name, a file's path.
    pub fn locator(&self) -> &str {
        if self.is_builtin() { self.name() } else { self.origin() }
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

    /// How its orders fill: `fill` and `intrabar` of its rule file.
    pub fn fills(&self) -> Fills {
        self.0.fills
    }

    /// How an account sizes its entries: its rule file's `[sizing]` (nothing asked
    /// without one).
    pub fn sizing(&self) -> &SizingRequest {
        &self.0.sizing
    }

    /// Refuses an account the strategy cannot size: risk sizing needs a stop rule.
    pub fn check_sizing(&self, sizing: &Sizing) -> Result<(), BacktestError> {
        if sizing.kind == SizeType::Risk && self.compiled(RuleKind::Stop).is_none() {
            return Err(BacktestError::Portfolio(format!(
                "{}: risk sizing sizes each entry from its distance to its stop, and the strategy has no `stop` rule",
                self.0.origin
            )));
        }
        Ok(())
    }

    /// Refuses a strategy whose `[sizing]` does not put all the account into each entry
    /// where it runs as a single run (docs/portfolios.md): such sizing is an account's.
    pub fn require_all_in(&self) -> Result<(), BacktestError> {
        if self.0.sizing.is_all_in() {
            return Ok(());
        }
        Err(BacktestError::Definition(format!(
            "{}: its [sizing] sizes each entry as an account does: run it with --portfolio (portfolio=True in \
             Python), where one data set is an account of one symbol",
            self.0.origin
        )))
    }

    /// Every rule of the strategy.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.0.rules.iter()
    }

    pub(crate) fn compiled(&self, kind: RuleKind) -> Option<&Rule> {
        self.0.rules.iter().find(|r| r.kind == kind)
    }

    /// The values a sweep takes when none are given: each parameter's `grid`, or its default.
    pub fn default_axes(&self) -> Vec<Vec<f64>> {
        self.schema()
            .iter()
            // A grid was checked when the file was read.
            .map(|p| p.grid.as_ref().and_then(|g| p.axis(g).ok()).unwrap_or_else(|| vec![p.default]))
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
            let at_rule = |span: std::ops::Range<usize>, problem: &str| {
                let at = rule.start + span.start..rule.start + span.end;
                let with = self.describe_only(values, rule.kind);
                let with = if with.is_empty() { String::new() } else { format!(" with {with}") };
                let message = format!("rule `{}`{with}: {problem}", rule.kind.name());
                BacktestError::Definition(crate::rules::render(&self.0.origin, &self.0.source, at, &message))
            };
            let bound = rule.bind(values, schema).map_err(|e| at_rule(e.span, &e.message))?;
            if rule.kind == RuleKind::MaxBars {
                crate::rules::max_bars_of(&bound).map_err(|problem| at_rule(0..rule.text.len(), &problem))?;
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
