//! What an import hands back: the model with its report, or why there is none.

use std::fmt;

use crate::model::config::Model;

/// What the importer read, assumed and doubted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// `model_type` (or the first architecture) as written in the file.
    pub model_type: String,
    /// Fields read: (path, value as JSON text).
    pub used: Vec<(String, String)>,
    /// Fields absent (or null) and the value assumed instead.
    pub assumed: Vec<String>,
    /// Values present but ignored or doubtful.
    pub warnings: Vec<String>,
    /// How a file that could be read more than one way was read, and why: which of two fields
    /// won, or that the language model came from `text_config`.
    pub readings: Vec<String>,
    /// Keys of the file the import never read (top level, the text config's, members of the objects
    /// it read), in alphabetical order: none of them is an attention or cache setting it knows of.
    pub unread: Vec<String>,
    /// Keys not read because they change neither the attention, the cache nor the sizes (token ids,
    /// tokenizer and training metadata, dtype notes), and keys written but unset.
    pub not_relevant: Vec<String>,
}

/// A model and the report of how it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub model: Model,
    pub report: ImportReport,
}

/// Why a config could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportError {
    /// Not JSON at all (the parser's message, with line and column).
    Json(String),
    /// JSON, but not an object.
    NotAnObject,
    /// A required field is absent or null.
    Missing(&'static str),
    /// A field has the wrong type or an impossible value.
    Invalid { field: String, reason: String },
    /// A kind of model the importer does not read yet, and why its figures would be wrong.
    Unsupported(String),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Json(e) => write!(f, "not valid JSON: {e}"),
            ImportError::NotAnObject => f.write_str("the config must be a JSON object"),
            ImportError::Missing(field) => write!(f, "required field {field} is missing"),
            ImportError::Invalid { field, reason } => write!(f, "{field}: {reason}"),
            ImportError::Unsupported(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ImportError {}

/// An [`ImportError::Invalid`], its field name cut to a length the UI can show.
pub(super) fn invalid(field: &str, reason: impl Into<String>) -> ImportError {
    ImportError::Invalid { field: field.chars().take(80).collect(), reason: reason.into() }
}
