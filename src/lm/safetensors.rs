//! Reading a safetensors file: 8 bytes of little-endian header length, a JSON header that names each
//! tensor's dtype, shape and byte range within the data, then the data. Every size is checked
//! against the file before anything is allocated, so a malformed or hostile file is an error, never a
//! panic or a huge allocation.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::LmError;

/// A header longer than this is not a checkpoint this app can load (real ones are a few hundred KB).
const MAX_HEADER_BYTES: u64 = 16 << 20;

/// Element types the app unpacks to f32, defined beside the widening twin (the floor below).
pub use crate::cpu::widen::{TensorDType, to_f32};

/// The element type a header names, if the app reads it.
fn parse_dtype(name: &str) -> Option<TensorDType> {
    Some(match name {
        "F16" => TensorDType::F16,
        "BF16" => TensorDType::Bf16,
        "F32" => TensorDType::F32,
        _ => return None,
    })
}

/// Where one tensor lies in the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: TensorDType,
    pub shape: Vec<usize>,
    /// Byte range within the data section (after the header): u64, as files outgrow wasm32's usize.
    pub start: u64,
    pub end: u64,
}

impl TensorInfo {
    /// Checked against the file when the header was read, so the product fits (in u64: on wasm32 a
    /// large file's tensor can pass usize).
    pub fn elements(&self) -> u64 {
        self.shape.iter().map(|&n| n as u64).product()
    }
}

/// The tensors a safetensors file's header names, read without its data: what a streamed load
/// plans from (the header is a few hundred KB, the data gigabytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Where the data section starts in the file: 8 + the header's length.
    pub data_start: u64,
    pub tensors: BTreeMap<String, TensorInfo>,
}

impl Header {
    /// The header's length from the file's first 8 bytes, checked against the file's length.
    pub fn json_len(first8: [u8; 8], file_len: u64) -> Result<u64, LmError> {
        let header_len = u64::from_le_bytes(first8);
        if header_len > MAX_HEADER_BYTES || header_len > file_len.saturating_sub(8) {
            return Err(bad(format!("its header length {header_len} does not fit the file")));
        }
        Ok(header_len)
    }

    /// Parses the header JSON (the `json_len` bytes after the first 8) of a file of `file_len` bytes.
    pub fn parse(json: &[u8], file_len: u64) -> Result<Header, LmError> {
        let data_start = 8 + json.len() as u64;
        let data_len = file_len.checked_sub(data_start).ok_or_else(|| bad("its header does not fit the file"))?;
        let header: Value = serde_json::from_slice(json).map_err(|e| bad(format!("its header is not JSON: {e}")))?;
        let entries = header.as_object().ok_or_else(|| bad("its header is not a JSON object"))?;
        let mut tensors = BTreeMap::new();
        for (name, entry) in entries.iter().filter(|(name, _)| name.as_str() != "__metadata__") {
            tensors.insert(name.clone(), tensor_info(name, entry, data_len)?);
        }
        Ok(Header { data_start, tensors })
    }
}

/// A parsed safetensors file borrowing its bytes.
pub struct SafeTensors<'a> {
    data: &'a [u8],
    tensors: BTreeMap<String, TensorInfo>,
}

impl<'a> SafeTensors<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self, LmError> {
        let first8 = bytes.first_chunk::<8>().ok_or_else(|| bad("shorter than its 8-byte header length"))?;
        let json_len = Header::json_len(*first8, bytes.len() as u64)? as usize;
        let header = Header::parse(&bytes[8..8 + json_len], bytes.len() as u64)?;
        Ok(Self { data: &bytes[8 + json_len..], tensors: header.tensors })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    /// The tensor `name` as f32, checked to have `shape`.
    pub fn f32_tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LmError> {
        let info = self.info(name).ok_or_else(|| LmError(format!("the checkpoint has no tensor {name}")))?;
        if info.shape != shape {
            return Err(LmError(format!("tensor {name} has shape {:?}, expected {shape:?}", info.shape)));
        }
        Ok(to_f32(info.dtype, &self.data[info.start as usize..info.end as usize]))
    }
}

/// Where a loader takes each tensor, as f32 and checked for its shape: a file, or its tensors already
/// widened ([`Widening`]).
pub trait TensorSource {
    fn f32_tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LmError>;
}

impl TensorSource for SafeTensors<'_> {
    fn f32_tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LmError> {
        SafeTensors::f32_tensor(self, name, shape)
    }
}

/// Tensors by name: each one's shape and values as f32.
type WidenedTensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// Every tensor of a file widened to f32, at most `step_elements` values a step (`step` while it says
/// there is more, then `finish`): how the page keeps a dropped checkpoint in memory while letting the
/// browser in (a 16 MB checkpoint loaded in one piece held the page for 206 ms in the browser tests,
/// under load).
pub struct Widening<'a> {
    file: SafeTensors<'a>,
    names: Vec<String>,
    /// The tensor being widened, and what is done of all of them.
    next: usize,
    done: WidenedTensors,
    step_elements: usize,
}

impl<'a> Widening<'a> {
    /// Refuses a file whose tensors share bytes: widened, such a file could ask for far more memory
    /// than it holds (many names over one range), where tensors that do not overlap widen to at most
    /// 4 bytes per byte of the file.
    pub fn new(file: SafeTensors<'a>, step_elements: usize) -> Result<Self, LmError> {
        let claimed: u64 = file.tensors.values().map(|t| t.end - t.start).sum();
        if claimed > file.data.len() as u64 {
            return Err(LmError(format!(
                "its tensors claim {claimed} bytes of a {}-byte data section: some share bytes",
                file.data.len()
            )));
        }
        let names = file.tensors.keys().cloned().collect();
        Ok(Widening { file, names, next: 0, done: BTreeMap::new(), step_elements: step_elements.max(1) })
    }

    /// Widens up to `step_elements` more values; `false` once every tensor is done.
    pub fn step(&mut self) -> bool {
        let mut budget = self.step_elements;
        while let Some(name) = self.names.get(self.next) {
            let info = &self.file.tensors[name];
            let total = info.elements() as usize;
            let (_, values) =
                self.done.entry(name.clone()).or_insert_with(|| (info.shape.clone(), Vec::with_capacity(total)));
            let take = (total - values.len()).min(budget);
            let width = info.dtype.bytes();
            let start = info.start as usize + values.len() * width;
            values.extend(to_f32(info.dtype, &self.file.data[start..start + take * width]));
            budget -= take;
            if values.len() < total {
                return true;
            }
            self.next += 1;
            if budget == 0 {
                break;
            }
        }
        self.next < self.names.len()
    }

    pub fn finish(self) -> Widened {
        Widened(RefCell::new(self.done))
    }
}

/// A file's tensors as f32 ([`Widening`]'s result): each is handed out once, moved, not copied.
pub struct Widened(RefCell<WidenedTensors>);

impl Widened {
    /// The tensors of a checkpoint's shards as one source; a name found in two shards is refused
    /// (which copy the model should read would be a guess).
    pub fn join(shards: Vec<Widened>) -> Result<Widened, LmError> {
        let mut all = WidenedTensors::new();
        for shard in shards {
            for (name, tensor) in shard.0.into_inner() {
                if all.insert(name.clone(), tensor).is_some() {
                    return Err(LmError(format!("tensor {name} is in two of the weights files")));
                }
            }
        }
        Ok(Widened(RefCell::new(all)))
    }
}

impl TensorSource for Widened {
    fn f32_tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LmError> {
        let mut tensors = self.0.borrow_mut();
        let (found, _) = tensors.get(name).ok_or_else(|| LmError(format!("the checkpoint has no tensor {name}")))?;
        if found != shape {
            return Err(LmError(format!("tensor {name} has shape {found:?}, expected {shape:?}")));
        }
        Ok(tensors.remove(name).map(|(_, values)| values).unwrap_or_default())
    }
}

fn bad(why: impl std::fmt::Display) -> LmError {
    LmError(format!("This is not a readable safetensors file: {why}"))
}

/// One header entry: `{"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}`, checked
/// against the data section's length `data_len`.
fn tensor_info(name: &str, entry: &Value, data_len: u64) -> Result<TensorInfo, LmError> {
    let entry: &Map<String, Value> = entry.as_object().ok_or_else(|| bad(format!("{name} is not an object")))?;
    let dtype_name = entry.get("dtype").and_then(Value::as_str).unwrap_or("(none)");
    let dtype = parse_dtype(dtype_name)
        .ok_or_else(|| LmError(format!("tensor {name} is {dtype_name}; only F16, BF16 and F32 are read")))?;
    let numbers = |key: &str| -> Result<Vec<u64>, LmError> {
        let list = entry.get(key).and_then(Value::as_array).ok_or_else(|| bad(format!("{name} has no {key}")))?;
        list.iter().map(|v| v.as_u64().ok_or_else(|| bad(format!("{name}.{key}")))).collect()
    };
    let shape = numbers("shape")?
        .into_iter()
        .map(|n| usize::try_from(n).map_err(|_| bad(format!("{name}.shape"))))
        .collect::<Result<Vec<usize>, _>>()?;
    let offsets = numbers("data_offsets")?;
    let [start, end] = offsets[..] else { return Err(bad(format!("{name}.data_offsets is not [begin, end]"))) };
    let bytes = shape.iter().try_fold(dtype.bytes() as u64, |n, &d| n.checked_mul(d as u64));
    if start > end || end > data_len || bytes != Some(end - start) {
        return Err(bad(format!("{name}'s byte range {start}..{end} does not match its shape {shape:?} and the file")));
    }
    Ok(TensorInfo { dtype, shape, start, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with the given header JSON and data bytes.
    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reads_each_dtype_exactly() {
        // 1.5 in f16 is 0x3E00, in bf16 0x3FC0; -2.25 in f32.
        let mut data = vec![0x00, 0x3E, 0xC0, 0x3F];
        data.extend_from_slice(&(-2.25f32).to_le_bytes());
        let header = r#"{"__metadata__":{"format":"pt"},
            "a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},
            "b":{"dtype":"BF16","shape":[1,1],"data_offsets":[2,4]},
            "c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        let bytes = file(header, &data);
        let st = SafeTensors::parse(&bytes).unwrap();
        assert_eq!(st.names().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(st.f32_tensor("a", &[1]).unwrap(), [1.5]);
        assert_eq!(st.f32_tensor("b", &[1, 1]).unwrap(), [1.5]);
        assert_eq!(st.f32_tensor("c", &[1]).unwrap(), [-2.25]);
        assert!(st.f32_tensor("b", &[1]).unwrap_err().0.contains("shape [1, 1], expected [1]"));
        assert!(st.f32_tensor("d", &[1]).unwrap_err().0.contains("no tensor d"));
    }

    #[test]
    fn widening_in_steps_gives_each_tensor_as_one_read_would() {
        // a: 3 f16 values (1, -2, 0.5 = 0x3C00, 0xC000, 0x3800), b: 2 bf16 (1.5 = 0x3FC0, 3 = 0x4040),
        // e: none; steps of 2 values split a across two steps.
        let data = [0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38, 0xC0, 0x3F, 0x40, 0x40];
        let header = r#"{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},
            "b":{"dtype":"BF16","shape":[1,2],"data_offsets":[6,10]},
            "e":{"dtype":"F32","shape":[0],"data_offsets":[10,10]}}"#;
        let bytes = file(header, &data);
        let mut widening = Widening::new(SafeTensors::parse(&bytes).unwrap(), 2).unwrap();
        let mut steps = 1;
        while widening.step() {
            steps += 1;
        }
        assert_eq!(steps, 3);
        let widened = widening.finish();
        assert_eq!(widened.f32_tensor("a", &[3]).unwrap(), [1.0, -2.0, 0.5]);
        assert!(widened.f32_tensor("b", &[2]).unwrap_err().0.contains("shape [1, 2], expected [2]"));
        assert_eq!(widened.f32_tensor("b", &[1, 2]).unwrap(), [1.5, 3.0]);
        assert_eq!(widened.f32_tensor("e", &[0]).unwrap(), [0.0; 0]);
        // Handed out once: a second read finds nothing.
        assert!(widened.f32_tensor("a", &[3]).unwrap_err().0.contains("no tensor a"));
    }

    #[test]
    fn shards_join_into_one_source_and_a_name_in_two_is_refused() {
        let widened = |header: &str, data: &[u8]| {
            let bytes = file(header, data);
            let mut w = Widening::new(SafeTensors::parse(&bytes).unwrap(), 8).unwrap();
            while w.step() {}
            w.finish()
        };
        // a: f16 1.0 (0x3C00) in one shard; b: f16 -2.0 (0xC000) in the other.
        let a = r#"{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#;
        let b = r#"{"b":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#;
        let joined = Widened::join(vec![widened(a, &[0x00, 0x3C]), widened(b, &[0x00, 0xC0])]).unwrap();
        assert_eq!(
            (joined.f32_tensor("a", &[1]).unwrap(), joined.f32_tensor("b", &[1]).unwrap()),
            (vec![1.0], vec![-2.0])
        );
        let twice = Widened::join(vec![widened(a, &[0x00, 0x3C]), widened(a, &[0x00, 0x3C])]).err().unwrap();
        assert_eq!(twice.0, "tensor a is in two of the weights files");
    }

    #[test]
    fn widening_refuses_tensors_that_share_bytes() {
        // Two names over the same 4 bytes: 8 bytes claimed of 4.
        let header = r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},
            "b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#;
        let bytes = file(header, &[0; 4]);
        let refused = Widening::new(SafeTensors::parse(&bytes).unwrap(), 2).err().unwrap();
        assert_eq!(refused.0, "its tensors claim 8 bytes of a 4-byte data section: some share bytes");
    }

    #[test]
    fn malformed_files_are_errors() {
        let ok = r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![1, 2, 3], "shorter than"),
            (u64::MAX.to_le_bytes().to_vec(), "does not fit"),
            (file("{not json", &[]), "not JSON"),
            (file("[1]", &[]), "not a JSON object"),
            (file(ok, &[0; 3]), "does not match"),
            (file(r#"{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}"#, &[0; 4]), "does not match"),
            (file(r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[4,0]}}"#, &[0; 4]), "does not match"),
            (file(r#"{"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}"#, &[0; 16]), "only F16, BF16"),
            (file(r#"{"a":{"dtype":"F16","shape":[-1],"data_offsets":[0,4]}}"#, &[0; 4]), "a.shape"),
            (file(r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0]}}"#, &[0; 4]), "not [begin, end]"),
            (
                file(r#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}}"#, &[0; 4]),
                "does not match",
            ),
        ];
        for (bytes, why) in cases {
            let err = SafeTensors::parse(&bytes).err().unwrap_or_else(|| panic!("{why}: parsed"));
            assert!(err.0.contains(why), "{why}: {}", err.0);
        }
        assert!(SafeTensors::parse(&file(ok, &[0; 4])).is_ok());
    }
}
