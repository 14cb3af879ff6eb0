//! [`Vector`]: the f32 operations the screen needs on [`LANES`] lanes at once: one
//! AVX-512 instruction each where the CPU has it (pulp's `V4` token), two AVX2 ones where
//! it has that (`V3`), else lane by lane ([`Portable`]); and [`dispatch`], which runs a
//! [`Pass`] with the best of them once per call. All give the same IEEE results lane by
//! lane (no fused operations), so the screen decides the same everywhere.

use crate::lanes::{LANES, Mask};

/// f32 lanes and their comparisons.
pub(crate) trait Vector: Copy {
    type F: Copy;
    type M: Copy;
    fn load(self, x: &[f32; LANES]) -> Self::F;
    fn splat(self, x: f32) -> Self::F;
    fn add(self, a: Self::F, b: Self::F) -> Self::F;
    fn sub(self, a: Self::F, b: Self::F) -> Self::F;
    fn mul(self, a: Self::F, b: Self::F) -> Self::F;
    fn abs(self, a: Self::F) -> Self::F;
    /// `a < b` (false where either is NaN), likewise the others.
    fn lt(self, a: Self::F, b: Self::F) -> Self::M;
    fn le(self, a: Self::F, b: Self::F) -> Self::M;
    fn ge(self, a: Self::F, b: Self::F) -> Self::M;
    fn and(self, a: Self::M, b: Self::M) -> Self::M;
    fn or(self, a: Self::M, b: Self::M) -> Self::M;
    /// Bit l set where lane l is true.
    fn bits(self, m: Self::M) -> Mask;
}

/// Lane by lane, for CPUs without AVX2 (and to check the vector paths against).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Portable;

impl Portable {
    #[inline(always)]
    fn map<T: Copy>(a: [f32; LANES], b: [f32; LANES], f: impl Fn(f32, f32) -> T) -> [T; LANES] {
        std::array::from_fn(|l| f(a[l], b[l]))
    }
}

impl Vector for Portable {
    type F = [f32; LANES];
    type M = [bool; LANES];
    #[inline(always)]
    fn load(self, x: &[f32; LANES]) -> Self::F {
        *x
    }
    #[inline(always)]
    fn splat(self, x: f32) -> Self::F {
        [x; LANES]
    }
    #[inline(always)]
    fn add(self, a: Self::F, b: Self::F) -> Self::F {
        Self::map(a, b, |x, y| x + y)
    }
    #[inline(always)]
    fn sub(self, a: Self::F, b: Self::F) -> Self::F {
        Self::map(a, b, |x, y| x - y)
    }
    #[inline(always)]
    fn mul(self, a: Self::F, b: Self::F) -> Self::F {
        Self::map(a, b, |x, y| x * y)
    }
    #[inline(always)]
    fn abs(self, a: Self::F) -> Self::F {
        a.map(f32::abs)
    }
    #[inline(always)]
    fn lt(self, a: Self::F, b: Self::F) -> Self::M {
        Self::map(a, b, |x, y| x < y)
    }
    #[inline(always)]
    fn le(self, a: Self::F, b: Self::F) -> Self::M {
        Self::map(a, b, |x, y| x <= y)
    }
    #[inline(always)]
    fn ge(self, a: Self::F, b: Self::F) -> Self::M {
        Self::map(a, b, |x, y| x >= y)
    }
    #[inline(always)]
    fn and(self, a: Self::M, b: Self::M) -> Self::M {
        std::array::from_fn(|l| a[l] & b[l])
    }
    #[inline(always)]
    fn or(self, a: Self::M, b: Self::M) -> Self::M {
        std::array::from_fn(|l| a[l] | b[l])
    }
    #[inline(always)]
    fn bits(self, m: Self::M) -> Mask {
        m.iter().enumerate().fold(0, |bits, (l, &b)| bits | (Mask::from(b) << l))
    }
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx2 {
    use super::{LANES, Mask, Vector};
    use pulp::bytemuck::cast;
    use pulp::x86::V3;
    use pulp::{f32x8, m32x8};

    /// The lanes as two AVX2 vectors, low lanes first.
    type Halves<T> = [T; 2];

    /// `f` on each half.
    #[inline(always)]
    fn each<I: Copy, T>(a: Halves<I>, b: Halves<I>, f: impl Fn(I, I) -> T) -> Halves<T> {
        [f(a[0], b[0]), f(a[1], b[1])]
    }

    impl Vector for V3 {
        type F = Halves<f32x8>;
        type M = Halves<m32x8>;
        #[inline(always)]
        fn load(self, x: &[f32; LANES]) -> Self::F {
            cast(*x)
        }
        #[inline(always)]
        fn splat(self, x: f32) -> Self::F {
            [self.splat_f32x8(x); 2]
        }
        #[inline(always)]
        fn add(self, a: Self::F, b: Self::F) -> Self::F {
            each(a, b, |x, y| self.add_f32x8(x, y))
        }
        #[inline(always)]
        fn sub(self, a: Self::F, b: Self::F) -> Self::F {
            each(a, b, |x, y| self.sub_f32x8(x, y))
        }
        #[inline(always)]
        fn mul(self, a: Self::F, b: Self::F) -> Self::F {
            each(a, b, |x, y| self.mul_f32x8(x, y))
        }
        #[inline(always)]
        fn abs(self, a: Self::F) -> Self::F {
            a.map(|x| self.abs_f32x8(x))
        }
        #[inline(always)]
        fn lt(self, a: Self::F, b: Self::F) -> Self::M {
            each(a, b, |x, y| self.cmp_lt_f32x8(x, y))
        }
        #[inline(always)]
        fn le(self, a: Self::F, b: Self::F) -> Self::M {
            each(a, b, |x, y| self.cmp_le_f32x8(x, y))
        }
        #[inline(always)]
        fn ge(self, a: Self::F, b: Self::F) -> Self::M {
            each(a, b, |x, y| self.cmp_ge_f32x8(x, y))
        }
        #[inline(always)]
        fn and(self, a: Self::M, b: Self::M) -> Self::M {
            each(a, b, |x, y| self.and_m32x8(x, y))
        }
        #[inline(always)]
        fn or(self, a: Self::M, b: Self::M) -> Self::M {
            each(a, b, |x, y| self.or_m32x8(x, y))
        }
        #[inline(always)]
        fn bits(self, m: Self::M) -> Mask {
            let half = |m: m32x8| self.avx._mm256_movemask_ps(cast(m)) as Mask;
            half(m[0]) | half(m[1]) << (LANES / 2)
        }
    }
}

/// Work that runs on some [`Vector`].
pub(crate) trait Pass {
    type Output;
    fn run<V: Vector>(self, v: V) -> Self::Output;
}

/// Runs `pass` with AVX-512, else AVX2, where the CPU has it (compiled for it: pulp's
/// `vectorize`), else lane by lane.
pub(crate) fn dispatch<P: Pass>(pass: P) -> P::Output {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        if let Some(v4) = pulp::x86::V4::try_new() {
            return v4.vectorize(With(pass, v4));
        }
        if let Some(v3) = pulp::x86::V3::try_new() {
            return v3.vectorize(With(pass, v3));
        }
    }
    pass.run(Portable)
}

/// A pass and the vector it runs on, as pulp's `vectorize` calls it.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
struct With<P, V>(P, V);

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
impl<P: Pass, V: Vector> pulp::NullaryFnOnce for With<P, V> {
    type Output = P::Output;
    #[inline(always)]
    fn call(self) -> P::Output {
        self.0.run(self.1)
    }
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx512 {
    use super::{LANES, Mask, Vector};
    use pulp::bytemuck::cast;
    use pulp::x86::V4;
    use pulp::{b16, f32x16};

    impl Vector for V4 {
        type F = f32x16;
        type M = b16;
        #[inline(always)]
        fn load(self, x: &[f32; LANES]) -> Self::F {
            cast(*x)
        }
        #[inline(always)]
        fn splat(self, x: f32) -> Self::F {
            self.splat_f32x16(x)
        }
        #[inline(always)]
        fn add(self, a: Self::F, b: Self::F) -> Self::F {
            self.add_f32x16(a, b)
        }
        #[inline(always)]
        fn sub(self, a: Self::F, b: Self::F) -> Self::F {
            self.sub_f32x16(a, b)
        }
        #[inline(always)]
        fn mul(self, a: Self::F, b: Self::F) -> Self::F {
            self.mul_f32x16(a, b)
        }
        #[inline(always)]
        fn abs(self, a: Self::F) -> Self::F {
            self.abs_f32x16(a)
        }
        #[inline(always)]
        fn lt(self, a: Self::F, b: Self::F) -> Self::M {
            self.cmp_lt_f32x16(a, b)
        }
        #[inline(always)]
        fn le(self, a: Self::F, b: Self::F) -> Self::M {
            self.cmp_le_f32x16(a, b)
        }
        #[inline(always)]
        fn ge(self, a: Self::F, b: Self::F) -> Self::M {
            self.cmp_ge_f32x16(a, b)
        }
        #[inline(always)]
        fn and(self, a: Self::M, b: Self::M) -> Self::M {
            b16(a.0 & b.0)
        }
        #[inline(always)]
        fn or(self, a: Self::M, b: Self::M) -> Self::M {
            b16(a.0 | b.0)
        }
        #[inline(always)]
        fn bits(self, m: Self::M) -> Mask {
            Mask::from(m.0)
        }
    }
}
