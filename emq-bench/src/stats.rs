//! Percentiles of latency samples and medians across runs.

/// The `p`-th percentile (0..=100) of `samples` by the nearest-rank method:
/// the smallest sample such that at least `p`% of samples are <= it.
/// Sorts `samples` in place. `None` for no samples or a `p` outside 0..=100.
pub fn percentile(samples: &mut [u64], p: f64) -> Option<u64> {
    if samples.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    samples.sort_unstable();
    Some(percentile_sorted(samples, p))
}

/// As [`percentile`], for samples already sorted ascending (not empty).
pub fn percentile_sorted(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    // nearest rank: ceil(p/100 * n), 1-based, at least 1
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// The median of `values`; the mean of the two middle values for an even
/// count. NaNs are ignored. `None` when nothing is left.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// p50 and p99 of latency samples in nanoseconds, as microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(samples_ns: &mut [u64]) -> Option<Latency> {
        if samples_ns.is_empty() {
            return None;
        }
        samples_ns.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Latency {
            p50_us: us(percentile_sorted(samples_ns, 50.0)),
            p99_us: us(percentile_sorted(samples_ns, 99.0)),
            max_us: us(*samples_ns.last().unwrap_or(&0)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_uses_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(&mut v, 50.0), Some(50));
        assert_eq!(percentile(&mut v, 99.0), Some(99));
        assert_eq!(percentile(&mut v, 100.0), Some(100));
        assert_eq!(percentile(&mut v, 0.0), Some(1));
        assert_eq!(percentile(&mut v, 1.0), Some(1));
        assert_eq!(percentile(&mut v, 1.5), Some(2));
    }

    #[test]
    fn percentile_of_small_and_degenerate_inputs() {
        assert_eq!(percentile(&mut [], 50.0), None);
        assert_eq!(percentile(&mut [7], 50.0), Some(7));
        assert_eq!(percentile(&mut [7], 99.0), Some(7));
        assert_eq!(percentile(&mut [3, 1], 50.0), Some(1));
        assert_eq!(percentile(&mut [3, 1], 51.0), Some(3));
        assert_eq!(percentile(&mut [1, 2], 101.0), None);
        assert_eq!(percentile(&mut [1, 2], -1.0), None);
        assert_eq!(percentile(&mut [1, 2], f64::NAN), None);
    }

    #[test]
    fn p99_sees_the_tail() {
        // 990 fast samples and 10 slow ones: p99 is still fast, p99.1 slow.
        let mut v = vec![10u64; 990];
        v.resize(1000, 1000);
        assert_eq!(percentile(&mut v, 99.0), Some(10));
        assert_eq!(percentile(&mut v, 99.1), Some(1000));
        // 989 fast and 11 slow: p99 is slow.
        let mut w = vec![10u64; 989];
        w.resize(1000, 1000);
        assert_eq!(percentile(&mut w, 99.0), Some(1000));
    }

    #[test]
    fn median_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[f64::NAN, 1.0, 9.0, 5.0]), Some(5.0));
    }

    #[test]
    fn latency_in_microseconds() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let l = Latency::of(&mut v).unwrap();
        assert_eq!(l.p50_us, 500.0);
        assert_eq!(l.p99_us, 990.0);
        assert_eq!(l.max_us, 1000.0);
        assert_eq!(Latency::of(&mut []), None);
    }
}
