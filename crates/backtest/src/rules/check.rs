//! A rule's tree checked against the strategy's parameters: each name known (or the
//! nearest one suggested), each argument of the kind its function takes, no look into
//! the future, and the parameters the rule reads.

use super::bind::{MAX_LOOKBACK, bind, param_index};
use super::bound::Bound;
use super::functions::{Arg, FUNCTIONS, Function, Gives, function, named_value, value_names};
use super::parse::{ExprError, Node, NodeKind, error as err};
use crate::param::{ParamKind, ParamSpec};
use std::ops::Range;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Number,
    Cond,
}

impl Kind {
    pub(super) fn word(self) -> &'static str {
        match self {
            Kind::Number => "a number",
            Kind::Cond => "a condition",
        }
    }
}

/// What an expression gives: its kind, whether it varies per bar, which parameters it reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ty {
    pub kind: Kind,
    pub per_bar: bool,
    pub deps: u64,
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
/// Other tools' names for functions ThreadX has (TradingView's `ta.crossover`, pandas-ta's
/// and backtrader's), a newcomer's first guess, which no spelling distance finds.
const OTHER_TOOLS: [(&str, &str); 3] = [
    ("crossover", "crosses_above"),
    ("crossunder", "crosses_below"),
    ("bbands", "bbands_lower, bbands_middle and bbands_upper"),
];

/// The checker of one rule's text against the strategy's parameters.
pub(super) struct Checker<'a> {
    pub params: &'a [ParamSpec],
    pub text: &'a str,
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
        let hint = match OTHER_TOOLS.iter().find(|(other, _)| other.eq_ignore_ascii_case(name)) {
            Some((_, ours)) => format!(" (ThreadX calls it '{ours}')"),
            None => match nearest(name, callable) {
                Some(k) => format!(" (did you mean '{k}'?)"),
                None => " (`threadx strategy show NAME` lists the functions)".to_owned(),
            },
        };
        err(format!("unknown function '{name}'{hint}"), span.clone())
    }

    /// The type of `node`, or the first problem in it.
    pub(super) fn check(&self, node: &Node) -> Result<Ty, ExprError> {
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
        let optional = usize::from(f.args.first() == Some(&Arg::Source));
        if args.len() + optional < f.args.len() || args.len() > f.args.len() {
            return err(format!("{} takes {}; {} argument(s) given", f.name, f.usage, args.len()), span);
        }
        let wanted = &f.args[f.args.len() - args.len()..];
        let mut per_bar = false;
        for (arg, want) in args.iter().zip(wanted) {
            let t = self.check(arg)?;
            let fits = match want {
                Arg::Period | Arg::Scalar => t.kind == Kind::Number && !t.per_bar,
                Arg::Source | Arg::Value => t.kind == Kind::Number,
                Arg::Cond => t.kind == Kind::Cond,
            };
            if !fits {
                let problem = match want {
                    Arg::Source => format!(
                        "{} reads a series of numbers here (the close when left out); this is a condition",
                        f.name
                    ),
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
