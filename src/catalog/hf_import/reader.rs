//! Reading fields: the text config first and the top level as fallback, every value read noted in
//! the report, and numbers coerced and range-checked into clear [`ImportError`]s.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::report::{ImportError, ImportReport, invalid};

/// Short JSON text of a value for the report (long arrays are abbreviated).
pub(super) fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 { format!("{}…", s.chars().take(57).collect::<String>()) } else { s }
}

/// A non-negative integer, accepting integral floats such as `4096.0`.
pub(super) fn as_count(v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    if v.as_i64().is_some_and(|n| n < 0) {
        return Err(format!("{} is negative", show(v)));
    }
    if let Some(f) = v.as_f64() {
        if f < 0.0 {
            return Err(format!("{} is negative", show(v)));
        }
        if f.fract() == 0.0 && f <= 9.0e15 {
            // Integral, non-negative and below 2^53: the conversion is exact.
            return Ok(f as u64);
        }
        return Err(format!("{} is not a whole number in range", show(v)));
    }
    Err(format!("{} is not a number", show(v)))
}

pub(super) fn to_u32(field: &str, v: u64) -> Result<u32, ImportError> {
    u32::try_from(v).map_err(|_| invalid(field, format!("{v} is far too large")))
}

pub(super) fn positive(field: &str, v: u64, max: u64) -> Result<u64, ImportError> {
    if v == 0 {
        return Err(invalid(field, "must be at least 1"));
    }
    if v > max {
        return Err(invalid(field, format!("{v} is larger than the supported {max}")));
    }
    Ok(v)
}

/// [`positive`] for the fields the model holds as `u32` (layers, heads, dimensions, experts).
pub(super) fn positive_u32(field: &str, v: u64, max: u32) -> Result<u32, ImportError> {
    to_u32(field, positive(field, v, max.into())?)
}

/// The sizes transformers gives a Llama or Mistral text model by default. Llava files nest their
/// language model with only the fields that differ from these, so they rely on them.
fn text_defaults(model_type: &str) -> Option<&'static Map<String, Value>> {
    fn object(v: Value) -> Map<String, Value> {
        if let Value::Object(m) = v { m } else { Map::new() }
    }
    static LLAMA: LazyLock<Map<String, Value>> = LazyLock::new(|| {
        object(json!({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                      "num_attention_heads": 32}))
    });
    static MISTRAL: LazyLock<Map<String, Value>> = LazyLock::new(|| {
        object(json!({"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                      "num_attention_heads": 32, "num_key_value_heads": 8}))
    });
    match model_type {
        "llama" => Some(&LLAMA),
        "mistral" => Some(&MISTRAL),
        _ => None,
    }
}

/// A config being read, and the report of what was read from it.
pub(super) struct Reader<'a> {
    /// The language model's fields: `text_config` when there is one, else the top level.
    main: &'a Map<String, Value>,
    top: &'a Map<String, Value>,
    nested: bool,
    /// transformers' defaults for a nested text model's absent sizes, and its `model_type`.
    defaults: Option<(&'static Map<String, Value>, String)>,
    /// Every path looked at, present or not (`key`, `text_config.key`, `rope_scaling.factor`): what
    /// the file holds beyond these is listed as not read ([`Reader::unread`]).
    consulted: RefCell<BTreeSet<String>>,
    pub report: ImportReport,
}

impl<'a> Reader<'a> {
    /// A reader of `value`; multimodal configs nest the language model under `text_config`.
    pub fn new(value: &'a Value) -> Result<Self, ImportError> {
        let top = value.as_object().ok_or(ImportError::NotAnObject)?;
        let (main, nested) = match top.get("text_config") {
            Some(Value::Object(t)) => (t, true),
            Some(Value::Null) | None => (top, false),
            Some(other) => {
                return Err(invalid("text_config", format!("{} is not an object", show(other))));
            }
        };
        let mut report = ImportReport::default();
        let model_type = main.get("model_type").and_then(Value::as_str).unwrap_or_default();
        let defaults = text_defaults(model_type).filter(|_| nested).map(|d| (d, model_type.to_string()));
        if let Some((d, kind)) = &defaults {
            for (key, v) in d.iter().filter(|(key, _)| !main.contains_key(*key) && !top.contains_key(*key)) {
                report.assumed.push(format!("text_config.{key}: absent, so {v} (transformers' {kind} default)"));
            }
        }
        let consulted = RefCell::new(BTreeSet::from(["text_config".to_string()]));
        Ok(Reader { main, top, nested, defaults, consulted, report })
    }

    /// Whether the language model is nested under `text_config` (a multimodal wrapper).
    pub fn reads_text_config(&self) -> bool {
        self.nested
    }

    /// The value at a path [`Reader::unread`] gives (`key`, `text_config.key`, `parent.member`).
    pub fn value_at(&self, path: &str) -> Option<&'a Value> {
        let mut parts = path.split('.');
        let first = self.top.get(parts.next()?)?;
        parts.try_fold(first, |v, part| v.get(part))
    }

    /// Notes that `path` was looked at (see [`Reader::unread`]).
    pub fn consult(&self, path: &str) {
        self.consulted.borrow_mut().insert(path.to_string());
    }

    /// Notes every place `key` could be read from: the text config and the top level.
    fn consult_key(&self, key: &str) {
        self.consult(key);
        if self.nested {
            self.consult(&format!("text_config.{key}"));
        }
    }

    /// `key` at the top level (for fields that describe the whole file), looked at.
    pub fn top_value(&self, key: &str) -> Option<&'a Value> {
        self.consult(key);
        self.top.get(key)
    }

    /// Member `key` of the object read at `path`, looked at.
    pub fn member(&self, path: &str, obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
        self.consult(&format!("{path}.{key}"));
        obj.get(key)
    }

    /// Every path the file holds that the import never looked at: top-level keys, the text config's,
    /// and members of the objects it read (`rope_scaling.low_freq_factor`, say), in alphabetical order.
    pub fn unread(&self) -> Vec<String> {
        let consulted = self.consulted.borrow();
        let mut out = Vec::new();
        unread_in("", self.top, &consulted, &mut out);
        out
    }

    /// The first of `keys` present and not null, text config first; with its path for the report.
    pub fn find(&self, keys: &[&str]) -> Option<(String, &'a Value)> {
        keys.iter().for_each(|key| self.consult_key(key));
        for key in keys {
            if let Some(v) = self.main.get(*key).filter(|v| !v.is_null()) {
                let path = if self.nested { format!("text_config.{key}") } else { (*key).to_string() };
                return Some((path, v));
            }
            if self.nested
                && let Some(v) = self.top.get(*key).filter(|v| !v.is_null())
            {
                return Some(((*key).to_string(), v));
            }
        }
        let (defaults, kind) = self.defaults.as_ref()?;
        keys.iter().find_map(|key| defaults.get(*key).map(|v| (format!("text_config.{key} ({kind} default)"), v)))
    }

    /// Whether `key` is written as an explicit `null` (as opposed to absent), text config first.
    pub fn is_null(&self, key: &str) -> bool {
        self.consult_key(key);
        match self.main.get(key) {
            Some(v) => v.is_null(),
            None => self.nested && self.top.get(key).is_some_and(Value::is_null),
        }
    }

    pub fn note_used(&mut self, path: &str, v: &Value) {
        self.report.used.push((path.to_string(), show(v)));
    }

    /// A required count: absent or invalid is an error.
    pub fn required(&mut self, keys: &[&str], what: &'static str) -> Result<u64, ImportError> {
        let (path, v) = self.find(keys).ok_or(ImportError::Missing(what))?;
        let n = as_count(v).map_err(|r| invalid(&path, r))?;
        self.note_used(&path, v);
        Ok(n)
    }

    /// An optional count: absent gives `None`; invalid is an error (a present but wrong value is
    /// never silently replaced).
    pub fn count(&mut self, keys: &[&str]) -> Result<Option<u64>, ImportError> {
        let Some((path, v)) = self.find(keys) else {
            return Ok(None);
        };
        let n = as_count(v).map_err(|r| invalid(&path, r))?;
        self.note_used(&path, v);
        Ok(Some(n))
    }

    /// An optional count with a default: absent gives `default` and notes `assumption`.
    pub fn count_or_assume(
        &mut self,
        keys: &[&str],
        default: u64,
        assumption: impl Into<String>,
    ) -> Result<u64, ImportError> {
        let n = self.count(keys)?;
        Ok(n.unwrap_or_else(|| {
            self.assume(assumption);
            default
        }))
    }

    pub fn boolean(&mut self, key: &str) -> Option<bool> {
        self.typed(key, Value::as_bool, "true/false")
    }

    pub fn float(&mut self, key: &str) -> Option<f64> {
        self.typed(key, Value::as_f64, "a number")
    }

    /// `key`'s value when `convert` accepts it; one it rejects is ignored with a warning.
    fn typed<T>(&mut self, key: &str, convert: fn(&Value) -> Option<T>, expected: &str) -> Option<T> {
        let (path, v) = self.find(&[key])?;
        let converted = convert(v);
        match converted {
            Some(_) => self.note_used(&path, v),
            None => self.warn(format!("{path} = {} is not {expected}; ignored", show(v))),
        }
        converted
    }

    pub fn text(&mut self, key: &str) -> Option<String> {
        let (path, v) = self.find(&[key])?;
        let s = v.as_str()?.chars().take(80).collect::<String>();
        self.note_used(&path, v);
        Some(s)
    }

    /// `parent.key` (an object field's member, not null), with its path for the report.
    pub fn find_nested(&self, parent: &str, key: &str) -> Option<(String, &'a Value)> {
        let (path, obj) = self.find(&[parent])?;
        self.consult(&format!("{path}.{key}"));
        let v = obj.get(key).filter(|v| !v.is_null())?;
        Some((format!("{path}.{key}"), v))
    }

    /// An optional count inside an object field, such as MPT's `attn_config.kv_n_heads`.
    pub fn nested_count(&mut self, parent: &str, key: &str) -> Result<Option<u64>, ImportError> {
        let Some((path, v)) = self.find_nested(parent, key) else {
            return Ok(None);
        };
        let n = as_count(v).map_err(|r| invalid(&path, r))?;
        self.note_used(&path, v);
        Ok(Some(n))
    }

    /// Text inside an object field, such as MPT's `attn_config.attn_type`.
    pub fn nested_text(&mut self, parent: &str, key: &str) -> Option<String> {
        let (path, v) = self.find_nested(parent, key)?;
        let s = v.as_str()?.chars().take(80).collect::<String>();
        self.note_used(&path, v);
        Some(s)
    }

    /// A boolean inside an object field, such as MPT's `attn_config.alibi`.
    pub fn nested_boolean(&mut self, parent: &str, key: &str) -> Option<bool> {
        let (path, v) = self.find_nested(parent, key)?;
        let b = v.as_bool()?;
        self.note_used(&path, v);
        Some(b)
    }

    /// A number inside an object field, such as Samba's `attn.rope_theta`.
    pub fn nested_float(&mut self, parent: &str, key: &str) -> Option<f64> {
        let (path, v) = self.find_nested(parent, key)?;
        let x = v.as_f64()?;
        self.note_used(&path, v);
        Some(x)
    }

    /// Note how a field that could be read more than one way was read, and why.
    pub fn read_as(&mut self, what: impl Into<String>) {
        self.report.readings.push(what.into());
    }

    /// Note a value assumed for an absent field.
    pub fn assume(&mut self, what: impl Into<String>) {
        self.report.assumed.push(what.into());
    }

    /// Note a value present but ignored or doubtful.
    pub fn warn(&mut self, what: impl Into<String>) {
        self.report.warnings.push(what.into());
    }
}

/// Appends to `out` the paths under `prefix` in `map` that were not consulted, descending into the
/// objects that were (their members are settings too).
fn unread_in(prefix: &str, map: &Map<String, Value>, consulted: &BTreeSet<String>, out: &mut Vec<String>) {
    for (key, value) in map {
        let path = format!("{prefix}{key}");
        if !consulted.contains(&path) {
            out.push(path);
        } else if let Value::Object(members) = value {
            unread_in(&format!("{path}."), members, consulted, out);
        }
    }
}
