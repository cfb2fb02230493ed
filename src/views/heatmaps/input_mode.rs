//! The explorer's input select: where the queries (and keys) come from, and which link keys a
//! switch changes.

use crate::views::registry::Settings;

/// Where the explorer's queries (and keys) come from: the typed text, `n` generated tokens, or
/// cross-attention from the text to a second one (`src`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputMode {
    Text,
    Generated,
    Cross,
}

/// The second text a switch to cross-attention starts with.
pub const DEFAULT_CROSS_SOURCE: &str = "Le chat était assis sur le tapis .";
/// The generated length a switch to a generated sequence starts with (and its control shows before).
pub const DEFAULT_GENERATED_TOKENS: u32 = 512;
/// [`DEFAULT_GENERATED_TOKENS`] as the link writes it (a test keeps the two equal).
const DEFAULT_GENERATED: &str = "512";

impl InputMode {
    pub fn of(settings: &Settings) -> Self {
        if settings.explorer.src.is_some() {
            InputMode::Cross
        } else if settings.input.seq_tokens.is_some() {
            InputMode::Generated
        } else {
            InputMode::Text
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            InputMode::Text => "text",
            InputMode::Generated => "generated",
            InputMode::Cross => "cross",
        }
    }

    /// The mode of a select's value; anything unknown is the typed text.
    pub fn from_id(id: &str) -> Self {
        match id {
            "generated" => InputMode::Generated,
            "cross" => InputMode::Cross,
            _ => InputMode::Text,
        }
    }

    /// The link keys a switch to this mode changes (`None`: cleared). A generated length or a second
    /// text the settings already hold is kept.
    pub fn changes(self, settings: &Settings) -> Vec<(&'static str, Option<&'static str>)> {
        match self {
            InputMode::Text => vec![("n", None), ("src", None)],
            InputMode::Generated if settings.input.seq_tokens.is_some() => vec![("src", None)],
            InputMode::Generated => vec![("src", None), ("n", Some(DEFAULT_GENERATED))],
            InputMode::Cross if settings.explorer.src.is_some() => vec![("n", None)],
            InputMode::Cross => vec![("n", None), ("src", Some(DEFAULT_CROSS_SOURCE))],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings after each switch of the input select, as the page applies them.
    fn switched(mut settings: Settings, modes: &[InputMode]) -> Settings {
        for mode in modes {
            for (key, value) in mode.changes(&settings) {
                match value {
                    Some(value) => assert!(matches!(settings.set(key, value), Some(Ok(_)))),
                    None => assert!(settings.clear(key)),
                }
            }
            assert_eq!(InputMode::of(&settings), *mode);
        }
        settings
    }

    #[test]
    fn switching_the_input_keeps_what_the_other_modes_hold_only_while_they_show() {
        let generated = switched(Settings::default(), &[InputMode::Generated]);
        assert_eq!((generated.input.seq_tokens, generated.explorer.src.as_deref()), (Some(512), None));
        let cross = switched(generated, &[InputMode::Cross]);
        assert_eq!((cross.input.seq_tokens, cross.explorer.src.as_deref()), (None, Some(DEFAULT_CROSS_SOURCE)));
        assert_eq!(switched(cross, &[InputMode::Text]), Settings::default());
        // A length the link chose stays when the same mode is picked again.
        let (mut long, _) = Settings::from_query("n=4096");
        long = switched(long, &[InputMode::Generated]);
        assert_eq!(long.input.seq_tokens, Some(4096));
        assert_eq!(DEFAULT_GENERATED, DEFAULT_GENERATED_TOKENS.to_string());
        for mode in [InputMode::Text, InputMode::Generated, InputMode::Cross] {
            assert_eq!(InputMode::from_id(mode.id()), mode);
        }
    }
}
