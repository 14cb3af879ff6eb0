//! A strategy's rule file (TOML) read and checked: name, parameters, rules. Every
//! mistake is reported at its line and column with a caret under it.

use super::check::did_you_mean;
use super::functions::{FUNCTIONS, value_names};
use super::program::{Rule, RuleKind};
use crate::costs::{Costs, Fill, Fills};
use crate::error::BacktestError;
use crate::param::{Axis, MAX_PARAMS, ParamKind, ParamSpec};
use crate::portfolio::{Account, SizeType, SizingRequest};
use indexmap::IndexMap;
use serde::Deserialize;
use std::ops::Range;
use toml::Spanned;

/// A rule's text: a string, or a bare number (`max_bars = 20`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RuleText {
    Text(String),
    Number(f64),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesDef {
    entry: Option<Spanned<RuleText>>,
    exit: Option<Spanned<RuleText>>,
    stop: Option<Spanned<RuleText>>,
    take_profit: Option<Spanned<RuleText>>,
    max_bars: Option<Spanned<RuleText>>,
    short_entry: Option<Spanned<RuleText>>,
    short_exit: Option<Spanned<RuleText>>,
    short_stop: Option<Spanned<RuleText>>,
    short_take_profit: Option<Spanned<RuleText>>,
    trail: Option<Spanned<RuleText>>,
    require: Option<Spanned<RuleText>>,
    rank: Option<Spanned<RuleText>>,
    fill: Option<Spanned<String>>,
    intrabar: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamDef {
    kind: Spanned<String>,
    default: Option<Spanned<toml::Value>>,
    min: Option<f64>,
    max: Option<f64>,
    #[serde(default)]
    min_exclusive: bool,
    choices: Option<Vec<String>>,
    #[serde(default)]
    help: String,
    grid: Option<Spanned<toml::Value>>,
}

/// `[sizing]`: how an account sizes each entry (docs/portfolios.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SizingDef {
    size: Option<Spanned<RuleText>>,
    size_type: Option<Spanned<String>>,
    lot: Option<Spanned<f64>>,
    min_size: Option<Spanned<f64>>,
    init_cash: Option<Spanned<f64>>,
    max_positions: Option<Spanned<i64>>,
    leverage: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    params: IndexMap<Spanned<String>, Spanned<ParamDef>>,
    rules: RulesDef,
    sizing: Option<Spanned<SizingDef>>,
}

/// A checked strategy file.
#[derive(Debug)]
pub(crate) struct StrategyFile {
    pub name: String,
    pub description: String,
    pub params: Vec<ParamSpec>,
    pub rules: Vec<Rule>,
    pub fills: Fills,
    pub sizing: SizingRequest,
    pub source: String,
    pub origin: String,
    pub builtin: bool,
}

/// `origin:line:column: message`, the line, and carets under `span`. A long line is shown
/// as a window of about 80 characters around the span, with `…` where it is cut.
pub(crate) fn render(origin: &str, source: &str, span: Range<usize>, message: &str) -> String {
    const WINDOW: usize = 80;
    let start = span.start.min(source.len());
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
    let line_no = source[..start].matches('\n').count() + 1;
    let column = source[line_start..start].chars().count() + 1;
    let width = source[start..span.end.clamp(start, line_end)].chars().count().max(1);
    let gutter = " ".repeat(line_no.to_string().len());
    let line: Vec<char> = source[line_start..line_end].trim_end_matches('\r').chars().collect();
    // The window: from a little before the span, WINDOW characters.
    let at = (column - 1).min(line.len());
    let from = at.saturating_sub(WINDOW / 4).min(line.len().saturating_sub(WINDOW));
    let to = (from + WINDOW).min(line.len());
    let cut_before = if from > 0 { "…" } else { "" };
    let cut_after = if to < line.len() { "…" } else { "" };
    let shown: String = line[from..to].iter().collect();
    let lead: String =
        cut_before.chars().chain(line[from..at].iter().copied()).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
    let carets = width.min(to.saturating_sub(at).max(1));
    format!(
        "{origin}:{line_no}:{column}: {message}\n{gutter} |\n{line_no} | {cut_before}{shown}{cut_after}\n{gutter} | {lead}{}",
        "^".repeat(carets)
    )
}

/// Where the text of a string value starts in the file, from the value's span (quotes
/// and the newline that opens a multi-line string skipped).
fn text_start(source: &str, span: &Range<usize>) -> usize {
    let value = &source[span.start..span.end];
    let quote = if value.starts_with("\"\"\"") || value.starts_with("'''") {
        3 + value[3..].chars().take_while(|&c| c == '\r' || c == '\n').count().min(2)
    } else {
        usize::from(value.starts_with('"') || value.starts_with('\''))
    };
    span.start + quote
}

/// Why a choice parameter's names cannot be used, if they cannot: each name is a value
/// of the results' CSV, of `--set` and of `--grid` lists (which split on `,` and read `:`
/// as a range), and is matched ignoring ASCII case.
fn choices_problem(choices: &[String]) -> Option<String> {
    for (i, choice) in choices.iter().enumerate() {
        let quoted = format!("{choice:?}");
        let problem = if choice.is_empty() {
            "an empty name"
        } else if choice.trim() != choice {
            "space at its start or end"
        } else if choice.chars().any(|c| c.is_control()) {
            "a control character"
        } else if let Some(c) = choice.chars().find(|c| matches!(c, ',' | ':' | '"')) {
            return Some(format!(
                "choice {quoted} holds `{c}`, which lists and ranges of values use (`--grid m=a,b`); name it without"
            ));
        } else if let Some(earlier) = choices[..i].iter().find(|e| e.eq_ignore_ascii_case(choice)) {
            return Some(format!("choices {earlier:?} and {quoted} are one name (names are matched ignoring case)"));
        } else {
            continue;
        };
        return Some(format!("choice {quoted} has {problem}: a choice is a name a user types"));
    }
    None
}

fn is_identifier(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl StrategyFile {
    /// Reads and checks a rule file's text; `origin` names it in errors.
    pub(crate) fn parse(source: &str, origin: &str, builtin: bool) -> Result<Self, BacktestError> {
        let at = |span: Range<usize>, message: &str| BacktestError::Definition(render(origin, source, span, message));
        let file: FileDef = toml::from_str(source).map_err(|e| {
            let message = e.message().trim_end().to_owned();
            match e.span() {
                Some(span) => at(span, &message),
                None => BacktestError::Definition(format!("{origin}: {message}")),
            }
        })?;
        let name = file.name.get_ref().trim().to_owned();
        if !is_identifier(&name) || name == "signals" {
            return Err(at(
                file.name.span(),
                "the name must be lowercase letters, digits and `_` (e.g. `donchian_breakout`), and not `signals`",
            ));
        }
        if file.params.len() > MAX_PARAMS {
            return Err(BacktestError::Definition(format!(
                "{origin}: {} parameters; a strategy has at most {MAX_PARAMS}",
                file.params.len()
            )));
        }
        let mut params = Vec::new();
        for (key, def) in &file.params {
            params.push(param(key, def, &at)?);
        }

        let rules = &file.rules;
        let fills = fills(rules, &at)?;
        let sizing =
            file.sizing.as_ref().map(|table| sizing(table.get_ref(), &params, &at)).transpose()?.unwrap_or_default();
        let rules_at = |message: &str| {
            // `[rules]` itself: the table's header line.
            let header = source.find("[rules]").unwrap_or(0);
            at(header..header + "[rules]".len(), message)
        };
        if rules.entry.is_none() && rules.short_entry.is_none() {
            return Err(rules_at("a strategy needs `entry` (longs), `short_entry` (shorts) or both"));
        }
        for (side, entry, dependents) in [
            (
                "entry",
                &rules.entry,
                [("exit", &rules.exit), ("stop", &rules.stop), ("take_profit", &rules.take_profit)],
            ),
            (
                "short_entry",
                &rules.short_entry,
                [
                    ("short_exit", &rules.short_exit),
                    ("short_stop", &rules.short_stop),
                    ("short_take_profit", &rules.short_take_profit),
                ],
            ),
        ] {
            if entry.is_some() {
                continue;
            }
            if let Some((name, rule)) = dependents.iter().find_map(|(name, r)| r.as_ref().map(|r| (name, r))) {
                return Err(at(
                    rule.span(),
                    &format!("`{name}` applies to positions `{side}` opens, and there is no `{side}`"),
                ));
            }
        }
        let compiled = compile_rules(rules, &params, source, &at)?;
        Ok(Self {
            name,
            description: file.description.trim().to_owned(),
            params,
            rules: compiled,
            fills,
            sizing,
            source: source.to_owned(),
            origin: origin.to_owned(),
            builtin,
        })
    }
}

/// Every rule of `[rules]` compiled against `params`, a mistake shown at its text in
/// `source`.
fn compile_rules(
    rules: &RulesDef,
    params: &[ParamSpec],
    source: &str,
    at: &dyn Fn(Range<usize>, &str) -> BacktestError,
) -> Result<Vec<Rule>, BacktestError> {
    let mut compiled = Vec::new();
    for (kind, value) in [
        (RuleKind::Entry, rules.entry.as_ref()),
        (RuleKind::Exit, rules.exit.as_ref()),
        (RuleKind::Stop, rules.stop.as_ref()),
        (RuleKind::TakeProfit, rules.take_profit.as_ref()),
        (RuleKind::MaxBars, rules.max_bars.as_ref()),
        (RuleKind::ShortEntry, rules.short_entry.as_ref()),
        (RuleKind::ShortExit, rules.short_exit.as_ref()),
        (RuleKind::ShortStop, rules.short_stop.as_ref()),
        (RuleKind::ShortTakeProfit, rules.short_take_profit.as_ref()),
        (RuleKind::Trail, rules.trail.as_ref()),
        (RuleKind::Require, rules.require.as_ref()),
        (RuleKind::Rank, rules.rank.as_ref()),
    ] {
        let Some(value) = value else { continue };
        let (text, start) = match value.get_ref() {
            RuleText::Text(text) => (text.clone(), text_start(source, &value.span())),
            RuleText::Number(v) => (format!("{v}"), value.span().start),
        };
        let mut rule = Rule::compile(kind, &text, params).map_err(|e| {
            at(start + e.span.start..start + e.span.end, &format!("rule `{}`: {}", kind.name(), e.message))
        })?;
        rule.start = start;
        compiled.push(rule);
    }
    Ok(compiled)
}

/// `fill` and `intrabar` of `[rules]`.
fn fills(rules: &RulesDef, at: &dyn Fn(Range<usize>, &str) -> BacktestError) -> Result<Fills, BacktestError> {
    let fill = match &rules.fill {
        None => Fill::Close,
        Some(text) => match text.get_ref().trim() {
            "close" => Fill::Close,
            "next_open" => Fill::NextOpen,
            other => {
                let hint = did_you_mean(other, ["close", "next_open"]);
                return Err(at(
                    text.span(),
                    &format!(
                        "`fill` is \"close\" (at the bar's close) or \"next_open\" (at the next bar's open), not `{other}`{hint}"
                    ),
                ));
            }
        },
    };
    Ok(Fills { fill, intrabar: rules.intrabar.unwrap_or(false) })
}

/// `[sizing]` checked: a known `size_type`, and values an account can take, a problem
/// shown at its value.
fn sizing(
    table: &SizingDef,
    params: &[ParamSpec],
    at: &dyn Fn(Range<usize>, &str) -> BacktestError,
) -> Result<SizingRequest, BacktestError> {
    let size_type = match &table.size_type {
        Some(kind) => Some(SizeType::parse(kind.get_ref()).map_err(|_| {
            let hint = did_you_mean(kind.get_ref(), SizeType::NAMES);
            at(kind.span(), &format!("[sizing] `size_type` is one of {}{hint}", SizeType::NAMES.join(", ")))
        })?),
        None => None,
    };
    let max_positions = match &table.max_positions {
        Some(n) if *n.get_ref() < 1 => {
            return Err(at(n.span(), "[sizing] `max_positions` is at least 1 (leave it out for no limit)"));
        }
        Some(n) => Some(usize::try_from(*n.get_ref()).unwrap_or(usize::MAX)),
        None => None,
    };
    let value = |v: &Option<Spanned<f64>>| v.as_ref().map(|v| *v.get_ref());
    let (size, size_param) = match table.size.as_ref().map(|s| (s.get_ref(), s.span())) {
        None => (None, None),
        Some((RuleText::Number(v), _)) => (Some(*v), None),
        Some((RuleText::Text(name), span)) => match params.iter().position(|p| p.name == name.trim()) {
            Some(p) if params[p].kind == ParamKind::Float => (None, Some(p)),
            Some(_) => return Err(at(span, &format!("[sizing] `size`: parameter `{name}` must be of kind \"float\""))),
            None => {
                let hint = did_you_mean(name, params.iter().map(|p| p.name.as_str()));
                return Err(at(
                    span,
                    &format!("[sizing] `size` is a number or a float parameter's name, not `{name}`{hint}"),
                ));
            }
        },
    };
    let request = SizingRequest {
        size,
        size_param,
        size_type,
        lot: value(&table.lot),
        min_size: value(&table.min_size),
        init_cash: value(&table.init_cash),
        max_positions,
        leverage: value(&table.leverage),
    };
    match Account::requested(&request, Costs::default()) {
        Err(BacktestError::BadValue { param, problem, .. }) => {
            let span_of = |v: &Option<Spanned<f64>>| v.as_ref().map_or(0..0, Spanned::span);
            let span = match param.as_str() {
                "size" => table.size.as_ref().map_or(0..0, Spanned::span),
                "lot" => span_of(&table.lot),
                "min_size" => span_of(&table.min_size),
                "leverage" => span_of(&table.leverage),
                _ => span_of(&table.init_cash),
            };
            Err(at(span, &format!("[sizing] `{param}`: {problem}")))
        }
        Err(e) => Err(e),
        Ok(_) => Ok(request),
    }
}

/// One `[params]` entry checked: a name that shadows nothing, a known kind, a default in
/// range, and default sweep values that parse.
fn param(
    key: &Spanned<String>,
    def: &Spanned<ParamDef>,
    at: &dyn Fn(Range<usize>, &str) -> BacktestError,
) -> Result<ParamSpec, BacktestError> {
    let name = key.get_ref().as_str();
    if !is_identifier(name) {
        return Err(at(key.span(), "a parameter name must be lowercase letters, digits and `_`"));
    }
    if FUNCTIONS.iter().any(|f| f.name == name)
        || value_names().any(|v| v == name)
        || name == "and"
        || name == "or"
        || name == "not"
    {
        return Err(at(
            key.span(),
            &format!("`{name}` is a function or a series of the rule language: pick another name"),
        ));
    }
    let d = def.get_ref();
    let kind = match d.kind.get_ref().as_str() {
        "int" => ParamKind::Int,
        "float" => ParamKind::Float,
        "choice" => match &d.choices {
            Some(choices) if !choices.is_empty() => {
                if let Some(problem) = choices_problem(choices) {
                    return Err(at(def.span(), &format!("parameter `{name}`: {problem}")));
                }
                ParamKind::Choice(choices.clone())
            }
            _ => return Err(at(def.span(), &format!("parameter `{name}`: a choice needs `choices = [\"a\", \"b\"]`"))),
        },
        other => {
            let hint = did_you_mean(other, ["int", "float", "choice"]);
            return Err(at(
                d.kind.span(),
                &format!("parameter `{name}`: unknown kind `{other}`{hint} (int, float or choice)"),
            ));
        }
    };
    if d.choices.is_some() && !matches!(kind, ParamKind::Choice(_)) {
        return Err(at(def.span(), &format!("parameter `{name}`: `choices` is for kind = \"choice\"")));
    }
    let Some(default) = &d.default else {
        return Err(at(def.span(), &format!("parameter `{name}` needs a `default`")));
    };
    let (min, max) = match &kind {
        ParamKind::Choice(choices) => (0.0, (choices.len() - 1) as f64),
        _ => (d.min.unwrap_or(f64::MIN), d.max.unwrap_or(f64::MAX)),
    };
    if min > max {
        return Err(at(def.span(), &format!("parameter `{name}`: min {min} is above max {max}")));
    }
    let mut spec = ParamSpec::new(name, kind, 0.0, min, max);
    spec.min_exclusive = d.min_exclusive;
    spec.help = d.help.trim().to_owned();
    let text = match default.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        _ => return Err(at(default.span(), &format!("parameter `{name}`: the default must be a number or a name"))),
    };
    spec.default = spec.parse(&text).map_err(|e| at(default.span(), &format!("parameter `{name}`: default {e}")))?;
    if let Some(grid) = &d.grid {
        let axis: Axis = grid.get_ref().clone().try_into().map_err(|_| {
            at(grid.span(), &format!("parameter `{name}`: grid is `start:stop:step` or a list of values"))
        })?;
        spec.axis(&axis).map_err(|e| at(grid.span(), &format!("parameter `{name}`: grid {e}")))?;
        spec.grid = Some(axis);
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(source: &str) -> String {
        StrategyFile::parse(source, "my.toml", false).unwrap_err().to_string()
    }

    #[test]
    fn an_unknown_function_is_shown_at_its_line_and_column() {
        let source = "name = \"donchian\"\n[params]\nn = { kind = \"int\", default = 20, min = 2, max = 1000 }\nm = { kind = \"float\", default = 2.0 }\n[rules]\nentry = \"close > highest(high, n)[1]\"\nstop  = \"close - m * atrr(14)\"\n";
        assert_eq!(
            error(source),
            "my.toml:7:22: rule `stop`: unknown function 'atrr' (did you mean 'atr'?)\n  |\n7 | stop  = \"close - m * atrr(14)\"\n  |                      ^^^^"
        );
    }

    #[test]
    fn file_mistakes_name_the_place() {
        let base = "name = \"x\"\n[params]\nn = { kind = \"int\", default = 20, min = 2, max = 100 }\n[rules]\nentry = \"close > sma(n)\"\n";
        let cases = [
            (
                base.replace("\"int\"", "\"integer\""),
                "3:14: parameter `n`: unknown kind `integer` (did you mean 'int'?) (int, float or choice)",
            ),
            (
                base.replace("default = 20", "default = 200"),
                "3:31: parameter `n`: default n=200: out of range: must be ≥ 2 and ≤ 100",
            ),
            (base.replace("name = \"x\"", "name = \"My Strategy\""), "1:8: the name must be lowercase"),
            (base.replace("n = {", "close = {"), "3:1: `close` is a function or a series of the rule language"),
            (base.replace("entry", "entree"), "5:1: unknown field `entree`, expected one of `entry`"),
            (base.replace("sma(n)", "sma(n)[-2]"), "5:25: rule `entry`: `sma(n)[-2]` looks 2 bar(s) into the future"),
            (base.replace("max = 100 }", "max = 100, grid = \"1:5:1\" }"), "parameter `n`: grid n=1: out of range"),
            (base.replace("[rules]\nentry = \"close > sma(n)\"\n", ""), "missing field `rules`"),
        ];
        for (source, expected) in cases {
            let got = error(&source);
            assert!(got.contains(expected), "{got}\nshould contain: {expected}");
        }
    }

    #[test]
    fn choice_names_that_lists_files_or_case_would_change_are_refused() {
        let file = |choices: &str| {
            format!(
                "name = \"x\"\n[params]\nm = {{ kind = \"choice\", choices = {choices}, default = \"z\" }}\n\
                 [rules]\nentry = \"close > sma(20)\"\n"
            )
        };
        let cases = [
            (r#"["a,b", "z"]"#, r#"choice "a,b" holds `,`"#),
            (r#"["a:b", "z"]"#, r#"choice "a:b" holds `:`"#),
            (r#"["say \"hi\"", "z"]"#, r#"holds `"`"#),
            (r#"["a\nb", "z"]"#, r#"choice "a\nb" has a control character"#),
            (r#"[" a", "z"]"#, r#"choice " a" has space at its start or end"#),
            (r#"["", "z"]"#, r#"choice "" has an empty name"#),
            (r#"["Z", "z"]"#, r#"choices "Z" and "z" are one name"#),
        ];
        for (choices, expected) in cases {
            let got = error(&file(choices));
            assert!(
                got.contains("3:5: parameter `m`: ") && got.contains(expected),
                "{got}\nshould contain: {expected}"
            );
        }
        let hostile = "<img src=x onerror=document.title='PWNED'>";
        let parsed = StrategyFile::parse(&file(&format!("[\"{hostile}\", \"S&P\", \"z\"]")), "x.toml", false).unwrap();
        assert_eq!(
            parsed.params[0].parse(hostile).unwrap(),
            0.0,
            "markup is a name like any other: escaped where written"
        );
    }

    #[test]
    fn rule_text_positions_follow_the_quotes() {
        let source = "name = \"x\"\n[rules]\nentry = '''\nclose > smaa(3)'''\n";
        assert!(
            error(source).starts_with("my.toml:4:9: rule `entry`: unknown function 'smaa' (did you mean 'sma'?)"),
            "{}",
            error(source)
        );
    }
}
