//! "Check your understanding": the reader predicts a number or picks an answer, then sees the one the
//! app computes. A wrong answer gets a hint (and, for numbers, which way it is off), never only "wrong".

use super::markup::Node;
use super::markup::split_figures;

/// One question of a step (a ```check block).
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub question: String,
    pub answer: Answer,
    pub hint: String,
    /// Shown with the answer once revealed.
    pub explain: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A number: a live figure (`{kv_bytes_per_token}`) or a literal, within `tolerance` (relative).
    Number { expected: Expected, tolerance: f64 },
    /// One of `options`; `correct` is its index.
    Choice { options: Vec<String>, correct: usize },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Figure(String),
    Literal(f64),
}

/// How far off a number may be and still count: half a percent (a reader who rounds is right).
pub const DEFAULT_TOLERANCE: f64 = 0.005;

/// What the reader's answer earned.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Right,
    /// Wrong, with what to think about next.
    Wrong(String),
    /// Not an answer at all (not a number): nothing is revealed.
    Unreadable(String),
}

impl Verdict {
    /// The check's `data-verdict` for a verdict, or for none yet.
    pub fn id(verdict: Option<&Verdict>) -> &'static str {
        match verdict {
            Some(Verdict::Right) => "right",
            Some(Verdict::Wrong(_)) => "wrong",
            Some(Verdict::Unreadable(_)) => "unreadable",
            None => "none",
        }
    }

    /// What the reader is told.
    pub fn message(self) -> String {
        match self {
            Verdict::Right => "Right.".to_string(),
            Verdict::Wrong(hint) => hint,
            Verdict::Unreadable(why) => format!("That is not an answer: {why}."),
        }
    }
}

impl Check {
    /// Builds a check from its `key: value` lines.
    pub fn parse(lines: &[(String, String)]) -> Result<Check, String> {
        let get = |key: &str| lines.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        for (key, _) in lines {
            if !["question", "answer", "choices", "hint", "explain", "tolerance"].contains(&key.as_str()) {
                return Err(format!("unknown check line \"{key}\""));
            }
        }
        let need = |key: &str| get(key).filter(|v| !v.is_empty()).ok_or(format!("the check needs `{key}:`"));
        let answer_text = need("answer")?;
        let answer = match get("choices") {
            Some(choices) => {
                let options: Vec<String> = choices.split('|').map(|o| o.trim().to_string()).collect();
                let correct = options
                    .iter()
                    .position(|o| *o == answer_text)
                    .ok_or_else(|| format!("the answer \"{answer_text}\" is not one of the choices"))?;
                if options.len() < 2 || options.iter().any(String::is_empty) {
                    return Err("choices need at least two non-empty options, separated by |".into());
                }
                Answer::Choice { options, correct }
            }
            None => Answer::Number { expected: expected_of(&answer_text)?, tolerance: tolerance_of(get("tolerance"))? },
        };
        Ok(Check { question: need("question")?, answer, hint: need("hint")?, explain: need("explain")? })
    }

    /// The live figure the answer reads, if any.
    pub fn figure(&self) -> Option<&str> {
        match &self.answer {
            Answer::Number { expected: Expected::Figure(name), .. } => Some(name),
            _ => None,
        }
    }

    /// Judges a typed number against `expected` (the figure's value, or the literal).
    pub fn judge_number(&self, typed: &str, expected: f64) -> Verdict {
        let tolerance = match self.answer {
            Answer::Number { tolerance, .. } => tolerance,
            Answer::Choice { .. } => return Verdict::Unreadable("pick one of the choices".into()),
        };
        let Some(value) = parse_number(typed) else {
            return Verdict::Unreadable(format!("\"{}\" is not a number", typed.trim()));
        };
        if (value - expected).abs() <= tolerance * expected.abs() {
            return Verdict::Right;
        }
        let direction = if value > expected { "Too high" } else { "Too low" };
        let off = if expected != 0.0 && value != 0.0 {
            let ratio = if value > expected { value / expected } else { expected / value };
            if ratio >= 1.95 { format!(" (about {ratio:.0}× off)") } else { String::new() }
        } else {
            String::new()
        };
        Verdict::Wrong(format!("{direction}{off}. {}", self.hint))
    }

    /// Judges the choice at `index`.
    pub fn judge_choice(&self, index: usize) -> Verdict {
        match &self.answer {
            Answer::Choice { correct, .. } if *correct == index => Verdict::Right,
            Answer::Choice { .. } => Verdict::Wrong(format!("Not that one. {}", self.hint)),
            Answer::Number { .. } => Verdict::Unreadable("type a number".into()),
        }
    }

    /// The explanation as text nodes with its figures split out (it may quote the answer).
    pub fn explain_nodes(&self) -> Vec<Node> {
        split_figures(&self.explain)
    }
}

fn expected_of(text: &str) -> Result<Expected, String> {
    if let [Node::Figure(name)] = split_figures(text).as_slice() {
        return Ok(Expected::Figure(name.clone()));
    }
    parse_number(text)
        .map(Expected::Literal)
        .ok_or_else(|| format!("the answer \"{text}\" is not a number or a {{figure}}"))
}

fn tolerance_of(text: Option<String>) -> Result<f64, String> {
    let Some(text) = text else { return Ok(DEFAULT_TOLERANCE) };
    let percent = text.strip_suffix('%').ok_or_else(|| format!("tolerance \"{text}\" must be a percentage"))?;
    match percent.trim().parse::<f64>() {
        Ok(p) if (0.0..=50.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("tolerance \"{text}\" must be between 0% and 50%")),
    }
}

/// Reads `131072`, `131,072`, `131 072`, `1_024`, `0.5`, `1e6`, `-3`; nothing else.
pub fn parse_number(text: &str) -> Option<f64> {
    let cleaned: String =
        text.trim().chars().filter(|c| !matches!(c, ',' | '_' | ' ' | '\u{a0}' | '\u{202f}')).collect();
    if cleaned.is_empty() || cleaned.len() > 40 {
        return None;
    }
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    fn number_check() -> Check {
        Check::parse(&lines(&[
            ("question", "Bytes per token?"),
            ("answer", "{kv_bytes_per_token}"),
            ("hint", "K and V, every layer."),
            ("explain", "2 x 32 x 8 x 128 x 2 = {kv_bytes_per_token}."),
        ]))
        .unwrap()
    }

    #[test]
    fn numbers_right_within_half_a_percent_and_wrong_with_a_direction() {
        let check = number_check();
        assert_eq!(check.figure(), Some("kv_bytes_per_token"));
        assert_eq!(check.judge_number("131072", 131_072.0), Verdict::Right);
        assert_eq!(check.judge_number(" 131,072 ", 131_072.0), Verdict::Right);
        assert_eq!(check.judge_number("131000", 131_072.0), Verdict::Right);
        assert_eq!(
            check.judge_number("65536", 131_072.0),
            Verdict::Wrong("Too low (about 2× off). K and V, every layer.".into())
        );
        assert_eq!(check.judge_number("140000", 131_072.0), Verdict::Wrong("Too high. K and V, every layer.".into()));
        assert!(matches!(check.judge_number("lots", 131_072.0), Verdict::Unreadable(_)));
        assert!(matches!(check.judge_number("", 131_072.0), Verdict::Unreadable(_)));
    }

    #[test]
    fn choices_and_literal_answers() {
        let check = Check::parse(&lines(&[
            ("question", "Which head?"),
            ("choices", "head 0 | head 1 | head 2"),
            ("answer", "head 1"),
            ("hint", "Look at the diagonal."),
            ("explain", "Head 1 reads the token before."),
        ]))
        .unwrap();
        assert_eq!(check.judge_choice(1), Verdict::Right);
        assert_eq!(check.judge_choice(0), Verdict::Wrong("Not that one. Look at the diagonal.".into()));
        let literal = Check::parse(&lines(&[
            ("question", "q"),
            ("answer", "4"),
            ("tolerance", "0%"),
            ("hint", "h"),
            ("explain", "e"),
        ]))
        .unwrap();
        assert_eq!(literal.answer, Answer::Number { expected: Expected::Literal(4.0), tolerance: 0.0 });
        assert!(matches!(literal.judge_number("4.01", 4.0), Verdict::Wrong(_)));
    }

    #[test]
    fn malformed_checks_are_refused() {
        let base = [("question", "q"), ("answer", "1"), ("hint", "h"), ("explain", "e")];
        for (key, value, why) in [
            ("answer", "many", "not a number"),
            ("tolerance", "5", "percentage"),
            ("tolerance", "90%", "between"),
            ("choices", "a | b", "not one of the choices"),
            ("colour", "red", "unknown check line"),
            ("hint", "", "needs `hint:`"),
        ] {
            let mut pairs: Vec<(&str, &str)> = base.iter().copied().filter(|(k, _)| *k != key).collect();
            pairs.push((key, value));
            let err = Check::parse(&lines(&pairs)).unwrap_err();
            assert!(err.contains(why), "{key}: {err}");
        }
    }

    #[test]
    fn number_reading() {
        assert_eq!(parse_number("1_024"), Some(1024.0));
        assert_eq!(parse_number("1e6"), Some(1e6));
        assert_eq!(parse_number("NaN"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_number("12 GB"), None);
    }

    #[test]
    fn a_verdict_names_itself_and_says_what_to_think_about() {
        assert_eq!(Verdict::id(None), "none");
        assert_eq!(Verdict::id(Some(&Verdict::Right)), "right");
        assert_eq!(Verdict::id(Some(&Verdict::Wrong("x".into()))), "wrong");
        assert_eq!(Verdict::id(Some(&Verdict::Unreadable("x".into()))), "unreadable");
        assert_eq!(Verdict::Right.message(), "Right.");
        assert_eq!(Verdict::Wrong("Count the keys.".into()).message(), "Count the keys.");
        assert_eq!(Verdict::Unreadable("not a number".into()).message(), "That is not an answer: not a number.");
    }
}
