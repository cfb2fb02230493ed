//! Asks the browser for subgroups on wgpu's behalf. wgpu 30's WebGPU backend has no entry for the
//! `subgroups` feature in its feature table, so it can neither see it nor request it, although
//! Chromium offers it (SwiftShader included, 4 lanes). Before wgpu requests its device,
//! `GPUAdapter.prototype.requestDevice` is wrapped to add "subgroups" where the adapter has it, and to
//! note whether the device was granted it. Kernels that use subgroups (`enable subgroups;`) check
//! [`granted`]; wgpu passes WGSL to the browser unchanged, so nothing else needs to know.

use wasm_bindgen::prelude::wasm_bindgen;

#[wasm_bindgen(inline_js = r#"
let granted = false;
export function install() {
  if (typeof GPUAdapter === "undefined" || GPUAdapter.prototype.requestDevice.attentionLab) return;
  const original = GPUAdapter.prototype.requestDevice;
  const wrapped = async function (descriptor) {
    granted = false;
    if (!this.features.has("subgroups")) return original.call(this, descriptor);
    const features = [...(descriptor?.requiredFeatures ?? []), "subgroups"];
    let device;
    try {
      device = await original.call(this, { ...descriptor, requiredFeatures: features });
    } catch {
      return original.call(this, descriptor); // as wgpu asked, without subgroups
    }
    granted = device.features.has("subgroups");
    return device;
  };
  wrapped.attentionLab = true;
  GPUAdapter.prototype.requestDevice = wrapped;
}
export function granted_subgroups() { return granted; }
"#)]
extern "C" {
    /// Wraps `requestDevice` (once per page); call before the device is requested.
    pub fn install();
    fn granted_subgroups() -> bool;
}

/// Whether the last device requested since [`install`] has subgroups.
pub fn granted() -> bool {
    granted_subgroups()
}
