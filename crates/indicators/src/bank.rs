//! The indicator bank: each unique indicator of one data set is computed once and shared.

use crate::compute::{Dispatched, FamilyRun, compute_dispatched};
use crate::error::IndicatorError;
use crate::indicator::{Indicator, IndicatorValues};
use crate::ohlcv::Ohlcv;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use threadx_dispatch::Dispatcher;

/// Indicators of one [`Ohlcv`], computed on demand through the dispatcher and kept.
///
/// Invariant: an indicator is computed at most once per bank and precision, whoever asks
/// and however often; its identity is [`Indicator::key`], built by the profiles' key
/// builder from normalised parameters (`std=2` and `std=2.0` are one indicator). Missing
/// indicators asked for together are computed together, one batch per family.
///
/// Values that feed decisions come from [`IndicatorBank::get_many_exact`]: always f64 on
/// the CPU, so a backtest takes the same trades whatever device the bank's user picked.
#[derive(Debug)]
pub struct IndicatorBank<'a> {
    data: &'a Ohlcv,
    dispatcher: &'a Dispatcher,
    state: Mutex<BankState>,
}

#[derive(Debug, Default)]
struct BankState {
    /// Values by key, and whether they are the CPU's f64 values.
    values: HashMap<String, (Arc<IndicatorValues>, bool)>,
    computations: usize,
    runs: Vec<FamilyRun>,
}

impl<'a> IndicatorBank<'a> {
    pub fn new(data: &'a Ohlcv, dispatcher: &'a Dispatcher) -> Self {
        Self { data, dispatcher, state: Mutex::default() }
    }

    /// The data the bank computes on.
    pub fn data(&self) -> &'a Ohlcv {
        self.data
    }

    /// The dispatcher that decides where its batches run.
    pub fn dispatcher(&self) -> &'a Dispatcher {
        self.dispatcher
    }

    /// One indicator, computed now or shared from an earlier call.
    pub fn get(&self, indicator: &Indicator) -> Result<Arc<IndicatorValues>, IndicatorError> {
        let mut values = self.get_many(std::slice::from_ref(indicator))?;
        values.pop().ok_or_else(|| IndicatorError::Unknown { name: indicator.label(), known: "" })
    }

    /// Many indicators, in the order asked, on the dispatcher's device (f32 on a GPU);
    /// those not yet in the bank are computed in one batch per family. Every missing
    /// indicator is checked before any work (the bank holds only checked ones).
    pub fn get_many(&self, indicators: &[Indicator]) -> Result<Vec<Arc<IndicatorValues>>, IndicatorError> {
        self.fetch(indicators, false)
    }

    /// The output columns of `indicators` as a table: (column name, the values and the
    /// output's index) in the order asked, each unique indicator once (a repeat is left
    /// out with a warning), every one checked against the data's length first.
    pub fn table(
        &self,
        indicators: &[Indicator],
    ) -> Result<Vec<(String, Arc<IndicatorValues>, usize)>, IndicatorError> {
        let mut unique: Vec<Indicator> = Vec::new();
        for indicator in indicators {
            if unique.iter().any(|u| u.key() == indicator.key()) {
                tracing::warn!("{indicator} is asked for twice; computing it once");
            } else {
                unique.push(*indicator);
            }
        }
        for indicator in &unique {
            indicator.check(self.data.len())?;
        }
        let values = self.get_many(&unique)?;
        Ok(values
            .into_iter()
            .flat_map(|v| {
                let names = v.indicator().columns();
                names.into_iter().enumerate().map(move |(i, name)| (name, v.clone(), i))
            })
            .collect())
    }

    /// Like [`IndicatorBank::get_many`], but always the CPU's f64 values (the reference):
    /// what decisions are made from.
    pub fn get_many_exact(&self, indicators: &[Indicator]) -> Result<Vec<Arc<IndicatorValues>>, IndicatorError> {
        self.fetch(indicators, true)
    }

    fn fetch(&self, indicators: &[Indicator], exact: bool) -> Result<Vec<Arc<IndicatorValues>>, IndicatorError> {
        let keys: Vec<String> = indicators.iter().map(Indicator::key).collect();
        // Held while computing, so that concurrent askers never compute the same thing.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut missing: Vec<Indicator> = Vec::new();
        let mut missing_keys: Vec<&String> = Vec::new();
        let mut asked: HashSet<&String> = HashSet::with_capacity(keys.len());
        for (indicator, key) in indicators.iter().zip(&keys) {
            let usable = state.values.get(key).is_some_and(|(_, is_exact)| *is_exact || !exact);
            if !usable && asked.insert(key) {
                missing.push(*indicator);
                missing_keys.push(key);
            }
        }
        if !missing.is_empty() {
            let Dispatched { values: computed, on_cpu, runs } =
                compute_dispatched(self.dispatcher, self.data, &missing, exact)?;
            for run in &runs {
                tracing::debug!(key = %run.key, device = ?run.device, ms = run.elapsed_ms, "indicator batch");
            }
            state.computations += computed.len();
            for ((key, values), on_cpu) in missing_keys.into_iter().zip(computed).zip(on_cpu) {
                state.values.insert(key.clone(), (Arc::new(values), on_cpu));
            }
            state.runs.extend(runs);
        }
        Ok(keys.iter().filter_map(|k| state.values.get(k).map(|(v, _)| v.clone())).collect())
    }

    /// How many indicators the bank has computed (each unique one once).
    pub fn computations(&self) -> usize {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).computations
    }

    /// The family batches run so far: key, size of the batch, device and time.
    pub fn runs(&self) -> Vec<FamilyRun> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).runs.clone()
    }
}
