//! [`SearchSpace`]: a grid's axes as a search sees them: ordinal axes ordered by value,
//! choices as categories, and the combos the strategy's rules allow.

use crate::combos::below;
use std::collections::HashSet;
use threadx_backtest::{Grid, ParamKind};
use threadx_stats::SeededRng;

/// One axis: its number of values and, for an ordinal axis, its positions by value.
#[derive(Debug, Clone)]
pub(crate) struct Dim {
    /// Whether the axis is a choice (categories, no order).
    pub(crate) categorical: bool,
    /// `by_rank[r]`: the axis position of the r-th smallest value (a choice: `r` itself).
    by_rank: Vec<usize>,
    /// `rank_of[p]`: the rank of axis position `p`.
    rank_of: Vec<usize>,
}

impl Dim {
    pub(crate) fn len(&self) -> usize {
        self.by_rank.len()
    }
}

/// The axes of a grid in the terms of a search: a combo is one rank per axis (a choice's
/// rank is its position), numbered as the grid numbers it.
#[derive(Debug, Clone)]
pub struct SearchSpace {
    dims: Vec<Dim>,
    len: u64,
    grid: Option<Grid>,
}

impl SearchSpace {
    /// The space of `grid`: its combos are those the strategy's rules allow.
    pub fn new(grid: &Grid) -> Self {
        let schema = grid.strategy().schema();
        let dims = grid
            .axes()
            .iter()
            .zip(schema)
            .map(|(values, spec)| {
                let categorical = matches!(spec.kind, ParamKind::Choice(_));
                let mut by_rank: Vec<usize> = (0..values.len()).collect();
                if !categorical {
                    by_rank.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
                }
                Self::dim(categorical, by_rank)
            })
            .collect();
        Self { dims, len: grid.len(), grid: Some(grid.clone()) }
    }

    /// A space of plain axes of `lens` values (ordinal, in order, or categorical), every
    /// combo allowed: for searches over objectives that are not strategies.
    pub fn of_axes(axes: &[(usize, bool)]) -> Self {
        let dims: Vec<Dim> =
            axes.iter().map(|&(len, categorical)| Self::dim(categorical, (0..len).collect())).collect();
        let len = dims.iter().map(|d| d.len() as u64).product();
        Self { dims, len, grid: None }
    }

    fn dim(categorical: bool, by_rank: Vec<usize>) -> Dim {
        let mut rank_of = vec![0; by_rank.len()];
        for (r, &p) in by_rank.iter().enumerate() {
            rank_of[p] = r;
        }
        Dim { categorical, by_rank, rank_of }
    }

    pub(crate) fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// Combos of the space (allowed or not).
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The combo of one rank per axis (the last axis varying fastest, as in the grid).
    pub fn combo(&self, ranks: &[usize]) -> u64 {
        self.dims.iter().zip(ranks).fold(0, |n, (d, &r)| n * d.len() as u64 + d.by_rank[r] as u64)
    }

    /// The rank on each axis of `combo`.
    pub fn ranks(&self, mut combo: u64) -> Vec<usize> {
        let mut ranks = vec![0; self.dims.len()];
        for (d, rank) in self.dims.iter().zip(&mut ranks).rev() {
            let len = d.len() as u64;
            *rank = d.rank_of[(combo % len) as usize];
            combo /= len;
        }
        ranks
    }

    /// The combo at a point of the unit cube: on each axis, the rank `⌊u · len⌋`.
    pub fn at(&self, unit: &[f64]) -> u64 {
        let ranks: Vec<usize> =
            self.dims.iter().zip(unit).map(|(d, &u)| ((u * d.len() as f64) as usize).min(d.len() - 1)).collect();
        self.combo(&ranks)
    }

    /// Whether the strategy's rules allow `combo`.
    pub fn allows(&self, combo: u64) -> bool {
        self.grid.as_ref().is_none_or(|g| g.strategy().allows(&g.values(combo)))
    }
}

/// The combos a search has proposed, each once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Proposed {
    seen: HashSet<u64>,
}

/// Rejected draws after which a space counts as exhausted.
const MAX_REJECTIONS: u32 = 100_000;

impl Proposed {
    /// Takes `combo` if it is new and allowed.
    pub(crate) fn take(&mut self, space: &SearchSpace, combo: u64) -> bool {
        !self.seen.contains(&combo) && space.allows(combo) && self.seen.insert(combo)
    }

    pub(crate) fn len(&self) -> u64 {
        self.seen.len() as u64
    }

    /// A new allowed combo drawn uniformly, or `None` when none is left (or none was found
    /// in [`MAX_REJECTIONS`] draws).
    pub(crate) fn uniform(&mut self, space: &SearchSpace, rng: &mut SeededRng) -> Option<u64> {
        for _ in 0..MAX_REJECTIONS {
            if self.len() >= space.len() {
                return None;
            }
            let combo = below(rng, space.len());
            if self.take(space, combo) {
                return Some(combo);
            }
        }
        None
    }
}
