//! A strategy's rules checked against its parameters ([`Rule::compile`]: names, kinds,
//! lookaheads, and the parameters each rule depends on), and bound to parameter values
//! ([`Rule::bind`]).

use super::bind::{bind, shape_deps};
use super::bound::Bound;
use super::check::{Checker, Kind};
use super::parse::{ExprError, Node, error as err, parse};
use crate::param::ParamSpec;

/// The rules of a strategy file, in `[rules]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// When to enter (a condition per bar).
    Entry,
    /// When to exit (a condition per bar).
    Exit,
    /// The stop level, taken at the entry bar and frozen for the trade: exit at the first
    /// close at or below it.
    Stop,
    /// The target level, taken at the entry bar and frozen: exit at the first close at or
    /// above it.
    TakeProfit,
    /// Exit after this many bars in the trade (parameters only).
    MaxBars,
    /// When to open a short position (a condition per bar).
    ShortEntry,
    /// When to close a short position (a condition per bar).
    ShortExit,
    /// A short's stop level, taken at the entry and frozen: exit at the first price at or
    /// above it.
    ShortStop,
    /// A short's target level, taken at the entry and frozen: exit at the first price at
    /// or below it.
    ShortTakeProfit,
    /// A trailing stop's distance in price units, taken at the entry and frozen: the stop
    /// follows the best price since the entry at that distance and only tightens.
    Trail,
    /// Which parameter combinations are valid (parameters only): others are refused, and
    /// a sweep skips them.
    Require,
    /// A portfolio's order of a bar's entries when the cash cannot pay for them all: the
    /// highest value first (a number per bar; no parameter, for now).
    Rank,
}

impl RuleKind {
    pub const ALL: [RuleKind; 12] = [
        RuleKind::Entry,
        RuleKind::Exit,
        RuleKind::Stop,
        RuleKind::TakeProfit,
        RuleKind::MaxBars,
        RuleKind::ShortEntry,
        RuleKind::ShortExit,
        RuleKind::ShortStop,
        RuleKind::ShortTakeProfit,
        RuleKind::Trail,
        RuleKind::Require,
        RuleKind::Rank,
    ];

    /// The key in `[rules]`.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Entry => "entry",
            RuleKind::Exit => "exit",
            RuleKind::Stop => "stop",
            RuleKind::TakeProfit => "take_profit",
            RuleKind::MaxBars => "max_bars",
            RuleKind::ShortEntry => "short_entry",
            RuleKind::ShortExit => "short_exit",
            RuleKind::ShortStop => "short_stop",
            RuleKind::ShortTakeProfit => "short_take_profit",
            RuleKind::Trail => "trail",
            RuleKind::Require => "require",
            RuleKind::Rank => "rank",
        }
    }

    /// What the rule must give: a condition or a number, per bar or from parameters only.
    fn wants(self) -> (Kind, bool) {
        match self {
            RuleKind::Entry | RuleKind::Exit | RuleKind::ShortEntry | RuleKind::ShortExit => (Kind::Cond, true),
            RuleKind::Stop
            | RuleKind::TakeProfit
            | RuleKind::ShortStop
            | RuleKind::ShortTakeProfit
            | RuleKind::Trail
            | RuleKind::Rank => (Kind::Number, true),
            RuleKind::MaxBars => (Kind::Number, false),
            RuleKind::Require => (Kind::Cond, false),
        }
    }
}

/// One rule of a strategy: its text, its tree and the parameters it reads.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub kind: RuleKind,
    pub text: String,
    /// Where `text` starts in its file (0 for a rule compiled alone).
    pub start: usize,
    node: Node,
    /// Indices of the parameters the rule reads, ascending.
    pub deps: Vec<usize>,
    /// Those of `deps` that decide which series the rule reads (periods, lookbacks,
    /// `if` conditions, called choices): the others only scale or compare them.
    pub shape: Vec<usize>,
}

impl Rule {
    /// Parses and checks `text` as rule `kind` of a strategy with `params`.
    pub(crate) fn compile(kind: RuleKind, text: &str, params: &[ParamSpec]) -> Result<Self, ExprError> {
        let node = parse(text)?;
        let checker = Checker { params, text };
        let ty = checker.check(&node)?;
        let (kind_wanted, per_bar_allowed) = kind.wants();
        if ty.kind != kind_wanted {
            return err(
                format!("`{}` must be {}; this is {}", kind.name(), kind_wanted.word(), ty.kind.word()),
                node.span,
            );
        }
        if ty.per_bar && !per_bar_allowed {
            return err(
                format!("`{}` may read only numbers and parameters, not per-bar values", kind.name()),
                node.span,
            );
        }
        let bits = |mask: u64| (0..params.len()).filter(|&i| mask >> i & 1 == 1).collect();
        let shape = bits(shape_deps(&node, params));
        Ok(Self { kind, text: text.to_owned(), start: 0, node, deps: bits(ty.deps), shape })
    }

    /// The rule with parameter values in place (`values` in schema order; only the
    /// parameters the rule reads are looked at). An error names the value that does not
    /// fit (a period below 1, a lookback into the future) and points into the rule's text
    /// (add [`Rule::start`] for the file).
    pub(crate) fn bind(&self, values: &[f64], params: &[ParamSpec]) -> Result<Bound, ExprError> {
        bind(&self.node, values, params, &self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::ParamKind;

    fn params() -> Vec<ParamSpec> {
        let int = |name: &str| ParamSpec::new(name, ParamKind::Int, 20.0, 1.0, 1000.0);
        vec![
            int("n"),
            ParamSpec::new("m", ParamKind::Float, 2.0, 0.0, 10.0),
            ParamSpec::new("ma", ParamKind::Choice(vec!["sma".into(), "ema".into()]), 0.0, 0.0, 1.0),
            int("k"),
        ]
    }

    fn compile(kind: RuleKind, text: &str) -> Result<Rule, ExprError> {
        Rule::compile(kind, text, &params())
    }

    #[test]
    fn each_rule_depends_on_the_parameters_it_names() {
        let cases = [
            (RuleKind::Entry, "close > highest(high, n)[1]", vec![0]),
            (RuleKind::Exit, "crosses_below(ma(n), ma(k))", vec![0, 2, 3]),
            (RuleKind::Stop, "close - m * atr(14)", vec![1]),
            (RuleKind::MaxBars, "k * 2", vec![3]),
            (RuleKind::Require, "n < k", vec![0, 3]),
            (RuleKind::Entry, "close[k] < open", vec![3]),
        ];
        for (kind, text, deps) in cases {
            assert_eq!(compile(kind, text).unwrap().deps, deps, "{text}");
        }
    }

    #[test]
    fn mistakes_are_refused_with_a_place_and_a_suggestion() {
        let cases = [
            (RuleKind::Stop, "close - m * atrr(14)", "unknown function 'atrr' (did you mean 'atr'?)", "atrr"),
            // Another tool's name for one of ours, and a name near none.
            (
                RuleKind::Entry,
                "crossover(close, sma(10))",
                "unknown function 'crossover' (ThreadX calls it 'crosses_above')",
                "crossover",
            ),
            (
                RuleKind::Entry,
                "sqrt(close) > 3",
                "unknown function 'sqrt' (`threadx strategy show NAME` lists the functions)",
                "sqrt",
            ),
            (
                RuleKind::Entry,
                "clsoe > 1",
                "unknown name 'clsoe' (did you mean 'close'?) (parameters and open, high, low, close, volume)",
                "clsoe",
            ),
            (
                RuleKind::Entry,
                "close[-1] > close",
                "`close[-1]` looks 1 bar(s) into the future: rules may only look back (lookahead refused)",
                "-1",
            ),
            (RuleKind::Entry, "close[0.5] > close", "bars ago must be a whole number, not 0.5", "0.5"),
            (RuleKind::Entry, "close + 1", "`entry` must be a condition; this is a number", "close + 1"),
            (RuleKind::Stop, "close > 1", "`stop` must be a number; this is a condition", "close > 1"),
            (
                RuleKind::MaxBars,
                "n + close",
                "`max_bars` may read only numbers and parameters, not per-bar values",
                "n + close",
            ),
            (RuleKind::Entry, "sma() > 1", "sma takes sma([x,] n); 0 argument(s) given", "sma()"),
            (
                RuleKind::Entry,
                "sma(close) > 1",
                "a period of sma must be a whole number from numbers and parameters",
                "close",
            ),
            (
                RuleKind::Entry,
                "sma(high > low, n) > 1",
                "sma reads a series of numbers here (the close when left out); this is a condition",
                "high > low",
            ),
            (RuleKind::Entry, "atr(high, 14) > 1", "atr takes atr(n); 2 argument(s) given", "atr(high, 14)"),
            (
                RuleKind::Entry,
                "sma(close[1]) > 1",
                "a period of sma must be a whole number from numbers and parameters",
                "close[1]",
            ),
            (RuleKind::Entry, "ma > 1", "`ma` is a choice (sma, ema): call it like one of them, e.g. `ma(...)`", "ma"),
            (RuleKind::Entry, "n(3) > 1", "`n` is a parameter, not a function", "n"),
            (
                RuleKind::Entry,
                "close > 1 + (close < 2)",
                "`+` needs a number on each side; this is a condition",
                "(close < 2)",
            ),
            (RuleKind::Entry, "not close", "`not` needs a condition; this is a number", "close"),
            (RuleKind::Entry, "sma > 1", "`sma` is a function: call it, e.g. `sma(...)`", "sma"),
        ];
        for (kind, text, message, at) in cases {
            let e = compile(kind, text).unwrap_err();
            assert_eq!((e.message.as_str(), &text[e.span.clone()]), (message, at), "{text}");
        }
    }

    #[test]
    fn binding_folds_parameters_and_refuses_values_that_do_not_fit() {
        let rule = compile(RuleKind::Entry, "close[k - 3] > sma(n)").unwrap();
        let values = [20.0, 2.0, 0.0, 5.0];
        // close[2] looks back 2 bars, sma(20) 19: the rule's warm-up is the longer.
        assert_eq!(rule.bind(&values, &params()).unwrap().lookback(), 19);
        let e = rule.bind(&[20.0, 2.0, 0.0, 1.0], &params()).unwrap_err();
        assert_eq!(
            e.message,
            "`close[k - 3]` with k - 3=-2 does not look back a whole number of bars (lookahead refused)"
        );
        assert_eq!(e.span, 6..11, "at `k - 3`");
        let period = compile(RuleKind::Entry, "sma(n - 20) > 1").unwrap();
        let e = period.bind(&values, &params()).unwrap_err();
        assert_eq!(e.message, "sma: period `n - 20` = 0 is not a whole number from 1 to 1e9");
        assert_eq!(e.span, 4..10, "at `n - 20`");
        let require = compile(RuleKind::Require, "n < k and abs(m) > 1").unwrap();
        assert_eq!(require.bind(&values, &params()).unwrap(), Bound::Const(0.0));
        assert_eq!(require.bind(&[2.0, 2.0, 0.0, 5.0], &params()).unwrap(), Bound::Const(1.0));
    }
}
