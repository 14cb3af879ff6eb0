//! `multigpu.json`: per workload tag, the share of work each GPU gets and its measured
//! throughput.

use crate::SCHEMA;
use crate::error::{ProfileError, Result};
use crate::io::ProfileFile;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The split of one workload across devices, keyed by device label (`gpu0:NVIDIA H100`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RatioProfile {
    #[serde(default)]
    pub updated_at: Option<String>,
    pub ratios: BTreeMap<String, f64>,
    /// Items per second each device reached when the ratios were measured.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub throughput: BTreeMap<String, f64>,
}

/// How far the ratios' sum may stray from 1.
const RATIO_SUM_TOLERANCE: f64 = 1e-6;

impl RatioProfile {
    /// A validated profile: ratios finite, in [0, 1], summing to 1; throughputs finite
    /// and non-negative.
    pub fn new(tag: &str, ratios: BTreeMap<String, f64>, throughput: BTreeMap<String, f64>) -> Result<Self> {
        let invalid = |reason: String| ProfileError::InvalidRatios { tag: tag.to_owned(), reason };
        if ratios.is_empty() {
            return Err(invalid("no devices".into()));
        }
        if let Some((d, r)) = ratios.iter().find(|(_, r)| !(r.is_finite() && (0.0..=1.0).contains(*r))) {
            return Err(invalid(format!("ratio of {d} is {r}, expected a number in [0, 1]")));
        }
        let sum: f64 = ratios.values().sum();
        if (sum - 1.0).abs() > RATIO_SUM_TOLERANCE {
            return Err(invalid(format!("ratios sum to {sum:.6}, expected 1")));
        }
        if let Some((d, t)) = throughput.iter().find(|(_, t)| !(t.is_finite() && **t >= 0.0)) {
            return Err(invalid(format!("throughput of {d} is {t}, expected a number >= 0")));
        }
        Ok(Self { updated_at: Some(crate::io::now_rfc3339()), ratios, throughput })
    }
}

/// The whole `multigpu.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuFile {
    #[serde(default)]
    pub schema: u32,
    #[serde(default)]
    pub profiles: BTreeMap<String, RatioProfile>,
}

impl ProfileFile for MultiGpuFile {
    fn parse(text: &str) -> serde_json::Result<Self> {
        let value: Value = serde_json::from_str(text)?;
        if value.get("profiles").is_some() || value.get("schema").is_some() {
            return serde_json::from_value(value);
        }
        // The original single-profile form: `{updated_at, workload_tag, ratios}`.
        #[derive(Deserialize)]
        struct Original {
            workload_tag: String,
            #[serde(flatten)]
            profile: RatioProfile,
        }
        let original: Original = serde_json::from_value(value)?;
        Ok(Self { schema: 0, profiles: BTreeMap::from([(original.workload_tag, original.profile)]) })
    }

    fn before_write(&mut self, _now: &str) {
        self.schema = SCHEMA;
    }
}
