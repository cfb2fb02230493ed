//! What the page does when its GPU device is lost (a driver reset, the browser reclaiming memory) or
//! faulted (an out-of-memory error outside any job's scope):
//! start a new device a bounded number of times, then compute with the CPU reference. A lost adapter
//! cannot give a second device on the web, so each restart asks for a new adapter too.

/// New devices a page starts before it gives up on the GPU.
pub const MAX_RESTARTS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Start a new adapter and device; this is restart `attempt` of [`MAX_RESTARTS`].
    Restart { attempt: u32 },
    /// Stop trying: compute with the CPU reference.
    UseCpu,
}

/// How many times the page has restarted its GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuRecovery {
    restarts: u32,
}

impl GpuRecovery {
    /// The device was lost (or a restart failed): what to do now.
    pub fn on_lost(&mut self) -> Recovery {
        if self.restarts >= MAX_RESTARTS {
            return Recovery::UseCpu;
        }
        self.restarts += 1;
        Recovery::Restart { attempt: self.restarts }
    }

    /// The notice the page shows for `recovery` after the device failed with `why`.
    pub fn notice(recovery: Recovery, why: &str) -> String {
        match recovery {
            Recovery::Restart { attempt } => format!(
                "The GPU stopped working ({why}); a new device was started (attempt {attempt} of {MAX_RESTARTS}) \
                 and the view computed again."
            ),
            Recovery::UseCpu => format!(
                "The GPU stopped working again ({why}); after {MAX_RESTARTS} new devices the page now computes with \
                 the CPU reference (small sizes). Reload it to try the GPU again."
            ),
        }
    }

    /// Why the CPU computes, for the footer and banner once the page gave up on the GPU.
    pub fn cpu_reason() -> String {
        format!("the GPU stopped working {} times", MAX_RESTARTS + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_restarts_then_the_cpu() {
        let mut r = GpuRecovery::default();
        assert_eq!(r.on_lost(), Recovery::Restart { attempt: 1 });
        assert_eq!(r.on_lost(), Recovery::Restart { attempt: 2 });
        assert_eq!(r.on_lost(), Recovery::Restart { attempt: 3 });
        assert_eq!(r.on_lost(), Recovery::UseCpu);
        assert_eq!(r.on_lost(), Recovery::UseCpu);
        let lost = "the device was lost (Destroyed)";
        assert_eq!(
            GpuRecovery::notice(Recovery::Restart { attempt: 2 }, lost),
            "The GPU stopped working (the device was lost (Destroyed)); a new device was started (attempt 2 of 3) \
             and the view computed again."
        );
        assert!(GpuRecovery::notice(Recovery::UseCpu, "out of memory").contains("after 3 new devices"));
    }
}
