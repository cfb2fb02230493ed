//! How often the page rewrites its link. Safari refuses `history.replaceState` after 100 calls in 30
//! seconds, and typing changes the state on every key, so replacements come at most every
//! [`MIN_GAP_MS`]: one at once, the rest folded into a single write when the gap has passed (the last
//! state is always written). A new history entry (a lesson step) is written at once.

/// The shortest time between two replacements of the link: at most four a second.
pub const MIN_GAP_MS: f64 = 250.0;

/// What to do with a changed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UrlWrite {
    /// Write it now.
    Now,
    /// Write the latest link after this many milliseconds (a write is already scheduled when
    /// `scheduled` was true: then nothing more is needed).
    Later { after_ms: f64, scheduled: bool },
}

/// When the link was last written and whether a deferred write is waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UrlWrites {
    last_write_ms: Option<f64>,
    pending: bool,
}

impl UrlWrites {
    /// The link changed at `now_ms`; `push` when it is a new history entry.
    pub fn on_change(&mut self, now_ms: f64, push: bool) -> UrlWrite {
        let since = self.last_write_ms.map_or(f64::INFINITY, |t| now_ms - t);
        if push || (!self.pending && since >= MIN_GAP_MS) {
            self.last_write_ms = Some(now_ms);
            self.pending = false;
            return UrlWrite::Now;
        }
        let scheduled = self.pending;
        self.pending = true;
        UrlWrite::Later { after_ms: (MIN_GAP_MS - since).max(0.0), scheduled }
    }

    /// The deferred write ran at `now_ms` (or was overtaken by a push, which already wrote).
    /// Returns whether it still has to write.
    pub fn on_timer(&mut self, now_ms: f64) -> bool {
        let due = std::mem::take(&mut self.pending);
        if due {
            self.last_write_ms = Some(now_ms);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_writes_at_most_four_times_a_second_and_always_the_last_state() {
        let mut w = UrlWrites::default();
        assert_eq!(w.on_change(0.0, false), UrlWrite::Now);
        // Keys at 50 ms intervals: the first waits for the gap, the others join its write.
        assert_eq!(w.on_change(50.0, false), UrlWrite::Later { after_ms: 200.0, scheduled: false });
        assert_eq!(w.on_change(100.0, false), UrlWrite::Later { after_ms: 150.0, scheduled: true });
        assert!(w.on_timer(250.0), "the timer writes the latest state");
        assert!(!w.on_timer(260.0), "once");
        assert_eq!(w.on_change(300.0, false), UrlWrite::Later { after_ms: 200.0, scheduled: false });
        assert_eq!(w.on_change(900.0, false), UrlWrite::Later { after_ms: 0.0, scheduled: true });
        assert!(w.on_timer(900.0));
        assert_eq!(w.on_change(2000.0, false), UrlWrite::Now, "after a pause, at once");
    }

    #[test]
    fn a_new_history_entry_is_written_at_once_and_cancels_the_waiting_write() {
        let mut w = UrlWrites::default();
        assert_eq!(w.on_change(0.0, false), UrlWrite::Now);
        assert!(matches!(w.on_change(10.0, false), UrlWrite::Later { .. }));
        assert_eq!(w.on_change(20.0, true), UrlWrite::Now);
        assert!(!w.on_timer(250.0), "the push already wrote the latest state");
    }

    #[test]
    fn a_thousand_keys_in_ten_seconds_stay_under_safaris_limit() {
        let mut w = UrlWrites::default();
        let mut writes = 0;
        let mut timer_at: Option<f64> = None;
        for key in 0..1000 {
            let now = f64::from(key) * 10.0;
            if timer_at.is_some_and(|t| t <= now) && w.on_timer(now) {
                writes += 1;
                timer_at = None;
            }
            match w.on_change(now, false) {
                UrlWrite::Now => writes += 1,
                UrlWrite::Later { after_ms, scheduled: false } => timer_at = Some(now + after_ms),
                UrlWrite::Later { .. } => {}
            }
        }
        // 10 s at four a second, plus the first.
        assert!(writes <= 41, "{writes} writes");
        assert!(writes >= 39, "{writes} writes: typing still updates the link");
    }
}
