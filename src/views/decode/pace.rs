//! How fast the animation goes, and so how often it redraws and how long it pauses between tokens.

/// Least time between two redraws of the pages while running fast.
pub const REDRAW_MS: f64 = 60.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// A pause after each token, to watch pages fill.
    Watch,
    /// As fast as the GPU answers.
    Fast,
}

impl Pace {
    /// The pace select's value: `fast`, anything else watches.
    pub fn from_choice(value: &str) -> Pace {
        if value == "fast" { Pace::Fast } else { Pace::Watch }
    }

    /// Whether to redraw after a step: always when watching or finished, else at most every [`REDRAW_MS`].
    pub fn redraws(self, finished: bool, since_last_draw_ms: f64) -> bool {
        finished || self == Pace::Watch || since_last_draw_ms >= REDRAW_MS
    }

    /// The pause after a token: visible when watching, a zero-length timer otherwise (the page must still
    /// get its turn: the CPU tier never awaits anything else).
    pub fn pause_ms(self) -> i32 {
        match self {
            Pace::Watch => 40,
            Pace::Fast => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_redraws_every_60_ms_and_watch_every_token() {
        assert_eq!((Pace::from_choice("fast"), Pace::from_choice("watch")), (Pace::Fast, Pace::Watch));
        assert!(Pace::Watch.redraws(false, 0.0));
        assert!(!Pace::Fast.redraws(false, 59.9));
        assert!(Pace::Fast.redraws(false, 60.0));
        assert!(Pace::Fast.redraws(true, 0.0));
        assert_eq!((Pace::Watch.pause_ms(), Pace::Fast.pause_ms()), (40, 0));
    }
}
