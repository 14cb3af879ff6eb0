//! [`DeviceScreen`]: a split's value as a device places sets against it (the screen
//! kernel's uniform, host and shader alike), its kinds and the range of its constants,
//! and [`DeviceScreen::place`], the kernel's arithmetic operation for operation (the
//! reasons are in `device.rs`'s module docs). `Screen::for_device` (`screen.rs`) makes one.

use crate::lanes::Q_MIN;

/// [`DeviceScreen::kind`]: place against the ratio.
pub const RATIO: u32 = 0;
/// [`DeviceScreen::kind`]: the value is NaN. "Above" says only that a set is surely not NaN.
pub const NOT_NAN: u32 = 1;
/// [`DeviceScreen::kind`]: place nothing.
pub const NOTHING: u32 = 2;

/// A split's value as the device places sets against it (`screen.rs`'s constants, see
/// there): for t < 0 `sign` is −1 and the answers are swapped (`mirrored` = 1).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeviceScreen {
    /// [`RATIO`], [`NOT_NAN`] or [`NOTHING`].
    pub kind: u32,
    pub mirrored: u32,
    pub sign: f32,
    pub c1_up: f32,
    pub c2_dn: f32,
    pub c1_dn: f32,
    pub c2_up: f32,
    pub varies: f32,
}

/// The least and the greatest constant a device places by (module docs).
pub(crate) const LEAST_CONSTANT: f32 = 1.0 / (1u32 << 20) as f32;
pub(crate) const GREATEST_CONSTANT: f32 = (1u64 << 40) as f32;

impl DeviceScreen {
    /// Where a set with f32 sums `a` (Σr) and `q` (Σr²) of a combo with `slack` lies:
    /// (surely below the value or NaN, surely above it and not NaN). The kernel's
    /// arithmetic, operation for operation.
    pub fn place(&self, a: f32, q: f32, slack: f32) -> (bool, bool) {
        if slack < 0.0 {
            return (false, false);
        }
        let a = a * self.sign;
        let mag = a.abs() + slack;
        let varies = mag * mag < q * self.varies && q >= Q_MIN;
        match self.kind {
            RATIO => {}
            NOT_NAN => return (false, varies),
            _ => return (false, false),
        }
        let (hi, lo) = (a + slack, a - slack);
        let less = hi * hi * self.c1_up < q * self.c2_dn;
        let more = q * self.c2_up < lo * lo * self.c1_dn;
        let under = a <= -slack || (varies && less);
        let over = varies && slack < a && more;
        if self.mirrored == 0 { (under, over) } else { (over, under && varies) }
    }
}
