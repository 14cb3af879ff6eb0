//! [`SweepRequest`]: everything a sweep is asked to do, as plain serde. A TOML config
//! deserialises straight into it, the CLI's flags and Python's keywords fill the same
//! fields, and [`SweepRequest::check`] validates it once into a [`SweepSpec`].

use crate::error::SweepError;
use crate::overfit::options::OverfittingRequest;
use crate::search::SearchRequest;
use crate::spec::WholeGrid;
use crate::spec::{Sample, SweepSpec, WalkForward};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use threadx_backtest::{Axis, Costs, Grid, Strategy};
use threadx_dispatch::DeviceMode;

/// A sweep as asked for. Every field is optional; what is left out takes the default the
/// field's comment names. Nothing is checked until [`SweepRequest::check`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepRequest {
    /// A built-in's name or a rule file's path (default `bb_atr`).
    pub strategy: Option<String>,
    /// The values of the parameters named, in the order given; the others stay at their
    /// defaults. `None` (a request made in code with no grid): the strategy's own grid. A
    /// file without `[grid]` means every parameter at its default.
    #[serde(default = "no_axes", with = "named_axes", skip_serializing_if = "Option::is_none")]
    pub grid: Option<Vec<(String, Axis)>>,
    /// Cost per side as a fraction of traded value (default 0.001).
    pub fee: Option<f64>,
    /// The fill price moved against the trader on every fill, a fraction (default 0).
    pub slippage: Option<f64>,
    /// Bars per year that annualise the Sharpe ratio (default: from the timestamps).
    pub periods_per_year: Option<f64>,
    /// Combos per chunk (default: from the data length only).
    pub chunk_size: Option<u64>,
    /// A seeded sample of the grid instead of all of it.
    pub random: Option<Sample>,
    /// A search (a design or TPE) instead of the grid.
    pub search: Option<SearchRequest>,
    /// Optimize on each train window, test the winner on the window after it.
    pub walk_forward: Option<WalkForward>,
    /// The overfitting statistics (PBO, DSR, stability) over the sweep.
    pub overfitting: Option<OverfittingRequest>,
    /// Worker threads (default: one per core).
    pub threads: Option<usize>,
    /// Where the work runs (default `auto`, or `THREADX_DEVICE`).
    pub device: Option<DeviceMode>,
    /// The most memory preparing may take, bytes or `8G`/`500M` (default: what is available).
    #[serde(default, deserialize_with = "byte_size", skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<u64>,
}

fn no_axes() -> Option<Vec<(String, Axis)>> {
    Some(Vec::new())
}

/// The grid as a TOML/JSON table (`name = axis`), kept in the order written.
mod named_axes {
    use super::*;
    use indexmap::IndexMap;

    pub fn serialize<S: Serializer>(axes: &Option<Vec<(String, Axis)>>, s: S) -> Result<S::Ok, S::Error> {
        let map: Option<IndexMap<&str, &Axis>> =
            axes.as_ref().map(|a| a.iter().map(|(n, v)| (n.as_str(), v)).collect());
        map.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<(String, Axis)>>, D::Error> {
        let map: Option<IndexMap<String, Axis>> = Option::deserialize(d)?;
        Ok(map.map(|m| m.into_iter().collect()))
    }
}

fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(0) => Err(serde::de::Error::custom("max_memory must be positive")),
        Size::Bytes(n) => Ok(Some(n)),
        Size::Text(text) => parse_size(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

/// `8G`, `500M`, `64k` or a plain byte count (binary multiples: 1k = 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_lowercase() {
                'k' => 10,
                'm' => 20,
                'g' => 30,
                't' => 40,
                _ => return Err(format!("`{text}`: use a number with k, M, G or T, e.g. 8G")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("`{text}` is not a size, e.g. 8G or 500M"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("`{text}`: the size must be positive"));
    }
    Ok((value * (1u64 << shift) as f64).min(u64::MAX as f64) as u64)
}

impl SweepRequest {
    /// A request for `strategy` over `grid` (`name`, values as `--grid` takes them: a
    /// list `1.5,2`, names `sma,ema` or a range `10:50:5`), everything else by default.
    pub fn new(strategy: &str, grid: &[(&str, &str)]) -> Self {
        let axes = grid.iter().map(|&(name, values)| (name.to_owned(), Axis::Text(values.to_owned())));
        Self { strategy: Some(strategy.to_owned()), grid: Some(axes.collect()), ..Self::default() }
    }

    /// A request from a TOML config's text. Errors name the line and column.
    pub fn from_toml(text: &str) -> Result<Self, SweepError> {
        toml::from_str(text).map_err(|e| {
            let place = e.span().map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}: ")
            });
            SweepError::Spec(format!("config: {}{}", place.unwrap_or_default(), e.message()))
        })
    }

    /// Sets one parameter's values, replacing those the request had for it.
    pub fn set_axis(&mut self, name: &str, axis: Axis) {
        let grid = self.grid.get_or_insert_with(Vec::new);
        match grid.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = axis,
            None => grid.push((name.to_owned(), axis)),
        }
    }

    /// Validates the whole request, once: the strategy, every axis value against the
    /// schema, the fee, the sample, the walk-forward windows, the threads, and that some
    /// combo passes the strategy's rules and every rule binds.
    pub fn check(&self) -> Result<SweepSpec, SweepError> {
        let strategy = Strategy::load(self.strategy.as_deref().unwrap_or("bb_atr"))?;
        let grid = Grid::resolve(strategy, self.grid.as_deref())?;
        let device = match self.device {
            Some(mode) => mode,
            None => DeviceMode::from_env().map_err(SweepError::Spec)?,
        };
        let search = self.search.as_ref().map(|s| s.check(grid.len())).transpose()?;
        // More combos asked than the grid has: the whole grid runs, each combo once. (A
        // --random beside a search or walk-forward stays, for them to refuse by name.)
        let grid_len = grid.len();
        let whole_random =
            self.random.filter(|r| r.n > grid_len && self.search.is_none() && self.walk_forward.is_none());
        let asked = match &self.search {
            Some(s) if s.trials > grid_len => Some(s.trials),
            _ => whole_random.map(|r| r.n),
        };
        let overfitting = self.overfitting.as_ref().map(OverfittingRequest::check).transpose()?;
        SweepSpec::checked(crate::spec::SpecParts {
            grid,
            fee: self.fee.unwrap_or(Costs::default().fee),
            slippage: self.slippage.unwrap_or(0.0),
            sample: if whole_random.is_some() { None } else { self.random },
            whole_grid: asked.map(|asked| WholeGrid { asked }),
            search,
            walk_forward: self.walk_forward,
            overfitting,
            chunk_size: self.chunk_size,
            periods_per_year: self.periods_per_year,
            threads: self.threads,
            device,
            max_memory: self.max_memory,
        })
    }
}
