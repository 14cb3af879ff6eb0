//! A WGSL compute [`Kernel`] and what its source declares, read with the shader compiler
//! (naga): each entry point's workgroup size, which the host dispatches by, so that the
//! size lives in the WGSL alone; and each struct's layout and each constant, which tests
//! compare with the host side so that a struct or constant shared with a kernel cannot
//! drift.

use crate::error::GpuError;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use wgpu::naga;

/// A parsed WGSL source.
#[derive(Debug)]
pub struct ShaderInfo {
    module: naga::Module,
}

impl ShaderInfo {
    /// Parses `source`, or says why it does not parse.
    pub fn parse(source: &str) -> Result<Self, String> {
        naga::front::wgsl::parse_str(source).map(|module| Self { module }).map_err(|e| e.emit_to_string(source))
    }

    /// The workgroup size of entry point `entry`.
    pub fn workgroup_size(&self, entry: &str) -> Option<[u32; 3]> {
        self.module.entry_points.iter().find(|e| e.name == entry).map(|e| e.workgroup_size)
    }

    /// Struct `name` as the compiler lays it out: its size in bytes and each member's
    /// name and byte offset, in order.
    pub fn struct_layout(&self, name: &str) -> Option<(u32, Vec<(String, u32)>)> {
        self.module.types.iter().find_map(|(_, ty)| match &ty.inner {
            naga::TypeInner::Struct { members, span } if ty.name.as_deref() == Some(name) => {
                Some((*span, members.iter().map(|m| (m.name.clone().unwrap_or_default(), m.offset)).collect()))
            }
            _ => None,
        })
    }

    /// The value of `const name: u32` (or an abstract integer constant).
    pub fn constant_u32(&self, name: &str) -> Option<u32> {
        let (_, constant) = self.module.constants.iter().find(|(_, c)| c.name.as_deref() == Some(name))?;
        match self.module.global_expressions[constant.init] {
            naga::Expression::Literal(naga::Literal::U32(v)) => Some(v),
            naga::Expression::Literal(naga::Literal::AbstractInt(v)) => u32::try_from(v).ok(),
            _ => None,
        }
    }
}

/// The workgroup size (x) a kernel's WGSL declares for its entry point, read once per kernel.
pub fn workgroup_size(kernel: &Kernel) -> Result<u32, GpuError> {
    static SIZES: OnceLock<Mutex<HashMap<&'static str, u32>>> = OnceLock::new();
    let mut sizes = SIZES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&size) = sizes.get(kernel.name) {
        return Ok(size);
    }
    let size = ShaderInfo::parse(kernel.source)
        .map_err(|e| GpuError::Validation(format!("{}: {e}", kernel.name)))?
        .workgroup_size(kernel.entry)
        .ok_or_else(|| GpuError::Validation(format!("{}: no entry point {}", kernel.name, kernel.entry)))?[0];
    sizes.insert(kernel.name, size);
    Ok(size)
}

/// A WGSL compute kernel: a name (the pipeline cache key), its source and entry point.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    pub name: &'static str,
    pub source: &'static str,
    pub entry: &'static str,
}
