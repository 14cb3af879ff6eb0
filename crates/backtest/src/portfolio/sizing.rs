//! How much an entry buys: [`Sizing`], vectorbt's `size` and `size_type` with its lot step
//! (`size_granularity`) and minimum size, checked once.

use crate::error::BacktestError;
use crate::portfolio::orders::Limits;

/// What `size` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeType {
    /// A fraction of the cash at the order (vectorbt's `"percent"`): 1.0 is all of it.
    Percent,
    /// A cash value to buy (vectorbt's `"value"`), in the account's currency.
    Value,
    /// A fraction of the account's value at the bar's close before its orders (vectorbt's
    /// `"targetpercent"`): from flat, that fraction of equity goes into the position.
    TargetPercent,
    /// A fraction of the account's value (as for `TargetPercent`) lost if the stop is hit
    /// at its level: the units are that value over the entry's distance to its stop.
    /// ThreadX's own (vectorbt has none); it needs a stop rule.
    Risk,
}

impl SizeType {
    /// The names Python and the rule files use (vectorbt's, and `risk`).
    pub const NAMES: [&'static str; 4] = ["percent", "value", "targetpercent", "risk"];

    pub fn parse(name: &str) -> Result<Self, BacktestError> {
        match name.to_ascii_lowercase().as_str() {
            "percent" => Ok(Self::Percent),
            "value" => Ok(Self::Value),
            "targetpercent" => Ok(Self::TargetPercent),
            "risk" => Ok(Self::Risk),
            _ => Err(BacktestError::BadValue {
                param: "size_type".into(),
                value: name.into(),
                problem: format!("one of {}", Self::NAMES.join(", ")),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Percent => "percent",
            Self::Value => "value",
            Self::TargetPercent => "targetpercent",
            Self::Risk => "risk",
        }
    }

    /// Whether it sizes from the account's value before the bar's orders.
    pub(crate) fn reads_value(self) -> bool {
        matches!(self, Self::TargetPercent | Self::Risk)
    }
}

/// An entry's size, checked: `size` of `kind`, bought in lots of `lot` units (NaN: any
/// fraction), at least `min_size` units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizing {
    pub size: f64,
    pub kind: SizeType,
    pub lot: f64,
    pub min_size: f64,
}

impl Default for Sizing {
    /// All the cash into each entry: the one account of a single symbol as today.
    fn default() -> Self {
        Self { size: 1.0, kind: SizeType::Percent, lot: f64::NAN, min_size: 0.0 }
    }
}

impl Sizing {
    /// Checked sizing: a positive size (a fraction in (0, 1] for `percent` and
    /// `targetpercent`), a positive lot step or none, a minimum size ≥ 0.
    pub fn new(size: f64, kind: SizeType, lot: Option<f64>, min_size: f64) -> Result<Self, BacktestError> {
        let bad = |param: &str, value: f64, problem: &str| {
            Err(BacktestError::BadValue { param: param.into(), value: value.to_string(), problem: problem.into() })
        };
        let fraction = kind != SizeType::Value;
        if !(size.is_finite() && size > 0.0) || (fraction && size > 1.0) {
            let what = if fraction {
                format!("a {} size is a fraction of the account in (0, 1] (e.g. 0.2)", kind.name())
            } else {
                "a value size is a positive cash amount (e.g. 1000)".into()
            };
            return bad("size", size, &what);
        }
        if let Some(lot) = lot
            && !(lot.is_finite() && lot > 0.0)
        {
            return bad("lot", lot, "a lot step is a positive number of units (e.g. 1 or 0.01)");
        }
        if !(min_size.is_finite() && min_size >= 0.0) {
            return bad("min_size", min_size, "a minimum size is a number of units ≥ 0");
        }
        Ok(Self { size, kind, lot: lot.unwrap_or(f64::NAN), min_size })
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits { lot: self.lot, min_size: self.min_size }
    }
}

/// The sizing a rule file's `[sizing]` table, the CLI's flags or Python's keywords ask
/// for, each field optional: where one source leaves a field out, the source below it
/// (flags over the rule file) or the default gives it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SizingRequest {
    pub size: Option<f64>,
    /// The parameter (its place in the strategy's schema) whose value is each combo's
    /// size: a rule file's `size = "name"`, swept like any other; a `size` given over it
    /// takes its place.
    pub size_param: Option<usize>,
    pub size_type: Option<SizeType>,
    pub lot: Option<f64>,
    pub min_size: Option<f64>,
    pub init_cash: Option<f64>,
    pub max_positions: Option<usize>,
    pub leverage: Option<f64>,
}

impl SizingRequest {
    /// This request with `over`'s fields where `over` gives them.
    pub fn overridden_by(&self, over: &Self) -> Self {
        let size_param = if over.size.is_some() { None } else { over.size_param.or(self.size_param) };
        Self {
            size: over.size.or(self.size),
            size_param,
            size_type: over.size_type.or(self.size_type),
            lot: over.lot.or(self.lot),
            min_size: over.min_size.or(self.min_size),
            init_cash: over.init_cash.or(self.init_cash),
            max_positions: over.max_positions.or(self.max_positions),
            leverage: over.leverage.or(self.leverage),
        }
    }

    /// The checked sizing, each field left out at its default: all the cash left into
    /// each entry, any fraction of a unit. A problem names its field.
    pub fn sizing(&self) -> Result<Sizing, BacktestError> {
        let kind = self.size_type.unwrap_or(SizeType::Percent);
        Sizing::new(self.size.unwrap_or(1.0), kind, self.lot, self.min_size.unwrap_or(0.0))
    }

    /// Whether every entry puts all the account into its position, as a single run's
    /// does (the starting cash aside, which scales the account and no figure of it).
    pub fn is_all_in(&self) -> bool {
        self.size.is_none_or(|s| s == 1.0)
            && self.size_param.is_none()
            && self.size_type.is_none_or(|k| k == SizeType::Percent)
            && self.lot.is_none()
            && self.min_size.is_none_or(|m| m == 0.0)
            && self.max_positions.is_none()
            && self.leverage.is_none_or(|l| l == 1.0)
    }
}
