//! How soon the global allocator (mimalloc, set in `main.rs`) gives freed
//! memory back to the OS, set for `serve` at startup.
//!
//! mimalloc 3.3.2 (libmimalloc-sys 0.1.49) does not return an emptied
//! arena range when it is freed: it schedules a purge `purge_delay` ms
//! later (default 1,000 in src/options.c, though include/mimalloc.h says
//! 10) times `arena_purge_mult` (default 1), and runs due purges only when
//! some thread next passes through its collection, a few arenas per pass
//! (`mi_arena_schedule_purge` and `mi_arenas_try_purge`, src/arena.c). A
//! replica whose work comes in bursts of large transient tables (a
//! DeviceTaintRule count builds a per-pod map, ~10 MB at 100k pods, on
//! whichever blocking thread runs it) therefore holds freed pages it will
//! not reuse soon. Measured with `scripts/standing-taint-rules.sh 100000 0
//! 40` under 256 MiB, two runs each: with the default delay the 40-rule
//! run peaked at 194 and 233 MB RSS (cgroup 225 and 255 MiB, at its limit
//! once); with a delay of 0 at 172 and 173 MB (cgroup 189 and 198 MiB).
//! A delay of 0 purges when a range is freed (`delay == 0` in
//! `mi_arena_schedule_purge`).
//!
//! An operator's `MIMALLOC_PURGE_DELAY` still wins: mimalloc reads its
//! environment when the process loads, and `mi_option_set_default` leaves
//! an option read from there as it is (`mi_option_set_default`,
//! src/options.c).

use libmimalloc_sys::{mi_option_get, mi_option_set_default, mi_option_t};

/// `mi_option_purge_delay` in mimalloc 3.3.2's `mi_option_e`
/// (include/mimalloc.h; the same index in 2.x). libmimalloc-sys does not
/// export it; `tests/allocator_purge.rs` checks the index through the
/// environment variable that names the option.
const PURGE_DELAY: mi_option_t = 15;

/// Freed memory is purged at once unless `MIMALLOC_PURGE_DELAY` says
/// otherwise. Call before any thread starts: mimalloc's option setters are
/// not thread-safe.
pub fn purge_freed_memory_promptly() {
    // SAFETY: sets one option of the linked mimalloc by its index, with a
    // value its documentation allows (0: purge immediately); called while
    // the process has one thread.
    unsafe { mi_option_set_default(PURGE_DELAY, 0) }
}

/// The purge delay in force, in ms (-1: never purge), for the startup log.
// C's long is i64 on Linux, i32 on Windows: the conversion is for the latter.
#[allow(clippy::useless_conversion)]
pub fn purge_delay_ms() -> i64 {
    // SAFETY: reads one option by its index.
    i64::from(unsafe { mi_option_get(PURGE_DELAY) })
}
