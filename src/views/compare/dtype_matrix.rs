//! The compare view's dtype matrix: every applicable variant's whole cache at every element type,
//! exact bytes in each cell, the link's dtype marked.

use super::CompareParams;
use crate::model::units::{format_bytes, format_thousands};
use crate::model::{DType, Model, Variant, kv_total_bytes};
use crate::views::describe::variant_label;
use crate::views::kv::KvParams;
use crate::views::model_figures::dtype_text;

/// One cell: `value` (the exact bytes, or `overflow`) goes into `data-value`, `title` spells it out.
#[derive(Clone, Debug, PartialEq)]
pub struct DtypeCell {
    pub dtype: DType,
    pub chosen: bool,
    pub value: String,
    pub title: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DtypeRow {
    pub variant_id: String,
    pub label: String,
    pub cells: Vec<DtypeCell>,
}

/// `At every dtype (131,072 tokens)`.
pub fn matrix_heading(kv: &KvParams) -> String {
    format!("At every dtype ({} tokens)", format_thousands(kv.ctx_tokens.into()))
}

/// The column headings, one per dtype: `FP16 (16 bits)`.
pub fn dtype_headings() -> Vec<String> {
    DType::ALL.into_iter().map(dtype_text).collect()
}

pub fn dtype_matrix(base: &Model, params: &CompareParams, kv: &KvParams) -> Vec<DtypeRow> {
    let row = |(variant, model): (Variant, Model)| DtypeRow {
        variant_id: variant.to_string(),
        label: variant_label(variant, base),
        cells: DType::ALL.into_iter().map(|d| dtype_cell(&model, kv, d)).collect(),
    };
    params.applied(base).into_iter().map(row).collect()
}

fn dtype_cell(model: &Model, kv: &KvParams, dtype: DType) -> DtypeCell {
    let bytes = kv_total_bytes(model, kv.ctx_tokens, dtype).ok();
    DtypeCell {
        dtype,
        chosen: dtype == kv.dtype,
        value: bytes.map_or_else(|| "overflow".into(), |b| b.to_string()),
        title: bytes.map(|b| format!("{} bytes", format_thousands(b))).unwrap_or_default(),
        text: bytes.map_or_else(|| "overflow".into(), format_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn llama_3_8b_mha_at_every_dtype() {
        let kv = KvParams { ctx_tokens: 131_072, ..Default::default() };
        assert_eq!(matrix_heading(&kv), "At every dtype (131,072 tokens)");
        assert_eq!(dtype_headings()[0], "FP32 (32 bits)");
        let params = CompareParams { variants: Some(vec![Variant::Mha, Variant::Gqa { groups: 5 }]) };
        let rows = dtype_matrix(preset("llama-3-8b").unwrap(), &params, &kv);
        // GQA 5 cannot be built from 32 heads: one row.
        let [mha] = &rows[..] else { panic!("{rows:?}") };
        assert_eq!(mha.variant_id, "mha");
        let cell = |d: DType| mha.cells.iter().find(|c| c.dtype == d).unwrap();
        // 524,288 B per token × 131,072 = 68,719,476,736 B at FP16 = 64 GiB; INT4 a quarter, INT2 an eighth.
        assert_eq!(cell(DType::Fp16).value, "68719476736");
        assert_eq!(cell(DType::Fp16).title, "68,719,476,736 bytes");
        assert_eq!(cell(DType::Fp16).text, "68.72 GB (64.00 GiB)");
        assert_eq!((cell(DType::Int4).value.as_str(), cell(DType::Int2).value.as_str()), ("17179869184", "8589934592"));
        let chosen: Vec<DType> = mha.cells.iter().filter(|c| c.chosen).map(|c| c.dtype).collect();
        assert_eq!(chosen, [DType::Fp16]);
    }
}
