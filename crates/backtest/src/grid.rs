//! [`Grid`]: a strategy's parameter grid, every value checked against the schema, and
//! the numbering of its combos (docs/strategies.md's order, the last parameter varying
//! fastest). Sweeps, samples, books and searches all number combos through it.

use crate::error::BacktestError;
use crate::param::{Axis, MAX_PARAMS, ParamValues};
use crate::strategy::Strategy;

/// A strategy's parameter grid: one list of values per parameter (schema order), every
/// value checked against the schema. Combos are the Cartesian product in docs/strategies.md's
/// order (the last parameter varying fastest); a combo's number is its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    strategy: Strategy,
    axes: Vec<Vec<f64>>,
    /// A fresh cursor over the axes: the combo count, and the decoding of a combo number.
    positions: GridCursor,
}

impl Grid {
    /// Checks one non-empty list per parameter, every value in the schema's range, and a
    /// combo count that fits in 64 bits.
    pub fn new(strategy: Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
        let schema = strategy.schema();
        let combo = |problem: String| BacktestError::Combo { strategy: strategy.name().to_owned(), problem };
        if axes.len() != schema.len() {
            return Err(combo(format!("{} parameter lists given for {} parameters", axes.len(), schema.len())));
        }
        for (spec, values) in schema.iter().zip(axes) {
            if values.is_empty() {
                return Err(BacktestError::EmptyAxis { param: spec.name.clone() });
            }
            for &v in values {
                spec.check(v)?;
            }
        }
        Self::counted(strategy, axes.to_vec())
    }

    /// The grid a request names: the strategy's own grid (each parameter's `grid` in its
    /// rule file, else its default) when `axes` is `None`; else every parameter at its
    /// default but those `axes` names, each axis resolved and checked here, once.
    pub fn resolve(strategy: Strategy, axes: Option<&[(String, Axis)]>) -> Result<Self, BacktestError> {
        let Some(named) = axes else {
            let axes = strategy.default_axes();
            return Self::new(strategy, &axes);
        };
        let mut axes: Vec<Vec<f64>> = strategy.schema().iter().map(|p| vec![p.default]).collect();
        for (k, (name, axis)) in named.iter().enumerate() {
            if let Some((_, first)) = named[..k].iter().find(|(other, _)| other == name) {
                return Err(BacktestError::Axis(format!(
                    "{name} is given twice ({name}={first} and {name}={axis}): give each parameter once, with all its values"
                )));
            }
            let i = strategy.param_index(name)?;
            axes[i] = strategy.schema()[i].axis(axis)?;
        }
        Self::counted(strategy, axes)
    }

    /// A grid of checked axes: only the combo count is left to check.
    fn counted(strategy: Strategy, axes: Vec<Vec<f64>>) -> Result<Self, BacktestError> {
        let len =
            axes.iter().try_fold(1u64, |n, a| n.checked_mul(a.len() as u64)).ok_or_else(|| BacktestError::Combo {
                strategy: strategy.name().to_owned(),
                problem: "the grid has more than 2^64 combos; narrow it or use --random N".into(),
            })?;
        let positions = GridCursor::new(axes.iter().map(Vec::len));
        debug_assert_eq!(positions.combos, len);
        Ok(Self { strategy, axes, positions })
    }

    /// The combo number of a parameter set, each value found on its axis; `None` when a
    /// value is not on the grid.
    pub fn combo_of(&self, values: &[f64]) -> Option<u64> {
        if values.len() != self.axes.len() {
            return None;
        }
        values.iter().zip(&self.axes).try_fold(0u64, |combo, (&v, axis)| {
            let k = axis.iter().position(|&a| a == v)?;
            Some(combo * axis.len() as u64 + k as u64)
        })
    }

    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    /// The parameter lists, schema order.
    pub fn axes(&self) -> &[Vec<f64>] {
        &self.axes
    }

    /// Combos in the grid.
    pub fn len(&self) -> u64 {
        self.positions.combos
    }

    /// Always false: every axis holds a value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Axis positions of combo number `combo` (the unused tail is 0). Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`Grid::len`] (a caller's bug).
    pub fn index(&self, combo: u64) -> [usize; MAX_PARAMS] {
        self.positions.decode(combo)
    }

    /// A [`GridCursor`] over this grid's combos.
    pub fn cursor(&self) -> GridCursor {
        self.positions.clone()
    }

    /// The parameter values of combo number `combo` (schema order). Allocation-free.
    pub fn values(&self, combo: u64) -> ParamValues {
        self.values_at(&self.index(combo)[..self.axes.len()])
    }

    /// The parameter values at axis positions `index`.
    #[inline]
    pub fn values_at(&self, index: &[usize]) -> ParamValues {
        ParamValues::from_fn(index.len().min(self.axes.len()), |i| self.axes[i][index[i]])
    }
}

/// Axis positions of combos visited one after another: a combo one past the previous one
/// steps the positions like an odometer, any other is decoded by division. A chunk's rows
/// mostly run on, so they cost no 64-bit division per parameter (which was a tenth of
/// writing a big grid's results).
#[derive(Debug, Clone, PartialEq)]
pub struct GridCursor {
    lens: [u64; MAX_PARAMS],
    axes: usize,
    combos: u64,
    last: Option<u64>,
    index: [usize; MAX_PARAMS],
}

impl GridCursor {
    /// A cursor over the grid whose axes hold `lens` values (schema order).
    ///
    /// # Panics
    /// If there are more than [`MAX_PARAMS`] axes.
    pub fn new(lens: impl IntoIterator<Item = usize>) -> Self {
        let mut axes = [0u64; MAX_PARAMS];
        let mut n = 0;
        for len in lens {
            axes[n] = len as u64;
            n += 1;
        }
        let combos = axes[..n].iter().fold(1u64, |c, &l| c.saturating_mul(l));
        Self { lens: axes, axes: n, combos, last: None, index: [0; MAX_PARAMS] }
    }

    /// Axis positions of combo number `combo`, as [`Grid::index`] gives them.
    ///
    /// # Panics
    /// If `combo` is past the grid (a caller's bug).
    #[inline]
    pub fn index(&mut self, combo: u64) -> &[usize] {
        if self.last.is_some_and(|last| last + 1 == combo && combo < self.combos) {
            for i in (0..self.axes).rev() {
                self.index[i] += 1;
                if (self.index[i] as u64) < self.lens[i] {
                    break;
                }
                self.index[i] = 0;
            }
        } else {
            self.index = self.decode(combo);
        }
        self.last = Some(combo);
        &self.index[..self.axes]
    }

    fn decode(&self, combo: u64) -> [usize; MAX_PARAMS] {
        assert!(combo < self.combos, "combo {combo} of a {}-combo grid", self.combos);
        let mut index = [0usize; MAX_PARAMS];
        let mut rest = combo;
        for i in (0..self.axes).rev() {
            index[i] = (rest % self.lens[i]) as usize;
            rest /= self.lens[i];
        }
        index
    }
}
