//! A strategy's parameters: [`ParamSpec`] (name, kind, default, range), the values of one
//! sweep axis ([`Axis`]: a list, an inclusive range, or text as a user types it) and
//! [`ParamValues`], one parameter set held inline. Values are checked here, once, when an
//! axis is resolved.

use crate::error::BacktestError;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

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
    pub grid: Option<Axis>,
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

    /// A value as every JSON writes it ([`ParamCell`]).
    pub fn to_json(&self, value: f64) -> serde_json::Value {
        serde_json::to_value(self.cell(value)).unwrap_or(serde_json::Value::Null)
    }

    /// A value typed as this parameter is: whole-number parameters as integers, floats as
    /// floats, choices by name.
    pub fn cell(&self, value: f64) -> ParamCell {
        match self.kind {
            ParamKind::Choice(_) => ParamCell::Choice(self.format(value)),
            ParamKind::Int => ParamCell::Int(value as i64),
            ParamKind::Float => ParamCell::Float(value),
        }
    }

    /// A value as the user writes it (`20`, `2.5`, `ema`).
    pub fn format(&self, value: f64) -> String {
        match &self.kind {
            ParamKind::Choice(names) if value >= 0.0 && (value as usize) < names.len() => names[value as usize].clone(),
            _ => format!("{value}"),
        }
    }

    /// The values of one axis, each checked against the schema; no value may repeat.
    /// Errors name the parameter and the axis as given (`bb_period=10:50:0: …`).
    pub fn axis(&self, axis: &Axis) -> Result<Vec<f64>, BacktestError> {
        let bad = |problem: String| BacktestError::Axis(format!("{}={axis}: {problem}", self.name));
        let values = match axis {
            Axis::Text(text) => self.text_axis(text.trim(), &bad)?,
            Axis::Range { start, stop, step } => self.range_axis(*start, *stop, *step, &bad)?,
            Axis::List(items) => items
                .iter()
                .map(|item| match item {
                    AxisValue::Name(name) => self.parse(name),
                    AxisValue::Number(_) if matches!(self.kind, ParamKind::Choice(_)) => {
                        Err(bad(format!("expected names ({})", self.range())))
                    }
                    AxisValue::Number(x) => self.check(*x).map(|()| *x),
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        if values.is_empty() {
            return Err(BacktestError::EmptyAxis { param: self.name.clone() });
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!("{} is listed twice", self.format(w[0]))));
        }
        Ok(values)
    }

    /// A list `1.5,2,2.5` (names for a choice: `sma,ema`) or a range `start:stop:step`.
    fn text_axis(&self, text: &str, bad: &dyn Fn(String) -> BacktestError) -> Result<Vec<f64>, BacktestError> {
        if !text.contains(':') {
            let items: Vec<&str> = text.split(',').map(str::trim).collect();
            if items.iter().any(|s| s.is_empty()) {
                return Err(bad("empty value in the list".into()));
            }
            return items.iter().map(|s| self.parse(s)).collect();
        }
        let parts: Vec<&str> = text.split(':').collect();
        if matches!(self.kind, ParamKind::Choice(_)) {
            return Err(bad(format!("a range needs numbers; list the names instead ({})", self.range())));
        }
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
        self.range_axis(num("start", start)?, num("stop", stop)?, num("step", step)?, bad)
    }

    /// The inclusive range `start:stop:step`, every value checked.
    fn range_axis(
        &self,
        start: f64,
        stop: f64,
        step: f64,
        bad: &dyn Fn(String) -> BacktestError,
    ) -> Result<Vec<f64>, BacktestError> {
        if matches!(self.kind, ParamKind::Choice(_)) {
            return Err(bad(format!("a range needs numbers; list the names instead ({})", self.range())));
        }
        if !(start.is_finite() && stop.is_finite() && step.is_finite()) {
            return Err(bad("start, stop and step must be finite numbers".into()));
        }
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
        let values: Vec<f64> = (0..count as usize).map(|i| ((start + i as f64 * step) * 1e10).round() / 1e10).collect();
        for &v in &values {
            self.check(v)?;
        }
        Ok(values)
    }
}

/// The values one parameter takes in a sweep, as a request gives them: a list (numbers,
/// or a choice's names), an inclusive range, or text as typed on a command line
/// (`1.5,2,2.5`, `sma,ema`, `10:50:5`). In TOML and JSON: `[1.5, 2]`, `{start = 10, stop
/// = 50, step = 5}`, a single number, or a string of that text. Numbers stay numbers.
/// One parameter's value as JSON holds it (serde, both ways): an integer (`20`), a float in
/// its shortest round-trip form (`2.0`, `2.5`), or a choice's name (`"ema"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamCell {
    Int(i64),
    Float(f64),
    Choice(String),
}

impl ParamCell {
    /// The number (a choice's is none: its position is its parameter's to find).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(v) => Some(*v as f64),
            Self::Float(v) => Some(*v),
            Self::Choice(_) => None,
        }
    }
}

impl fmt::Display for ParamCell {
    /// A number as JSON writes it (`20`, `2.0`), a choice by its bare name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Float(v) => write!(f, "{}", serde_json::Value::from(*v)),
            Self::Choice(name) => f.write_str(name),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Axis {
    List(Vec<AxisValue>),
    Range { start: f64, stop: f64, step: f64 },
    Text(String),
}

/// One value of an [`Axis`] list: a number, or a name (a choice; or a number as text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AxisValue {
    Number(f64),
    Name(String),
}

impl Axis {
    /// One value.
    pub fn one(value: f64) -> Self {
        Self::List(vec![AxisValue::Number(value)])
    }

    /// A list of numbers.
    pub fn numbers(values: &[f64]) -> Self {
        Self::List(values.iter().map(|&v| AxisValue::Number(v)).collect())
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(x) => write!(f, "{x}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => f.write_str(text.trim()),
            Self::Range { start, stop, step } => write!(f, "{start}:{stop}:{step}"),
            Self::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                Ok(())
            }
        }
    }
}

impl<'de> Deserialize<'de> for Axis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AxisVisitor;
        impl<'de> Visitor<'de> for AxisVisitor {
            type Value = Axis;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list, a range or a value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Axis, E> {
                Ok(Axis::Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Axis, E> {
                Ok(Axis::one(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Axis, E> {
                Ok(Axis::one(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Axis, E> {
                Ok(Axis::one(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Axis, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<AxisValue>()? {
                    items.push(item);
                }
                Ok(Axis::List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Axis, A::Error> {
                let (mut start, mut stop, mut step) = (None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.as_str() {
                        "start" => &mut start,
                        "stop" => &mut stop,
                        "step" => &mut step,
                        other => return Err(de::Error::unknown_field(other, &["start", "stop", "step"])),
                    };
                    *slot = Some(map.next_value::<f64>()?);
                }
                match (start, stop, step) {
                    (Some(start), Some(stop), Some(step)) => Ok(Axis::Range { start, stop, step }),
                    _ => Err(de::Error::custom("a range needs start, stop and step")),
                }
            }
        }
        deserializer.deserialize_any(AxisVisitor)
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

    /// The `len` values `value(i)`, written in place: no slice is copied in (a copy of a
    /// length known only at run time is a `memmove` call, a tenth of a big grid's writing).
    ///
    /// # Panics
    /// If `len` > [`MAX_PARAMS`].
    #[inline]
    pub fn from_fn(len: usize, mut value: impl FnMut(usize) -> f64) -> Self {
        let mut values = [0.0; MAX_PARAMS];
        for (i, v) in values[..len].iter_mut().enumerate() {
            *v = value(i);
        }
        Self { values, len }
    }
}

impl std::ops::Deref for ParamValues {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.values[..self.len]
    }
}
