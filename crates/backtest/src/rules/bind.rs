//! A rule's tree bound to parameter values ([`bind`]), and the parameters it reads.

use super::bound::Bound;
use super::functions::{Arg, ArgValue, close, function, named_value};
use super::parse::{ExprError, Node, NodeKind, error as err};
use crate::param::{ParamKind, ParamSpec};

/// The longest look back and the longest period a rule may ask for, in bars: warm-ups
/// (sums of a few of them) then stay well inside the 32-bit bar numbers of books and
/// kernels, so every command reports the same warm-up.
pub(super) const MAX_LOOKBACK: f64 = 1e9;

/// The position of parameter `name` in `params`.
pub(super) fn param_index(params: &[ParamSpec], name: &str) -> Option<usize> {
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
pub(super) fn shape_deps(node: &Node, params: &[ParamSpec]) -> u64 {
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

/// `node` with parameter `values` in place, or why they do not fit it.
pub(super) fn bind(node: &Node, values: &[f64], params: &[ParamSpec], text: &str) -> Result<Bound, ExprError> {
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
            // A left-out leading series is the close.
            let mut bound: Vec<ArgValue> = (0..skipped).map(|_| ArgValue::Value(close())).collect();
            for (arg, want) in args.iter().zip(&f.args[skipped..]) {
                bound.push(match want {
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
                    Arg::Source | Arg::Scalar | Arg::Value | Arg::Cond => ArgValue::Value(sub(arg)?),
                });
            }
            (f.build)(bound)
        }
    })
}
