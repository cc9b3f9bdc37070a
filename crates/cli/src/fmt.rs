//! Human-readable numbers for reports.

use std::time::Duration;

/// An integer with thousands separators: `1,234,567`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte size in decimal units: `512 B`, `41.2 kB`, `3.07 MB`, `1.20 GB`.
pub(crate) fn bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1e3 {
        format!("{n} B")
    } else if n < 1e6 {
        format!("{:.1} kB", n / 1e3)
    } else if n < 1e9 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.2} GB", n / 1e9)
    }
}

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
    fn thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(41_200), "41.2 kB");
        assert_eq!(bytes(1_200_000_000), "1.20 GB");
    }
}
