//! Which steps of which lessons the reader has seen, as kept in the browser's storage:
//! `kv-cache:1,2;masks:1`. Reading never fails: what cannot be read is dropped.

use std::collections::{BTreeMap, BTreeSet};

use super::params::MAX_STEPS;

/// The stored text is cut here: a bound on what a tampered store can make the page read.
const MAX_STORED_CHARS: usize = 8192;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CourseProgress {
    seen: BTreeMap<String, BTreeSet<u32>>,
}

impl CourseProgress {
    pub fn parse(text: &str) -> Self {
        let mut progress = Self::default();
        let end = (0..=MAX_STORED_CHARS.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        let text = &text[..end];
        for entry in text.split(';') {
            let Some((id, steps)) = entry.split_once(':') else { continue };
            for step in steps.split(',').filter_map(|s| s.trim().parse::<u32>().ok()) {
                progress.mark(id.trim(), step);
            }
        }
        progress
    }

    pub fn to_text(&self) -> String {
        self.seen
            .iter()
            .map(|(id, steps)| format!("{id}:{}", steps.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Marks step `step` (from 1) of lesson `id` as seen; ids and steps a lesson cannot have are ignored.
    pub fn mark(&mut self, id: &str, step: u32) {
        let valid_id = !id.is_empty()
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if valid_id && (1..=MAX_STEPS).contains(&step) {
            self.seen.entry(id.to_string()).or_default().insert(step);
        }
    }

    /// How many of the first `steps` steps of lesson `id` have been seen.
    pub fn seen(&self, id: &str, steps: u32) -> u32 {
        self.seen.get(id).map_or(0, |s| s.range(1..=steps).count() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_counts() {
        let mut p = CourseProgress::default();
        p.mark("kv-cache", 2);
        p.mark("kv-cache", 1);
        p.mark("masks", 3);
        p.mark("kv-cache", 2);
        assert_eq!(p.to_text(), "kv-cache:1,2;masks:3");
        assert_eq!(CourseProgress::parse(&p.to_text()), p);
        assert_eq!((p.seen("kv-cache", 4), p.seen("masks", 2), p.seen("gqa", 4)), (2, 0, 0));
    }

    #[test]
    fn tampered_storage_reads_what_it_can() {
        let p = CourseProgress::parse("kv-cache:1,x,0,100,2;<b>:1;masks;gqa:4;;:");
        assert_eq!(p.to_text(), "gqa:4;kv-cache:1,2");
        assert_eq!(CourseProgress::parse(&"a:1,".repeat(100_000)).seen("a", 1), 1);
    }
}
