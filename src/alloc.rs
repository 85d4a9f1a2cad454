//! srt's memory allocator: mimalloc, without transparent huge pages, purging what it
//! frees after [`PURGE_DELAY_MS`].
//!
//! A plan of ~50,000 resources makes and frees a few million small strings and vectors
//! on several threads; glibc's malloc took a third of its time (docs/performance.md,
//! change 44). mimalloc with its defaults is faster still but keeps freed pages for a
//! second, and its arenas fault in 2 MiB huge pages, each cleared by the kernel: the
//! plan's peak rose by 40% (over 300 MB for some shapes) and a state load spent half
//! its time clearing pages. Built without huge pages (the `no_thp` feature) and
//! purging after 100 ms, it peaks below glibc's and keeps most of the speed.
//!
//! The binary declares the allocator (`#[global_allocator] static ALLOC: Allocator`) and
//! calls [`configure`] first thing; so does the plan benchmark, whose figures are srt's.

/// The global allocator srt runs with.
pub type Allocator = mimalloc::MiMalloc;

/// How long freed memory is kept before it is returned to the system, in ms.
pub const PURGE_DELAY_MS: std::ffi::c_long = 100;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (`mimalloc.h`): the sys crate
/// names the options around it, not this one.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Set the allocator's options: call before the work starts.
pub fn configure() {
    // SAFETY: `mi_option_set` writes one option's value (an atomic store in mimalloc);
    // the option index is one of mimalloc's.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_is_set_on_the_option_it_names() {
        super::configure();
        // SAFETY: reads one option's value.
        let (purge, numa) = unsafe {
            (
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_use_numa_nodes),
            )
        };
        assert_eq!(purge, super::PURGE_DELAY_MS);
        // The next option is untouched (its default), so the index is not off by one.
        assert_eq!(numa, 0);
    }
}
