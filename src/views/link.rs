//! The link's vocabulary, shared by every view: query strings split and percent-coded, notices, and
//! the [`LinkParams`] contract by which each view reads and writes its own keys.

use std::fmt;

/// A message about the URL the page shows instead of failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice(pub String);

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a view's parameter set does with one key of a link.
pub enum Accepted {
    /// Taken as given.
    Yes,
    /// Taken, but changed on the way (cut to a limit): the page says how.
    Adjusted(Notice),
}

/// One view's parameters in a link: the keys it owns, how each is read, and what it writes back.
/// A value that cannot be used is an `Err` with the reason; the field keeps its default.
pub trait LinkParams: Default {
    /// The keys this set reads.
    const KEYS: &'static [&'static str];

    /// Sets the field of `key` (one of [`Self::KEYS`]) from its link value.
    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String>;

    /// The parameters that differ from the defaults (or that the link named), as (key, value).
    fn pairs(&self) -> Vec<(&'static str, String)>;
}

/// What the page says about one key a link set: nothing when it was taken as given, the adjustment,
/// or why it was ignored.
pub fn notice_of(key: &str, read: Result<Accepted, String>) -> Option<Notice> {
    match read {
        Ok(Accepted::Yes) => None,
        Ok(Accepted::Adjusted(notice)) => Some(notice),
        Err(why) => Some(Notice(format!("Ignored {}: {}; using the default.", echo(key), cut_reason(&why)))),
    }
}

/// Most characters of a refusal's reason a notice shows: the parsers' own reasons are shorter, so
/// this only cuts one that repeats a long value whole.
pub const REASON_CHARS: usize = 240;

fn cut_reason(why: &str) -> String {
    if why.chars().count() <= REASON_CHARS {
        why.to_string()
    } else {
        why.chars().take(REASON_CHARS).collect::<String>() + "…"
    }
}

/// The notice for a key no parameter set owns.
pub fn unknown_key_notice(key: &str) -> Notice {
    Notice(format!("Ignored unknown parameter \"{}\".", echo(key)))
}

/// Most `key=value` pairs a link is read for (the app writes at most one per key, a few dozen).
pub const MAX_LINK_PAIRS: usize = 100;

/// Splits `a=1&b=two%20words` into decoded pairs. Malformed escapes are kept literally.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query_parts(query).map(decode_pair).collect()
}

/// [`parse_query`] for the first [`MAX_LINK_PAIRS`] pairs, with the number of pairs in the whole
/// link: the others are counted, never decoded or stored.
pub fn parse_query_capped(query: &str) -> (Vec<(String, String)>, usize) {
    (query_parts(query).take(MAX_LINK_PAIRS).map(decode_pair).collect(), query_parts(query).count())
}

fn query_parts(query: &str) -> impl Iterator<Item = &str> {
    query.trim_start_matches('?').split('&').filter(|part| !part.is_empty())
}

fn decode_pair(part: &str) -> (String, String) {
    let (k, v) = part.split_once('=').unwrap_or((part, ""));
    (decode_component(k), decode_component(v))
}

/// Percent-decodes a query component (`+` is a space). Invalid escapes and invalid UTF-8 never fail:
/// bad escapes stay as written and bad bytes become U+FFFD.
pub fn decode_component(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let escaped = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
                match escaped {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes everything but unreserved characters (RFC 3986), spaces as `%20`.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Most characters of a refused value a notice repeats: a link may carry a value of any length.
pub const ECHO_CHARS: usize = 32;

/// A refused value as a notice repeats it: its first [`ECHO_CHARS`] characters.
pub fn echo(value: &str) -> String {
    value.chars().take(ECHO_CHARS).collect()
}

/// A whole number in `min..=max`.
pub fn parse_bounded(value: &str, min: u32, max: u32) -> Result<u32, String> {
    match value.parse::<u64>() {
        Ok(x) if (u64::from(min)..=u64::from(max)).contains(&x) => Ok(x as u32),
        Ok(x) => Err(format!("{x} is outside {min}..={max}")),
        Err(_) => Err(format!("\"{}\" is not a whole number", echo(value))),
    }
}

/// `on` / `off` (also `1` / `0`, `true` / `false`).
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("\"{}\" is not on or off", echo(s))),
    }
}

pub fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.into()
}

/// Sets every pair a link gives for `P` and returns what `P` writes back: the round trip each view's
/// tests run over all of its parameters.
#[cfg(test)]
pub fn round_trip<P: LinkParams + Clone>(params: &P) -> P {
    let mut out = P::default();
    for (key, value) in params.pairs() {
        assert!(P::KEYS.contains(&key), "{key} is written but not read");
        out.set(key, &value).unwrap_or_else(|e| panic!("{key}={value}: {e}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_never_repeat_a_long_value_or_key_whole() {
        let long = "x".repeat(100_000);
        let unknown = unknown_key_notice(&long).0;
        assert_eq!(unknown, format!("Ignored unknown parameter \"{}\".", "x".repeat(ECHO_CHARS)));
        let refused = notice_of("focus", Err(format!("\"{long}\" is not a head"))).unwrap().0;
        assert_eq!(
            refused.chars().count(),
            "Ignored focus: ".len() + REASON_CHARS + "…; using the default.".chars().count()
        );
        let short = notice_of("seed", Err("\"q\" is not a number".into())).unwrap().0;
        assert_eq!(short, "Ignored seed: \"q\" is not a number; using the default.");
    }

    #[test]
    fn decoding_by_hand() {
        assert_eq!(decode_component("a%20b+c"), "a b c");
        assert_eq!(decode_component("%E2%9C%93"), "✓");
        assert_eq!(decode_component("100%"), "100%");
        assert_eq!(decode_component("%zz%4"), "%zz%4");
        assert_eq!(decode_component("%FF"), "\u{FFFD}");
        assert_eq!(encode_component("a b/✓"), "a%20b%2F%E2%9C%93");
    }

    #[test]
    fn queries_split_into_decoded_pairs() {
        assert_eq!(
            parse_query("?a=1&&b=two%20words&c&=x"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "two words".into()),
                ("c".into(), String::new()),
                (String::new(), "x".into())
            ]
        );
    }

    #[test]
    fn long_queries_are_read_up_to_the_pair_limit() {
        let query = format!("?{}", "a=1&".repeat(MAX_LINK_PAIRS + 5));
        let (pairs, total) = parse_query_capped(&query);
        assert_eq!((pairs.len(), total), (MAX_LINK_PAIRS, MAX_LINK_PAIRS + 5));
        assert_eq!(parse_query_capped("?a=1&&b"), (parse_query("a=1&b"), 2));
    }

    #[test]
    fn bounded_numbers_and_switches() {
        assert_eq!(parse_bounded("7", 1, 9), Ok(7));
        assert_eq!(parse_bounded("0", 1, 9), Err("0 is outside 1..=9".into()));
        assert_eq!(parse_bounded("99999999999", 1, 9), Err("99999999999 is outside 1..=9".into()));
        assert_eq!(parse_bounded("-3", 1, 9), Err("\"-3\" is not a whole number".into()));
        assert_eq!((parse_on_off("1"), parse_on_off("off")), (Ok(true), Ok(false)));
        assert!(parse_on_off("maybe").is_err());
        assert_eq!((on_off(true), on_off(false)), ("on".into(), "off".into()));
    }

    #[test]
    fn a_refused_value_is_echoed_cut_to_32_characters() {
        // 40 characters, the last 8 past the cut; "é" is two bytes but one character.
        let long = format!("{}{}", "é".repeat(32), "TAILTAIL");
        assert_eq!(echo(&long), "é".repeat(32));
        assert_eq!(echo("short"), "short");
        let cut = format!("\"{}\"", "é".repeat(32));
        assert_eq!(parse_bounded(&long, 1, 9), Err(format!("{cut} is not a whole number")));
        assert_eq!(parse_on_off(&long), Err(format!("{cut} is not on or off")));
    }
}
