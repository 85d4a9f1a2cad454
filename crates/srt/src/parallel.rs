//! Work split over threads with results in a fixed order: a plan at cluster scale lowers
//! and renders tens of thousands of independent items, and the result must not depend
//! on how many threads did it.

use std::ops::Range;

/// Below this many items one thread does the work (a thread costs more than it saves
/// there).
pub(crate) const FROM: usize = 4096;

/// How many threads `items` items are worth: one below [`FROM`], else as many as the
/// machine runs at once, and at most one per [`FROM`] items.
pub(crate) fn threads_for(items: usize) -> usize {
    if items < FROM {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    cores.min(items / FROM).max(1)
}

/// `f` of slices of the items whose work is `work` (one slice per thread they are worth,
/// [`threads_for`], of about equal work), concatenated in order.
pub(crate) fn map_slices<T: Send>(
    work: &[usize],
    f: impl Fn(Range<usize>) -> Vec<T> + Sync,
) -> Vec<T> {
    in_ranges(by_work(work, threads_for(work.len())), f)
}

/// The items, whose work is `work` each, cut into at most `n` consecutive ranges of
/// about equal work (at least one range; none holds more than its share plus one item).
pub(crate) fn by_work(work: &[usize], n: usize) -> Vec<Range<usize>> {
    let total: usize = work.iter().sum();
    let mut out = Vec::with_capacity(n);
    let (mut start, mut done) = (0, 0);
    for (i, w) in work.iter().enumerate() {
        done += w;
        if out.len() + 1 < n && done * n >= total * (out.len() + 1) {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    out.push(start..work.len());
    out
}

/// `f` of each range, each on a thread of its own (inline when there is one range),
/// concatenated in the order of `ranges`. A panic in `f` is raised again here.
pub(crate) fn in_ranges<T: Send>(
    ranges: Vec<Range<usize>>,
    f: impl Fn(Range<usize>) -> Vec<T> + Sync,
) -> Vec<T> {
    if ranges.len() <= 1 {
        return ranges.into_iter().flat_map(&f).collect();
    }
    let f = &f;
    let parts: Vec<Vec<T>> = std::thread::scope(|s| {
        let handles: Vec<_> = ranges
            .into_iter()
            .map(|range| s.spawn(move || f(range)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        out.extend(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_once_by_work() {
        let uneven: Vec<usize> = (0..200)
            .map(|i| 1 + (i * 7919) % 13 + 50 * (i % 97 / 96))
            .collect();
        for work in [vec![], vec![5], vec![1; 64], uneven] {
            let total: usize = work.iter().sum();
            let most = work.iter().copied().max().unwrap_or(0);
            for n in 1..=9 {
                let ranges = by_work(&work, n);
                assert!(!ranges.is_empty() && ranges.len() <= n);
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges.last().unwrap().end, work.len());
                assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
                for r in &ranges {
                    let done: usize = work[r.clone()].iter().sum();
                    assert!(done <= total / n + most, "{n}: {r:?} has {done} of {total}");
                }
            }
        }
        // Equal work, equal lengths.
        assert_eq!(by_work(&[1; 10], 2), [0..5, 5..10]);
    }

    #[test]
    fn results_come_back_in_order_whatever_the_threads() {
        let square = |r: Range<usize>| r.map(|i| i * i).collect::<Vec<_>>();
        let one = in_ranges(by_work(&[1; 1000], 1), square);
        for n in [2, 3, 8] {
            assert_eq!(in_ranges(by_work(&[1; 1000], n), square), one);
        }
        assert_eq!(one[999], 999 * 999);
    }

    #[test]
    #[should_panic(expected = "item 7")]
    fn a_panic_on_a_thread_is_raised_again() {
        in_ranges(by_work(&[1; 10], 3), |r| {
            r.map(|i| if i == 7 { panic!("item 7") } else { i })
                .collect::<Vec<_>>()
        });
    }

    #[test]
    fn small_work_stays_on_one_thread() {
        assert_eq!(threads_for(10), 1);
        assert_eq!(threads_for(FROM - 1), 1);
        assert!(threads_for(1 << 20) >= 1);
    }
}
