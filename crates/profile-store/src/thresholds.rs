//! `thresholds.json`: per operation key, the running timing statistics of each device.

use crate::error::{ProfileError, Result};
use crate::io::{self, ProfileFile};
use crate::{RunningStats, SCHEMA};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The two kinds of device an operation can be timed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Cpu,
    Gpu,
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        })
    }
}

/// The timings of one operation key, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawEntry", into = "RawEntry")]
pub struct ThresholdEntry {
    pub cpu: RunningStats,
    pub gpu: RunningStats,
    /// Fingerprint of the hardware that measured these timings; `None` for entries read
    /// from a file of the original format, which recorded none.
    pub fingerprint: Option<String>,
}

impl ThresholdEntry {
    /// Timings measured elsewhere are kept but not trusted until re-measured here.
    pub fn trusted_for(&self, fingerprint: &str) -> bool {
        self.fingerprint.as_deref().is_none_or(|f| f == fingerprint)
    }

    pub fn stats(&self, device: Device) -> &RunningStats {
        match device {
            Device::Cpu => &self.cpu,
            Device::Gpu => &self.gpu,
        }
    }

    fn stats_mut(&mut self, device: Device) -> &mut RunningStats {
        match device {
            Device::Cpu => &mut self.cpu,
            Device::Gpu => &mut self.gpu,
        }
    }

    /// Samples of the original format: measurements in which both devices ran.
    pub fn samples(&self) -> u64 {
        self.cpu.n.min(self.gpu.n)
    }
}

/// The on-disk shape of an entry: the original fields first, then the exact statistics.
#[derive(Serialize, Deserialize)]
struct RawEntry {
    #[serde(default)]
    cpu_ms_avg: Option<f64>,
    #[serde(default)]
    gpu_ms_avg: Option<f64>,
    #[serde(default)]
    samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu: Option<RunningStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu: Option<RunningStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
}

impl From<RawEntry> for ThresholdEntry {
    fn from(raw: RawEntry) -> Self {
        // The original format kept only averages and a shared sample count.
        let legacy = |avg: Option<f64>| match avg {
            Some(mean) if mean.is_finite() => RunningStats { n: raw.samples.unwrap_or(1).max(1), mean, m2: 0.0 },
            _ => RunningStats::default(),
        };
        Self {
            cpu: raw.cpu.unwrap_or_else(|| legacy(raw.cpu_ms_avg)),
            gpu: raw.gpu.unwrap_or_else(|| legacy(raw.gpu_ms_avg)),
            fingerprint: raw.fingerprint,
        }
    }
}

impl From<ThresholdEntry> for RawEntry {
    fn from(e: ThresholdEntry) -> Self {
        let present = |s: RunningStats| (s.n > 0).then_some(s);
        Self {
            cpu_ms_avg: e.cpu.mean(),
            gpu_ms_avg: e.gpu.mean(),
            samples: Some(e.samples()),
            cpu: present(e.cpu),
            gpu: present(e.gpu),
            fingerprint: e.fingerprint,
        }
    }
}

/// The whole `thresholds.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThresholdsFile {
    /// 0 when read from a file of the original format.
    #[serde(default)]
    pub schema: u32,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Fingerprint of the last writer.
    #[serde(default)]
    pub fingerprint: Option<String>,
    #[serde(default)]
    pub entries: BTreeMap<String, ThresholdEntry>,
}

impl ProfileFile for ThresholdsFile {
    fn parse(text: &str) -> serde_json::Result<Self> {
        let value: Value = serde_json::from_str(text)?;
        let mut file = if value.get("entries").is_some() || value.get("schema").is_some() {
            serde_json::from_value::<Self>(value)?
        } else {
            // The original flat form: `{ key: {cpu_ms_avg, gpu_ms_avg, samples}, ... }`
            // with an optional `updated_at` beside the entries.
            let Value::Object(mut map) = value else {
                return Err(serde::de::Error::custom("expected a JSON object"));
            };
            let updated_at = match map.remove("updated_at") {
                Some(Value::String(s)) => Some(s),
                _ => None,
            };
            Self { schema: 0, updated_at, fingerprint: None, entries: serde_json::from_value(Value::Object(map))? }
        };
        // Entries written without their own fingerprint were measured by the file's writer.
        if let Some(fp) = &file.fingerprint {
            for entry in file.entries.values_mut() {
                entry.fingerprint.get_or_insert_with(|| fp.clone());
            }
        }
        Ok(file)
    }

    fn before_write(&mut self, now: &str) {
        self.schema = SCHEMA;
        self.updated_at = Some(now.to_owned());
    }
}

/// What a decision sees of one key: the stored timings merged with the samples not yet
/// flushed. `trusted` is false when the only timings come from other hardware.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EntryView {
    pub cpu: RunningStats,
    pub gpu: RunningStats,
    pub trusted: bool,
}

impl EntryView {
    pub fn stats(&self, device: Device) -> &RunningStats {
        match device {
            Device::Cpu => &self.cpu,
            Device::Gpu => &self.gpu,
        }
    }
}

/// An in-memory threshold profile: loaded once, read by every decision, fed with new
/// samples, and merged into the file by [`ThresholdStore::flush`] (also run on drop).
#[derive(Debug)]
pub struct ThresholdStore {
    path: PathBuf,
    fingerprint: String,
    /// The fingerprint of the file's last writer.
    written_by: Option<String>,
    disk: BTreeMap<String, ThresholdEntry>,
    /// Samples recorded since the last flush; only these are merged into the file, so
    /// that nothing is counted twice.
    pending: BTreeMap<String, ThresholdEntry>,
}

impl ThresholdStore {
    /// Loads the profile at `path` (empty when missing; a corrupt file is moved aside).
    pub fn open(path: impl Into<PathBuf>, fingerprint: &str) -> Result<Self> {
        let path = path.into();
        let file = io::load::<ThresholdsFile>(&path)?;
        Ok(Self {
            path,
            fingerprint: fingerprint.to_owned(),
            written_by: file.fingerprint,
            disk: file.entries,
            pending: BTreeMap::new(),
        })
    }

    /// The fingerprint the file was last written under: a probe of the hardware that a
    /// run which needs no GPU can reuse instead of probing again.
    pub fn written_by(&self) -> Option<&str> {
        self.written_by.as_deref()
    }

    /// Records new samples under `fingerprint` from now on.
    pub fn set_fingerprint(&mut self, fingerprint: &str) {
        fingerprint.clone_into(&mut self.fingerprint);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Adds one timing of `key` on `device`, in milliseconds.
    pub fn record(&mut self, key: &str, device: Device, ms: f64) -> Result<()> {
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(ProfileError::InvalidTiming { key: key.to_owned(), ms });
        }
        let entry = match self.pending.get_mut(key) {
            Some(e) => e,
            None => self.pending.entry(key.to_owned()).or_default(),
        };
        entry.stats_mut(device).push(ms);
        Ok(())
    }

    /// The timings a decision should use for `key`.
    pub fn view(&self, key: &str) -> Option<EntryView> {
        let disk = self.disk.get(key);
        let pending = self.pending.get(key);
        if disk.is_none() && pending.is_none() {
            return None;
        }
        let mut view = EntryView { trusted: true, ..EntryView::default() };
        match disk {
            Some(d) if d.trusted_for(&self.fingerprint) => {
                view.cpu = d.cpu;
                view.gpu = d.gpu;
            }
            Some(d) if pending.is_none() => {
                return Some(EntryView { cpu: d.cpu, gpu: d.gpu, trusted: false });
            }
            _ => {}
        }
        if let Some(p) = pending {
            view.cpu.merge(&p.cpu);
            view.gpu.merge(&p.gpu);
        }
        Some(view)
    }

    /// Every key, in key order, with its view.
    pub fn entries(&self) -> Vec<(String, EntryView)> {
        self.keys_with_prefix("")
    }

    /// The keys of one operation (`name:`), in key order, with their views.
    pub fn entries_of(&self, name: &str) -> Vec<(String, EntryView)> {
        self.keys_with_prefix(&format!("{name}:"))
    }

    fn keys_with_prefix(&self, prefix: &str) -> Vec<(String, EntryView)> {
        let from = |m: &BTreeMap<String, ThresholdEntry>| {
            m.range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        let mut keys = from(&self.disk);
        keys.extend(from(&self.pending));
        keys.sort_unstable();
        keys.dedup();
        keys.into_iter().filter_map(|k| self.view(&k).map(|v| (k, v))).collect()
    }

    /// Merges the pending samples into the file (locked read-merge-write) and reloads
    /// what other processes wrote meanwhile.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let fingerprint = &self.fingerprint;
        let pending = &self.pending;
        let written = io::update::<ThresholdsFile, _>(&self.path, |file| {
            for (key, new) in pending {
                let entry = file.entries.entry(key.clone()).or_default();
                if !entry.trusted_for(fingerprint) {
                    *entry = ThresholdEntry::default();
                }
                entry.cpu.merge(&new.cpu);
                entry.gpu.merge(&new.gpu);
                entry.fingerprint = Some(fingerprint.clone());
            }
            file.fingerprint = Some(fingerprint.clone());
        })?;
        self.disk = written.entries;
        self.pending.clear();
        Ok(())
    }
}

impl Drop for ThresholdStore {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("could not save timing profile: {e}");
        }
    }
}
