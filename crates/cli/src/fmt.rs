//! Human-readable numbers for reports.

use std::time::Duration;

pub(crate) use grist_tensor::report::{bytes, count};

/// A rate per second with a unit: `1,234,567 records/s`.
pub(crate) fn per_second(n: f64, unit: &str) -> String {
    format!("{} {unit}/s", count(n.round().max(0.0) as u64))
}

/// Megabytes (10^6 bytes) per second with one decimal: `640.3 MB/s`.
pub(crate) fn mb_per_second(bytes_per_s: f64) -> String {
    format!("{:.1} MB/s", bytes_per_s / 1e6)
}

/// A duration in seconds with two decimals: `3.05 s`.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(per_second(1234.4, "records"), "1,234 records/s");
        assert_eq!(mb_per_second(640.34e6), "640.3 MB/s");
        assert_eq!(seconds(Duration::from_millis(3050)), "3.05 s");
    }
}
