//! Logical types as text, the way fastavro 1.13 converts them on reading
//! and Python prints the result: `date`, `time-*`, `timestamp-*` and
//! `local-timestamp-*` as `isoformat()`, `decimal` as `str(Decimal)`,
//! `uuid` as `str(UUID)`. Values fastavro cannot convert (a date past year
//! 9999, a time past 23:59, a malformed UUID) are errors, as they are in
//! fastavro.

use serde_json::Value;

use crate::generic::AvroValue;
use crate::schema::Node;

/// A logical type as fastavro 1.13 converts it on reading, on the
/// underlying types it converts it on (others are read as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Logical {
    /// `date` on `int`: days since 1970-01-01.
    Date,
    /// `time-millis` on `int`.
    TimeMillis,
    /// `time-micros` on `long`.
    TimeMicros,
    /// `timestamp-millis` on `long` (UTC).
    TimestampMillis,
    /// `timestamp-micros` on `long` (UTC).
    TimestampMicros,
    /// `local-timestamp-millis` on `long` (no time zone).
    LocalTimestampMillis,
    /// `local-timestamp-micros` on `long` (no time zone).
    LocalTimestampMicros,
    /// `decimal` on `bytes` or `fixed`: a big-endian two's-complement
    /// unscaled integer.
    Decimal {
        /// The most significant digits kept (fastavro rounds to them).
        precision: u32,
        /// The digits after the point.
        scale: u32,
    },
    /// `uuid` on `string`.
    Uuid,
}

impl Logical {
    /// The logical type fastavro converts a type object `m` with
    /// underlying node `node` to, if any. A `decimal` whose precision is
    /// missing or whose scale exceeds its precision stays its bytes
    /// (fastavro refuses such a schema; the specification ignores it).
    pub(crate) fn of(m: &serde_json::Map<String, Value>, node: &Node) -> Option<Logical> {
        let name = m.get("logicalType")?.as_str()?;
        Some(match (name, node) {
            ("date", Node::Int) => Logical::Date,
            ("time-millis", Node::Int) => Logical::TimeMillis,
            ("time-micros", Node::Long) => Logical::TimeMicros,
            ("timestamp-millis", Node::Long) => Logical::TimestampMillis,
            ("timestamp-micros", Node::Long) => Logical::TimestampMicros,
            ("local-timestamp-millis", Node::Long) => Logical::LocalTimestampMillis,
            ("local-timestamp-micros", Node::Long) => Logical::LocalTimestampMicros,
            ("uuid", Node::String) => Logical::Uuid,
            ("decimal", Node::Bytes | Node::Fixed(_)) => {
                let int = |k: &str| m.get(k).and_then(Value::as_u64).map(u32::try_from);
                let precision = int("precision")?.ok().filter(|&p| p > 0)?;
                let scale = int("scale").unwrap_or(Ok(0)).ok()?;
                if scale > precision {
                    return None;
                }
                Logical::Decimal { precision, scale }
            }
            _ => return None,
        })
    }
}

/// Microseconds per day.
const DAY_US: i128 = 86_400_000_000;
/// Days from 0001-01-01 to 1970-01-01 (Python's `date.toordinal` less 1).
const EPOCH_DAYS: i64 = 719_162;
/// Days from 0001-01-01 to 9999-12-31.
const MAX_DAYS: i64 = 3_652_058;

/// `value` (of the logical type's underlying type) as fastavro's value
/// printed by Python, or `None` when the value is not of that type.
pub(crate) fn to_text(logical: Logical, value: &AvroValue<'_>) -> Result<Option<String>, String> {
    Ok(Some(match (logical, value) {
        (Logical::Date, &AvroValue::Int(days)) => date(i64::from(days) + EPOCH_DAYS)
            .ok_or_else(|| format!("date {days}: out of range (years 1 to 9999)"))?,
        (Logical::TimeMillis, &AvroValue::Int(ms)) => time(i64::from(ms), 1_000)?,
        (Logical::TimeMicros, &AvroValue::Long(us)) => time(us, 1)?,
        (Logical::TimestampMillis, &AvroValue::Long(ms)) => {
            timestamp(i128::from(ms) * 1_000, "+00:00")?
        }
        (Logical::TimestampMicros, &AvroValue::Long(us)) => timestamp(i128::from(us), "+00:00")?,
        (Logical::LocalTimestampMillis, &AvroValue::Long(ms)) => {
            timestamp(i128::from(ms) * 1_000, "")?
        }
        (Logical::LocalTimestampMicros, &AvroValue::Long(us)) => timestamp(i128::from(us), "")?,
        (Logical::Decimal { precision, scale }, AvroValue::Bytes(b) | AvroValue::Fixed(b)) => {
            decimal(b, precision, scale)?
        }
        (Logical::Uuid, AvroValue::String(s)) => uuid(s)?,
        _ => return Ok(None),
    }))
}

/// The date `ordinal` days after 0001-01-01 as `YYYY-MM-DD`, if in
/// Python's range.
fn date(ordinal: i64) -> Option<String> {
    if !(0..=MAX_DAYS).contains(&ordinal) {
        return None;
    }
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = ordinal - EPOCH_DAYS + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    Some(format!("{y:04}-{m:02}-{d:02}"))
}

/// `HH:MM:SS[.ffffff]`, Python's `time.isoformat()`.
fn clock(h: i64, m: i64, s: i64, us: i64) -> String {
    match us {
        0 => format!("{h:02}:{m:02}:{s:02}"),
        _ => format!("{h:02}:{m:02}:{s:02}.{us:06}"),
    }
}

/// fastavro's `read_time_millis` / `read_time_micros` (`unit`: µs per
/// tick): hours by truncating division, minutes and seconds modulo 60,
/// the fraction modulo a second; hours outside 0..=23 fail.
fn time(t: i64, unit: i64) -> Result<String, String> {
    let per_second = 1_000_000 / unit;
    let h = t / (3_600 * per_second);
    if !(0..24).contains(&h) {
        return Err(format!("time {t}: hour {h} is out of range (0 to 23)"));
    }
    let m = (t / (60 * per_second)).rem_euclid(60);
    let s = (t / per_second).rem_euclid(60);
    let us = t.rem_euclid(per_second) * unit;
    Ok(clock(h, m, s, us))
}

/// 1970-01-01T00:00:00 plus `us` microseconds, Python's
/// `datetime.isoformat()` with `offset` after it, if in Python's range.
fn timestamp(us: i128, offset: &str) -> Result<String, String> {
    let total = us + i128::from(EPOCH_DAYS) * DAY_US;
    let days = total.div_euclid(DAY_US);
    let day = date(i64::try_from(days).unwrap_or(-1))
        .ok_or_else(|| format!("timestamp of {us} µs: out of range (years 1 to 9999)"))?;
    let of_day = total.rem_euclid(DAY_US) as i64;
    let s = of_day / 1_000_000;
    let clock = clock(s / 3_600, s / 60 % 60, s % 60, of_day % 1_000_000);
    Ok(format!("{day}T{clock}{offset}"))
}

/// The longest unscaled decimal converted (its decimal digits are found
/// by repeated division, quadratic in the length).
const MAX_DECIMAL_BYTES: usize = 4_096;

/// A big-endian two's-complement integer, scaled by 10^-`scale` and
/// rounded half-even to `precision` digits, as Python's `str(Decimal)`
/// prints it (fastavro's `read_decimal`).
fn decimal(bytes: &[u8], precision: u32, scale: u32) -> Result<String, String> {
    if bytes.len() > MAX_DECIMAL_BYTES {
        return Err(format!(
            "a decimal of {} bytes (grist converts at most {MAX_DECIMAL_BYTES})",
            bytes.len()
        ));
    }
    let negative = bytes.first().is_some_and(|&b| b & 0x80 != 0);
    // The magnitude, big-endian, in 32-bit limbs.
    let mut mag: Vec<u8> = bytes.to_vec();
    if negative {
        // Two's complement: invert and add one.
        mag.iter_mut().for_each(|b| *b = !*b);
        for b in mag.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
    }
    let mut limbs: Vec<u32> = Vec::with_capacity(mag.len() / 4 + 1);
    let pad = (4 - mag.len() % 4) % 4;
    let padded: Vec<u8> = std::iter::repeat_n(0, pad).chain(mag).collect();
    for c in padded.chunks(4) {
        limbs.push(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    // Decimal digits, least significant first, nine at a time.
    let mut digits = Vec::new();
    while limbs.iter().any(|&l| l != 0) {
        let mut rem = 0u64;
        for l in limbs.iter_mut() {
            let cur = (rem << 32) | u64::from(*l);
            *l = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        for _ in 0..9 {
            digits.push((rem % 10) as u8);
            rem /= 10;
        }
    }
    while digits.len() > 1 && digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        digits.push(0);
    }
    digits.reverse();
    let mut exp = -i64::from(scale);
    // Rounded half-even to `precision` significant digits.
    let precision = precision as usize;
    if digits.len() > precision {
        let dropped = digits.len() - precision;
        let first = digits[precision];
        let rest_nonzero = digits[precision + 1..].iter().any(|&d| d != 0);
        digits.truncate(precision);
        exp += dropped as i64;
        let up = first > 5 || (first == 5 && (rest_nonzero || digits[precision - 1] % 2 == 1));
        if up {
            let mut i = precision;
            loop {
                if i == 0 {
                    digits.insert(0, 1);
                    digits.pop();
                    exp += 1;
                    break;
                }
                i -= 1;
                if digits[i] == 9 {
                    digits[i] = 0;
                } else {
                    digits[i] += 1;
                    break;
                }
            }
        }
    }
    let int: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    Ok(python_decimal_str(negative, &int, exp))
}

/// Python's `Decimal.__str__` of sign, coefficient digits and exponent.
fn python_decimal_str(negative: bool, int: &str, exp: i64) -> String {
    let n = int.len() as i64;
    let left = exp + n;
    let dot = if exp <= 0 && left > -6 { left } else { 1 };
    let (ip, fp) = if dot <= 0 {
        (
            "0".to_string(),
            format!(".{}{int}", "0".repeat((-dot) as usize)),
        )
    } else if dot >= n {
        (
            format!("{int}{}", "0".repeat((dot - n) as usize)),
            String::new(),
        )
    } else {
        (
            int[..dot as usize].to_string(),
            format!(".{}", &int[dot as usize..]),
        )
    };
    let e = if left == dot {
        String::new()
    } else {
        format!("E{:+}", left - dot)
    };
    let sign = if negative { "-" } else { "" };
    format!("{sign}{ip}{fp}{e}")
}

/// Python's `str(uuid.UUID(s))`: 32 hex digits, after removing `urn:`,
/// `uuid:`, surrounding braces and hyphens, printed in lower case in the
/// 8-4-4-4-12 form.
fn uuid(s: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(s).map_err(|_| "a uuid that is not UTF-8".to_string())?;
    let hex: String = text
        .replace("urn:", "")
        .replace("uuid:", "")
        .trim_matches(|c| c == '{' || c == '}')
        .replace('-', "");
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("uuid {text:?}: badly formed"));
    }
    let h = hex.to_ascii_lowercase();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_forms() {
        assert_eq!(date(EPOCH_DAYS).as_deref(), Some("1970-01-01"));
        assert_eq!(date(0).as_deref(), Some("0001-01-01"));
        assert_eq!(date(MAX_DAYS).as_deref(), Some("9999-12-31"));
        assert_eq!(time(-1, 1_000).unwrap(), "00:00:00.999000");
        assert!(time(86_400_000, 1_000).is_err());
        assert_eq!(python_decimal_str(false, "1", -7), "1E-7");
        assert_eq!(python_decimal_str(true, "1234567", -3), "-1234.567");
        assert_eq!(decimal(&[0x7f, 0xff, 0xff], 2, 0).unwrap(), "8.4E+6");
        assert_eq!(decimal(&[0xff, 0x00], 20, 0).unwrap(), "-256");
        assert_eq!(decimal(&[], 20, 7).unwrap(), "0E-7");
    }
}
