//! A strategy's rules checked against its parameters ([`Rule::compile`]: names, kinds,
//! lookaheads, and the parameters each rule depends on), and bound to parameter values
//! ([`Rule::bind`]).

use super::eval::Bound;
use super::functions::{Arg, ArgValue, FUNCTIONS, Function, Gives, function, named_value, value_names};
use super::parse::{ExprError, Node, NodeKind, parse};
use crate::param::{ParamKind, ParamSpec};
use std::ops::Range;

/// The longest look back and the longest period a rule may ask for, in bars: warm-ups
/// (sums of a few of them) then stay well inside the 32-bit bar numbers of books and
/// kernels, so every command reports the same warm-up.
const MAX_LOOKBACK: f64 = 1e9;

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
}

impl RuleKind {
    pub const ALL: [RuleKind; 11] = [
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
            | RuleKind::Trail => (Kind::Number, true),
            RuleKind::MaxBars => (Kind::Number, false),
            RuleKind::Require => (Kind::Cond, false),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Cond,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Number => "a number",
            Kind::Cond => "a condition",
        }
    }
}

/// What an expression gives: its kind, whether it varies per bar, which parameters it reads.
#[derive(Debug, Clone, Copy)]
struct Ty {
    kind: Kind,
    per_bar: bool,
    deps: u64,
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

fn err<T>(message: impl Into<String>, span: Range<usize>) -> Result<T, ExprError> {
    Err(ExprError { message: message.into(), span })
}

/// The known name nearest to `name`, if one is near enough to be a typo of it.
pub(crate) fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), k))
        .filter(|&(d, k)| (d <= 2.max(k.len() / 4) && d < k.len()) || (name.len() > 2 && name.starts_with(k)))
        .min()
        .map(|(_, k)| k)
}

/// ` (did you mean 'x'?)` when a known name is near `name`.
pub(crate) fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    nearest(name, known).map_or_else(String::new, |k| format!(" (did you mean '{k}'?)"))
}

struct Checker<'a> {
    params: &'a [ParamSpec],
    text: &'a str,
}

impl Checker<'_> {
    fn param(&self, name: &str) -> Option<usize> {
        param_index(self.params, name)
    }

    /// The function a call names: a function, or a choice parameter whose choices are
    /// functions taking the same arguments (`ma_type(n)` with ma_type in sma, ema).
    fn callee(&self, name: &str, span: &Range<usize>) -> Result<(&'static Function, u64), ExprError> {
        if let Some(f) = function(name) {
            return Ok((f, 0));
        }
        if let Some(i) = self.param(name) {
            let ParamKind::Choice(choices) = &self.params[i].kind else {
                return err(format!("`{name}` is a parameter, not a function"), span.clone());
            };
            let mut found: Option<&'static Function> = None;
            for choice in choices {
                let Some(f) = function(choice) else {
                    return err(
                        format!("`{name}` is called, but its choice `{choice}` is not a function"),
                        span.clone(),
                    );
                };
                if found.is_some_and(|g| g.args != f.args || g.gives != f.gives) {
                    return err(
                        format!("`{name}` is called, but its choices do not take the same arguments"),
                        span.clone(),
                    );
                }
                found = Some(f);
            }
            return found.map(|f| (f, 1 << i)).map_or_else(|| err("a choice without choices", span.clone()), Ok);
        }
        let callable = FUNCTIONS.iter().map(|f| f.name).chain(self.params.iter().filter_map(|p| match &p.kind {
            ParamKind::Choice(_) => Some(p.name.as_str()),
            _ => None,
        }));
        err(format!("unknown function '{name}'{}", did_you_mean(name, callable)), span.clone())
    }

    fn check(&self, node: &Node) -> Result<Ty, ExprError> {
        let span = node.span.clone();
        let number = |t: Ty, what: &str| {
            if t.kind == Kind::Number {
                Ok(t)
            } else {
                err(format!("{what} needs a number; this is a condition"), span.clone())
            }
        };
        Ok(match &node.kind {
            NodeKind::Number(_) => Ty { kind: Kind::Number, per_bar: false, deps: 0 },
            NodeKind::Name(name) => self.check_name(name, span)?,
            NodeKind::Neg(a) => number(self.check(a)?, "`-`")?,
            NodeKind::Not(a) => {
                let t = self.check(a)?;
                if t.kind != Kind::Cond {
                    return err("`not` needs a condition; this is a number", a.span.clone());
                }
                t
            }
            NodeKind::Binary(op, a, b) => {
                let (x, y) = (self.check(a)?, self.check(b)?);
                let (want, gives) = if op.is_logic() {
                    (Kind::Cond, Kind::Cond)
                } else if op.is_comparison() {
                    (Kind::Number, Kind::Cond)
                } else {
                    (Kind::Number, Kind::Number)
                };
                for (t, side) in [(x, a), (y, b)] {
                    if t.kind != want {
                        return err(
                            format!("`{}` needs {} on each side; this is {}", op.symbol(), want.word(), t.kind.word()),
                            side.span.clone(),
                        );
                    }
                }
                Ty { kind: gives, per_bar: x.per_bar || y.per_bar, deps: x.deps | y.deps }
            }
            NodeKind::Ago(x, k) => self.check_ago(x, k)?,
            NodeKind::Call { name, name_span, args } => self.check_call(name, name_span, args, span)?,
        })
    }

    /// A name's type: a parameter (a choice must be called), a named value, or an error
    /// naming what it could have been.
    fn check_name(&self, name: &str, span: Range<usize>) -> Result<Ty, ExprError> {
        Ok(if let Some(i) = self.param(name) {
            if let ParamKind::Choice(choices) = &self.params[i].kind {
                return err(
                    format!(
                        "`{name}` is a choice ({}): call it like one of them, e.g. `{name}(...)`",
                        choices.join(", ")
                    ),
                    span,
                );
            }
            Ty { kind: Kind::Number, per_bar: false, deps: 1 << i }
        } else if named_value(name).is_some() {
            Ty { kind: Kind::Number, per_bar: name != "nan", deps: 0 }
        } else if function(name).is_some() {
            return err(format!("`{name}` is a function: call it, e.g. `{name}(...)`"), span);
        } else {
            let mut known: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            for name in value_names() {
                known.push(name);
            }
            return err(
                format!(
                    "unknown name '{name}'{} (parameters and open, high, low, close, volume)",
                    did_you_mean(name, known)
                ),
                span,
            );
        })
    }

    /// `series[bars]`'s type: bars from numbers and parameters, never ahead, whole, and
    /// within [`MAX_LOOKBACK`] when they are constant.
    fn check_ago(&self, x: &Node, k: &Node) -> Result<Ty, ExprError> {
        let (t, bars) = (self.check(x)?, self.check(k)?);
        if bars.kind != Kind::Number || bars.per_bar {
            return err("bars ago must come from numbers and parameters", k.span.clone());
        }
        if bars.deps == 0 {
            let v = match self.constant(k) {
                Bound::Const(v) => v,
                _ => unreachable!("no parameters, no series: a constant"),
            };
            let series = &self.text[x.span.clone()];
            if v < 0.0 {
                return err(
                    format!(
                        "`{series}[{}]` looks {} bar(s) into the future: rules may only look back (lookahead refused)",
                        &self.text[k.span.clone()],
                        -v
                    ),
                    k.span.clone(),
                );
            }
            if v.fract() != 0.0 {
                return err(format!("bars ago must be a whole number, not {v}"), k.span.clone());
            }
            if v > MAX_LOOKBACK {
                return err(format!("looks back {v} bars, more than the {MAX_LOOKBACK:e} a rule may"), k.span.clone());
            }
        }
        Ok(Ty { deps: t.deps | bars.deps, ..t })
    }

    /// A call's type: its arguments as many and of the kinds its function takes.
    fn check_call(
        &self,
        name: &str,
        name_span: &Range<usize>,
        args: &[Node],
        span: Range<usize>,
    ) -> Result<Ty, ExprError> {
        let (f, mut deps) = self.callee(name, name_span)?;
        let optional = usize::from(f.args.first() == Some(&Arg::Close));
        if args.len() + optional < f.args.len() || args.len() > f.args.len() {
            return err(format!("{} takes {}; {} argument(s) given", f.name, f.usage, args.len()), span);
        }
        let wanted = &f.args[f.args.len() - args.len()..];
        let mut per_bar = false;
        for (arg, want) in args.iter().zip(wanted) {
            let t = self.check(arg)?;
            let fits = match want {
                Arg::Close => matches!(&arg.kind, NodeKind::Name(n) if n == "close"),
                Arg::Period | Arg::Scalar => t.kind == Kind::Number && !t.per_bar,
                Arg::Value => t.kind == Kind::Number,
                Arg::Cond => t.kind == Kind::Cond,
            };
            if !fits {
                let problem = match want {
                    Arg::Close => format!("{} reads the close: write {}", f.name, f.usage),
                    Arg::Period => {
                        format!("a period of {} must be a whole number from numbers and parameters", f.name)
                    }
                    Arg::Scalar => format!("this argument of {} must come from numbers and parameters", f.name),
                    Arg::Value => format!("{} needs a number here; this is a condition", f.name),
                    Arg::Cond => format!("{} needs a condition here; this is a number", f.name),
                };
                return err(problem, arg.span.clone());
            }
            per_bar |= t.per_bar;
            deps |= t.deps;
        }
        Ok(match f.gives {
            Gives::Series => Ty { kind: Kind::Number, per_bar: true, deps },
            Gives::Number => Ty { kind: Kind::Number, per_bar, deps },
            Gives::Cond => Ty { kind: Kind::Cond, per_bar, deps },
        })
    }

    /// A parameter-free expression's value.
    fn constant(&self, node: &Node) -> Bound {
        bind(node, &[], self.params, self.text).unwrap_or(Bound::Const(f64::NAN))
    }
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

/// The position of parameter `name` in `params`.
fn param_index(params: &[ParamSpec], name: &str) -> Option<usize> {
    params.iter().position(|p| p.name == name)
}

/// The parameters anywhere in `node`.
fn params_in(node: &Node, params: &[ParamSpec]) -> u64 {
    let sub = |n: &Node| params_in(n, params);
    match &node.kind {
        NodeKind::Number(_) => 0,
        NodeKind::Name(name) => param_index(params, name).map_or(0, |i| 1 << i),
        NodeKind::Neg(a) | NodeKind::Not(a) => sub(a),
        NodeKind::Binary(_, a, b) | NodeKind::Ago(a, b) => sub(a) | sub(b),
        NodeKind::Call { name, args, .. } => {
            let callee = param_index(params, name).map_or(0, |i| 1 << i);
            args.iter().fold(callee, |m, a| m | sub(a))
        }
    }
}

/// The parameters that decide which series `node` reads (see [`Rule::shape`]).
fn shape_deps(node: &Node, params: &[ParamSpec]) -> u64 {
    let sub = |n: &Node| shape_deps(n, params);
    match &node.kind {
        NodeKind::Number(_) | NodeKind::Name(_) => 0,
        NodeKind::Neg(a) | NodeKind::Not(a) => sub(a),
        NodeKind::Binary(_, a, b) => sub(a) | sub(b),
        NodeKind::Ago(x, k) => sub(x) | params_in(k, params),
        NodeKind::Call { name, args, .. } => {
            let (callee, f) = match param_index(params, name) {
                Some(i) => {
                    let first = match &params[i].kind {
                        ParamKind::Choice(choices) => choices.first().and_then(|c| function(c)),
                        _ => None,
                    };
                    (1 << i, first)
                }
                None => (0, function(name)),
            };
            let Some(f) = f else { return callee };
            let wanted = &f.args[f.args.len().saturating_sub(args.len())..];
            args.iter().zip(wanted).fold(callee, |m, (arg, want)| {
                let decides = matches!(want, Arg::Period) || (f.name == "if" && matches!(want, Arg::Cond));
                m | sub(arg) | if decides { params_in(arg, params) } else { 0 }
            })
        }
    }
}

fn bind(node: &Node, values: &[f64], params: &[ParamSpec], text: &str) -> Result<Bound, ExprError> {
    let sub = |n: &Node| bind(n, values, params, text);
    let param = |name: &str| param_index(params, name);
    Ok(match &node.kind {
        NodeKind::Number(v) => Bound::Const(*v),
        NodeKind::Name(name) => match param(name) {
            Some(i) => Bound::Const(values.get(i).copied().unwrap_or(f64::NAN)),
            None => match named_value(name) {
                Some(v) => v,
                None => return err(format!("unknown name `{name}`"), node.span.clone()),
            },
        },
        NodeKind::Neg(a) => Bound::neg(sub(a)?),
        NodeKind::Not(a) => Bound::not(sub(a)?),
        NodeKind::Binary(op, a, b) => Bound::binary(*op, sub(a)?, sub(b)?),
        NodeKind::Ago(x, k) => {
            let Bound::Const(bars) = sub(k)? else {
                return err("bars ago must come from parameters", k.span.clone());
            };
            let problem = if !(bars >= 0.0 && bars.fract() == 0.0) {
                Some("does not look back a whole number of bars (lookahead refused)".to_owned())
            } else if bars > MAX_LOOKBACK {
                Some(format!("looks back more than the {MAX_LOOKBACK:e} bars a rule may"))
            } else {
                None
            };
            if let Some(problem) = problem {
                let (whole, ago) = (&text[node.span.clone()], &text[k.span.clone()]);
                return err(format!("`{whole}` with {ago}={bars} {problem}"), k.span.clone());
            }
            sub(x)?.ago(bars as usize)
        }
        NodeKind::Call { name, name_span, args } => {
            let f = match param(name) {
                Some(i) => {
                    let chosen = params[i].format(values.get(i).copied().unwrap_or(f64::NAN));
                    match function(&chosen) {
                        Some(f) => f,
                        None => return err(format!("{name}={chosen} is not a function"), name_span.clone()),
                    }
                }
                None => match function(name) {
                    Some(f) => f,
                    None => return err(format!("unknown function `{name}`"), name_span.clone()),
                },
            };
            let skipped = f.args.len() - args.len();
            let mut bound: Vec<ArgValue> = (0..skipped).map(|_| ArgValue::Period(0)).collect();
            for (arg, want) in args.iter().zip(&f.args[skipped..]) {
                bound.push(match want {
                    Arg::Close => ArgValue::Period(0),
                    Arg::Period => match sub(arg)? {
                        Bound::Const(p) if p >= 1.0 && p.fract() == 0.0 && p <= MAX_LOOKBACK => {
                            ArgValue::Period(p as usize)
                        }
                        Bound::Const(p) => {
                            return err(
                                format!(
                                    "{}: period `{}` = {p} is not a whole number from 1 to {MAX_LOOKBACK:e}",
                                    f.name,
                                    &text[arg.span.clone()]
                                ),
                                arg.span.clone(),
                            );
                        }
                        _ => return err(format!("{}: a period must come from parameters", f.name), arg.span.clone()),
                    },
                    Arg::Scalar | Arg::Value | Arg::Cond => ArgValue::Value(sub(arg)?),
                });
            }
            (f.build)(bound)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (RuleKind::Entry, "sma() > 1", "sma takes sma([close,] n); 0 argument(s) given", "sma()"),
            (
                RuleKind::Entry,
                "sma(close) > 1",
                "a period of sma must be a whole number from numbers and parameters",
                "close",
            ),
            (RuleKind::Entry, "sma(high, n) > 1", "sma reads the close: write sma([close,] n)", "high"),
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
