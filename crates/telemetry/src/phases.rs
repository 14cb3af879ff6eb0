//! [`PhaseTimer`]: where a run's wall time went, phase by phase, with the time no phase
//! accounts for (waits, synchronisation, what nobody timed) as its own line.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::Instant;

/// Times named phases from its start. Invariant: the phases plus the unaccounted
/// remainder are the wall time since the start.
#[derive(Debug, Clone)]
pub struct PhaseTimer {
    started: Instant,
    phases: Vec<(&'static str, f64)>,
}

impl PhaseTimer {
    pub fn start() -> Self {
        Self { started: Instant::now(), phases: Vec::new() }
    }

    /// Runs `f` and adds its time to phase `name`.
    pub fn time<R>(&mut self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let r = f();
        self.add(name, started.elapsed().as_secs_f64());
        r
    }

    /// Adds `seconds` to phase `name` (phases keep the order they first appeared in).
    pub fn add(&mut self, name: &'static str, seconds: f64) {
        match self.phases.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1 += seconds,
            None => self.phases.push((name, seconds)),
        }
    }

    /// The breakdown now.
    pub fn report(&self) -> PhaseReport {
        let wall_s = self.started.elapsed().as_secs_f64();
        let timed: f64 = self.phases.iter().map(|p| p.1).sum();
        PhaseReport { wall_s, phases: self.phases.clone(), unaccounted_s: wall_s - timed }
    }
}

/// A [`PhaseTimer`]'s breakdown.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    pub wall_s: f64,
    pub phases: Vec<(&'static str, f64)>,
    /// The wall time in no phase (negative only if timed phases overlapped).
    pub unaccounted_s: f64,
}

impl PhaseReport {
    /// As a summary holds it: the wall time and each phase (`unaccounted` last) with its
    /// share of it.
    pub fn summary(&self) -> PhasesSummary {
        let share = |s: f64| if self.wall_s > 0.0 { s / self.wall_s } else { 0.0 };
        let phases = self.rows().map(|(name, s)| PhaseShare { phase: name.to_owned(), s, share: share(s) }).collect();
        PhasesSummary { wall_s: self.wall_s, phases }
    }

    /// The phases, then `unaccounted`.
    pub fn rows(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.phases.iter().copied().chain([("unaccounted", self.unaccounted_s)])
    }

    /// The seconds of phase `name` (0 when it did not run).
    pub fn seconds(&self, name: &str) -> f64 {
        self.rows().filter(|p| p.0 == name).map(|p| p.1).sum()
    }

    /// A table: phase, seconds, share of the wall time, then the total.
    pub fn table(&self) -> String {
        let mut out = format!("{:<14}{:>10}{:>9}\n", "phase", "wall s", "share");
        for (name, s) in self.rows() {
            let share = if self.wall_s > 0.0 { s / self.wall_s * 100.0 } else { 0.0 };
            let _ = writeln!(out, "{name:<14}{s:>10.4}{share:>8.1}%");
        }
        let _ = writeln!(out, "{:<14}{:>10.4}{:>8.1}%", "total", self.wall_s, 100.0);
        out
    }
}

/// A [`PhaseReport`] in a summary (serde, both ways).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhasesSummary {
    pub wall_s: f64,
    pub phases: Vec<PhaseShare>,
}

/// One phase's seconds and share of the wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseShare {
    pub phase: String,
    pub s: f64,
    pub share: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phases_and_the_unaccounted_rest_make_up_the_wall_time() {
        let mut timer = PhaseTimer::start();
        timer.time("load", || std::thread::sleep(Duration::from_millis(30)));
        std::thread::sleep(Duration::from_millis(40)); // no phase: unaccounted
        let x = timer.time("kernel", || {
            std::thread::sleep(Duration::from_millis(10));
            7
        });
        timer.time("load", || std::thread::sleep(Duration::from_millis(10)));
        timer.add("readback", 0.005);
        let r = timer.report();
        assert_eq!(x, 7);
        assert_eq!(r.phases.iter().map(|p| p.0).collect::<Vec<_>>(), ["load", "kernel", "readback"]);
        let total: f64 = r.rows().map(|p| p.1).sum();
        assert!((total - r.wall_s).abs() < 1e-3, "{total} vs {}", r.wall_s);
        assert!((0.040..0.050).contains(&r.phases[0].1), "load {:?}", r.phases[0]);
        assert!((0.010..0.020).contains(&r.phases[1].1), "kernel {:?}", r.phases[1]);
        // The 40 ms untimed sleep, less the 5 ms added without being spent.
        assert!((0.033..0.050).contains(&r.unaccounted_s), "unaccounted {}", r.unaccounted_s);
        let summary = r.summary();
        assert_eq!(summary.phases[3].phase, "unaccounted");
        assert_eq!(summary.phases.len(), 4);
        let table = r.table();
        assert!(table.lines().nth(4).unwrap().starts_with("unaccounted"), "{table}");
        assert!(table.lines().last().unwrap().ends_with("100.0%"), "{table}");
    }
}
