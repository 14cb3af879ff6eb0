//! The indicator bank: each unique indicator of one data set is computed once and shared.

use crate::IndicatorError;
use crate::compute::{FamilyRun, compute_dispatched};
use crate::indicator::{Indicator, IndicatorValues};
use crate::ohlcv::Ohlcv;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use threadx_dispatch::Dispatcher;

/// Indicators of one [`Ohlcv`], computed on demand through the dispatcher and kept.
///
/// Invariant: an indicator is computed at most once per bank, whoever asks and however
/// often; its identity is [`Indicator::key`], built by the profiles' key builder from
/// normalised parameters (`std=2` and `std=2.0` are one indicator). Missing indicators
/// asked for together are computed together, one batch per family.
#[derive(Debug)]
pub struct IndicatorBank<'a> {
    data: &'a Ohlcv,
    dispatcher: &'a Dispatcher,
    state: Mutex<BankState>,
}

#[derive(Debug, Default)]
struct BankState {
    values: HashMap<String, Arc<IndicatorValues>>,
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

    /// One indicator, computed now or shared from an earlier call.
    pub fn get(&self, indicator: &Indicator) -> Result<Arc<IndicatorValues>, IndicatorError> {
        let mut values = self.get_many(std::slice::from_ref(indicator))?;
        values.pop().ok_or_else(|| IndicatorError::Unknown { name: indicator.label(), known: "" })
    }

    /// Many indicators, in the order asked; those not yet in the bank are computed in
    /// one batch per family. Every missing indicator is checked before any work (the bank
    /// holds only checked ones).
    pub fn get_many(&self, indicators: &[Indicator]) -> Result<Vec<Arc<IndicatorValues>>, IndicatorError> {
        let keys: Vec<String> = indicators.iter().map(Indicator::key).collect();
        // Held while computing, so that concurrent askers never compute the same thing.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut missing: Vec<Indicator> = Vec::new();
        let mut missing_keys: Vec<&String> = Vec::new();
        for (indicator, key) in indicators.iter().zip(&keys) {
            if !state.values.contains_key(key) && !missing_keys.contains(&key) {
                missing.push(*indicator);
                missing_keys.push(key);
            }
        }
        if !missing.is_empty() {
            let (computed, runs) = compute_dispatched(self.dispatcher, self.data, &missing)?;
            for run in &runs {
                tracing::debug!(key = %run.key, device = ?run.device, ms = run.elapsed_ms, "indicator batch");
            }
            state.computations += computed.len();
            state.runs.extend(runs);
            for (key, values) in missing_keys.into_iter().zip(computed) {
                state.values.insert(key.clone(), Arc::new(values));
            }
        }
        Ok(keys.iter().filter_map(|k| state.values.get(k).cloned()).collect())
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
