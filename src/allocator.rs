//! The native allocator's settings. The CLI (`src/main.rs`) and the model
//! benches install mimalloc as the global allocator and call
//! [`keep_freed_pages`] first.

use libmimalloc_sys::{mi_option_set_default, mi_option_t};

/// mimalloc's `purge_delay` option: its place in `mi_option_t` of mimalloc
/// v3, the version libmimalloc-sys builds by default (`mimalloc.h`; the
/// crate names no constant for it). The test below checks the option's
/// default there, so a version that moves it fails.
const PURGE_DELAY: mi_option_t = 15;

/// Stops mimalloc returning freed pages to the OS: they stay mapped for the
/// next allocation. Otherwise mimalloc purges freed memory that waits past its
/// delay (1 s), and later model passes fault those pages back in, zeroed by
/// the kernel. In a run of the `plm` bench that was 13 000–64 000 page
/// faults against about 600, with about the same peak memory. On 2 cores the
/// passes' time moved within noise (BENCHMARKS.md); many threads
/// faulting at once is where it should count. The process keeps its peak
/// memory until it ends, which a batch run reaches anyway.
///
/// A purge delay from the environment (`MIMALLOC_PURGE_DELAY`, read by
/// mimalloc at start as it reads every option) still rules:
/// `MIMALLOC_PURGE_DELAY=1000` runs as before.
pub fn keep_freed_pages() {
    // SAFETY: mimalloc's options may be set at any time, from any thread;
    // a default does not replace a value mimalloc read from the environment.
    unsafe { mi_option_set_default(PURGE_DELAY, -1) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use libmimalloc_sys::mi_option_get;
    use std::ffi::c_long;

    /// mimalloc's purge delay now, in milliseconds (-1: never purged).
    fn purge_delay() -> c_long {
        // SAFETY: reading an option is always allowed.
        unsafe { mi_option_get(PURGE_DELAY) }
    }

    #[test]
    fn freed_pages_are_kept() {
        // mimalloc reads its variables' names in any case.
        let named = std::env::vars_os().any(|(name, _)| {
            let name = name.to_string_lossy().to_ascii_uppercase();
            name == "MIMALLOC_PURGE_DELAY" || name == "MIMALLOC_RESET_DELAY"
        });
        if named {
            let before = purge_delay();
            keep_freed_pages();
            assert_eq!(purge_delay(), before, "the environment's delay rules");
            return;
        }
        // mimalloc v3's default purge delay: the index is that option's.
        assert_eq!(purge_delay(), 1000);
        keep_freed_pages();
        assert_eq!(purge_delay(), -1);
    }
}
