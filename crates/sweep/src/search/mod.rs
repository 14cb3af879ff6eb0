//! Search beyond grids: a [`Sampler`] proposes a batch of combos, the batch is evaluated
//! together (on a [`Session`](crate::Session)'s device pool), and the sampler learns from
//! the scores (Optuna's ask/tell). Designs fixed in advance (`random`, `sobol`, `lhs`)
//! and the adaptive Tree-structured Parzen Estimator (`tpe`); an [`Objective`] with
//! constraints; stopping on patience or a target ([`search`]).
//!
//! Invariant: the trials, their order and their rows depend only on the request and the
//! seed: samplers draw from [`SeededRng`](threadx_stats::SeededRng) with libm's
//! arithmetic, and rows are the same bytes on every device.

mod design;
mod driver;
mod objective;
mod options;
mod space;
mod tpe;

pub use driver::{Evaluate, SearchReport, Stop, Trial, search};
pub use objective::{Constraint, Objective};
pub use options::{DEFAULT_BATCH, SearchOptions, SearchRequest};
pub use space::SearchSpace;

use crate::error::SweepError;
use std::fmt;
use std::str::FromStr;

/// How a search proposes combos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SearchMethod {
    /// Uniform draws without replacement.
    Random,
    /// A scrambled Sobol sequence over the axes' ranks.
    Sobol,
    /// Latin hypercube samples over the axes' ranks.
    Lhs,
    /// The Tree-structured Parzen Estimator (adaptive).
    Tpe,
}

impl SearchMethod {
    /// Every method with its name on the command line and in summaries.
    const ALL: [(SearchMethod, &'static str); 4] = [
        (SearchMethod::Random, "random"),
        (SearchMethod::Sobol, "sobol"),
        (SearchMethod::Lhs, "lhs"),
        (SearchMethod::Tpe, "tpe"),
    ];

    /// Whether what it proposes depends on the scores told (then it cannot be sharded).
    pub fn is_adaptive(self) -> bool {
        self == SearchMethod::Tpe
    }

    /// The sampler of this method over `space`, seeded, planning `trials` trials.
    pub fn sampler(self, space: SearchSpace, seed: u64, trials: u64) -> Box<dyn Sampler + Send> {
        match self {
            SearchMethod::Tpe => Box::new(tpe::Tpe::new(space, seed)),
            design => Box::new(design::Design::new(design, space, seed, trials)),
        }
    }

    /// The first `n` combos of this design over `grid` (fewer when the rules allow
    /// fewer), sorted: the combos a design's session prepares. `None` for an adaptive
    /// method, whose combos are not known in advance.
    pub fn design_combos(self, grid: &threadx_backtest::Grid, seed: u64, n: u64) -> Option<Vec<u64>> {
        if self.is_adaptive() {
            return None;
        }
        let mut combos = self.sampler(SearchSpace::new(grid), seed, n).ask(n as usize);
        combos.sort_unstable();
        Some(combos)
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(m, _)| *m == self).map_or("", |(_, name)| name)
    }
}

impl FromStr for SearchMethod {
    type Err = SweepError;

    fn from_str(text: &str) -> Result<Self, SweepError> {
        let wanted = text.trim().to_ascii_lowercase();
        Self::ALL.iter().find(|(_, name)| *name == wanted).map(|&(m, _)| m).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|(_, name)| *name).collect();
            SweepError::Spec(format!("unknown search method `{text}` (known: {})", known.join(", ")))
        })
    }
}

impl TryFrom<String> for SearchMethod {
    type Error = SweepError;

    fn try_from(text: String) -> Result<Self, SweepError> {
        text.parse()
    }
}

impl From<SearchMethod> for String {
    fn from(method: SearchMethod) -> String {
        method.name().into()
    }
}

impl fmt::Display for SearchMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Proposes combos and learns from their scores.
pub trait Sampler {
    /// Up to `n` combos never proposed before, in trial order; fewer only when the space
    /// has no more.
    fn ask(&mut self, n: usize) -> Vec<u64>;

    /// The scores (larger is better; `None`: infeasible) of combos asked, in order.
    fn tell(&mut self, combos: &[u64], scores: &[Option<f64>]);
}
