//! The native allocator's settings. The CLI (`src/main.rs`) and the model
//! benches install mimalloc as the global allocator and call
//! [`keep_freed_pages`] first.

use std::ffi::c_long;

use libmimalloc_sys::{mi_option_get, mi_option_set, mi_option_t};

/// mimalloc's `purge_delay` option: its place in `mi_option_t` of mimalloc
/// v3, the version libmimalloc-sys builds by default (`mimalloc.h`; the
/// crate names no constant for it). The test below checks the option's
/// default there, so a version that moves it fails.
const PURGE_DELAY: mi_option_t = 15;

/// The variables by which mimalloc reads its purge delay at start.
const ENVIRONMENT: [&str; 2] = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];

/// Stops mimalloc returning freed pages to the OS: they stay mapped for the
/// next allocation. Otherwise mimalloc purges freed memory that waits past its
/// delay (1 s), and later model passes fault those pages back in, zeroed by
/// the kernel. In a run of the `plm` bench that was 40 000–64 000 page faults
/// against about 600, with the same peak memory; on 2 cores MiniLM's f32
/// batch of 32 ran 1.05–1.18× faster, the other rows within noise (README,
/// Engine speed). The process keeps its peak memory until it ends, which a
/// batch run reaches anyway.
///
/// A `MIMALLOC_PURGE_DELAY` (or its old name `MIMALLOC_RESET_DELAY`) in the
/// environment is left to rule: `MIMALLOC_PURGE_DELAY=1000` runs as before.
pub fn keep_freed_pages() {
    if !ENVIRONMENT
        .iter()
        .any(|name| std::env::var_os(name).is_some())
    {
        // SAFETY: mimalloc's options may be set at any time, from any thread.
        unsafe { mi_option_set(PURGE_DELAY, -1) };
    }
}

/// mimalloc's purge delay now, in milliseconds (-1: never purged).
pub fn purge_delay() -> c_long {
    // SAFETY: reading an option is always allowed.
    unsafe { mi_option_get(PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_pages_are_kept() {
        if ENVIRONMENT
            .iter()
            .any(|name| std::env::var_os(name).is_some())
        {
            eprintln!("skipped: the environment sets mimalloc's purge delay");
            return;
        }
        // mimalloc v3's default purge delay: the index is that option's.
        assert_eq!(purge_delay(), 1000);
        keep_freed_pages();
        assert_eq!(purge_delay(), -1);
    }
}
