//! Owner of `shaders/kv_quant.wgsl`: a cached K or V rounded in place to the values a quantised
//! cache stores (quantised and dequantised in one pass, so attention reads what a kernel
//! dequantising on read would). The buffer stays f32: the bytes a scheme saves are computed
//! (`model::kv_quant`), not allocated.

use bytemuck::{Pod, Zeroable};

use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};
use crate::model::kv_quant::{KvLayout, QuantPass, Rounding};

/// Keep in sync with `Params` in `shaders/kv_quant.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct KvQuantParams {
    pub heads: u32,
    pub tokens: u32,
    pub d: u32,
    pub head_stride: u32,
    pub token_stride: u32,
    pub box_h: u32,
    pub box_t: u32,
    pub box_c: u32,
    pub n_t: u32,
    pub n_c: u32,
    pub groups: u32,
    /// 0: a float format; 1: symmetric integers; 2: asymmetric integers, f16 scale and min.
    pub kind: u32,
    pub mantissa: u32,
    pub min_exp: i32,
    pub max_value: f32,
    pub scaled: u32,
    pub levels: u32,
    pub _pad: [u32; 3],
}

/// Invocations per workgroup (the shader's `WG`), which share one group's values.
const WORKGROUP: u32 = 64;

pub struct KvQuant {
    launcher: Launcher<Self>,
}

impl Kernel for KvQuant {
    const NAME: &'static str = "kv_quant";
    const SOURCE: &'static str = include_str!("../../shaders/kv_quant.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = KvQuantParams;

    /// One workgroup per group of values that share a scale.
    fn workgroups(p: &KvQuantParams) -> Option<u64> {
        Some(u64::from(p.groups))
    }
}

impl KvQuant {
    pub fn new(ctx: &GpuContext) -> Self {
        Self { launcher: Launcher::new(ctx) }
    }

    /// Prepares `pass` over `x` laid out as `layout`; `None` where it rounds nothing (no tokens old
    /// enough for KIVI's groups yet).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &wgpu::Buffer,
        layout: KvLayout,
        pass: &QuantPass,
    ) -> Result<Option<Dispatch>, GpuError> {
        let params = params(layout, pass, x.size() / 4)?;
        if params.groups == 0 {
            return Ok(None);
        }
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[x]).map(Some)
    }
}

/// The launch's params, after checking that every value of `layout` lies within `floats`.
pub fn params(layout: KvLayout, pass: &QuantPass, floats: u64) -> Result<KvQuantParams, GpuError> {
    let KvLayout { heads, tokens, d, head_stride, token_stride } = layout;
    let tokens = pass.tokens.min(tokens);
    let last = |n: u32, stride: u32| u64::from(n.saturating_sub(1)) * u64::from(stride);
    let end = last(heads, head_stride) + last(tokens, token_stride) + u64::from(d);
    let groups = u32::try_from(pass.groups(&layout)).ok();
    let (Some(groups), true) = (groups, heads == 0 || tokens == 0 || d == 0 || end <= floats) else {
        return Err(GpuError::InvalidInput(format!(
            "kv_quant: {heads} heads x {tokens} tokens x {d} values (strides {head_stride}, {token_stride}) \
             do not fit {floats} floats"
        )));
    };
    let [_, n_t, n_c] = pass.boxes(&layout);
    let [box_h, box_t, box_c] =
        [(pass.boxed[0], heads), (pass.boxed[1], tokens), (pass.boxed[2], d)].map(|(b, n)| b.clamp(1, n.max(1)));
    let mut p = KvQuantParams {
        heads,
        tokens,
        d,
        head_stride,
        token_stride,
        box_h,
        box_t,
        box_c,
        n_t,
        n_c,
        groups,
        ..Default::default()
    };
    match pass.rounding {
        Rounding::Float { mantissa, min_exp, max, scaled } => {
            (p.kind, p.mantissa, p.min_exp, p.max_value, p.scaled) = (0, mantissa, min_exp, max, u32::from(scaled));
        }
        Rounding::Symmetric { levels } => (p.kind, p.levels) = (1, levels),
        Rounding::Asymmetric { levels } => (p.kind, p.levels) = (2, levels),
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::{KvScheme, KvTensor};

    #[test]
    fn params_are_80_bytes() {
        assert_eq!(size_of::<KvQuantParams>(), 80);
    }

    #[test]
    fn params_of_int4_g16_and_a_layout_past_its_buffer() {
        // 2 heads x 10 tokens x 32, heads first: 2 x 10 x 2 = 40 groups of 16 channels.
        let layout = KvLayout { heads: 2, tokens: 10, d: 32, head_stride: 320, token_stride: 32 };
        let pass = KvScheme::IntGroup { bits: 4, group: 16 }.pass(KvTensor::K, 10).unwrap();
        let p = params(layout, &pass, 640).unwrap();
        assert_eq!((p.groups, p.n_t, p.n_c, p.box_h, p.box_t, p.box_c, p.kind, p.levels), (40, 10, 2, 1, 1, 16, 2, 15));
        // The last value is at 320 + 9 x 32 + 31 = 639: 639 floats are one short.
        assert!(params(layout, &pass, 639).is_err());
    }
}
