//! What a run read, as its identity and summary name it ([`RunData`]): one data set, or a
//! universe's symbols traded as one account on the union of their clocks.

use crate::spec::fnv1a;
use crate::summary::{Annualisation, DataIdentity, DataSummary, PortfolioIdentity};
use threadx_backtest::Account;
use threadx_indicators::{Calendar, Ohlcv};

/// The data of a run: what resumes and merges check it by (its fingerprint), what its
/// summary says of it, and its calendar's bars per year.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    pub(crate) identity: DataIdentity,
    pub(crate) portfolio: Option<PortfolioIdentity>,
    pub(crate) summary: DataSummary,
    per_year: f64,
    basis: &'static str,
}

impl RunData {
    /// One data set.
    pub fn of(data: &Ohlcv) -> Self {
        let calendar = data.calendar();
        Self {
            identity: DataIdentity {
                origin: data.origin().to_owned(),
                bars: data.len() as u64,
                fingerprint: data_fingerprint(data),
            },
            portfolio: None,
            summary: DataSummary::of(data),
            per_year: calendar.bars_per_year(data.timestamps()),
            basis: calendar.describe(),
        }
    }

    /// A universe's symbols (name and bars, in order) on `clock`, the union of their bar
    /// times, traded as `account` (`size_param`: the name of its size's parameter, if
    /// any): fingerprinted by every symbol's name and bars.
    pub fn portfolio(
        origin: &str,
        symbols: &[(&str, &Ohlcv)],
        clock: &[i64],
        (account, size_param): (&Account, Option<&str>),
    ) -> Self {
        let mut text = String::new();
        for (name, data) in symbols {
            text.push_str(name);
            text.push(':');
            text.push_str(&data_fingerprint(data));
            text.push(';');
        }
        let calendar = Calendar::of(clock);
        Self {
            identity: DataIdentity {
                origin: origin.to_owned(),
                bars: clock.len() as u64,
                fingerprint: format!("{:016x}-{}x{}", fnv1a(text.as_bytes()), symbols.len(), clock.len()),
            },
            portfolio: Some(PortfolioIdentity {
                symbols: symbols.iter().map(|(name, _)| (*name).to_owned()).collect(),
                init_cash: account.init_cash,
                size: account.sizing.size,
                size_param: size_param.map(str::to_owned),
                size_type: account.sizing.kind.name().to_owned(),
                lot: Some(account.sizing.lot).filter(|l| !l.is_nan()),
                min_size: account.sizing.min_size,
                max_positions: account.max_positions.map(|n| n as u64),
                leverage: account.leverage,
            }),
            summary: DataSummary::of_times(origin, clock),
            per_year: calendar.bars_per_year(clock),
            basis: calendar.describe(),
        }
    }

    /// Its bars (a portfolio's: its clock's).
    pub fn bars(&self) -> u64 {
        self.identity.bars
    }

    /// Where it was read from.
    pub fn origin(&self) -> &str {
        &self.identity.origin
    }

    /// The bars per year that annualised the run's figures and why: `given`
    /// (`--periods-per-year`), or the data's calendar.
    pub fn annualisation(&self, given: Option<f64>) -> Annualisation {
        annualised(given, self.per_year, self.basis)
    }
}

/// A data set's identity for checkpoints and shards: FNV-1a over every timestamp and
/// price bit, with the bar count.
pub fn data_fingerprint(data: &Ohlcv) -> String {
    let mut bytes = Vec::with_capacity(data.len() * 48);
    for (i, &t) in data.timestamps().iter().enumerate() {
        bytes.extend(t.to_le_bytes());
        for series in [data.open(), data.high(), data.low(), data.close(), data.volume()] {
            bytes.extend(series[i].to_bits().to_le_bytes());
        }
    }
    format!("{:016x}-{}", fnv1a(&bytes), data.len())
}

/// `given` bars per year, or the calendar's `per_year` and what it is (`basis`).
pub(crate) fn annualised(given: Option<f64>, per_year: f64, basis: &str) -> Annualisation {
    match given {
        Some(given) => Annualisation { periods_per_year: Some(given), basis: "given (--periods-per-year)".into() },
        None => Annualisation { periods_per_year: per_year.is_finite().then_some(per_year), basis: basis.to_owned() },
    }
}
