//! Pure arithmetic of attention layouts: no wgpu, no web-sys, tested natively.
