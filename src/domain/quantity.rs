//! Kubernetes resource quantities, as exact milli-units, for summing pod requests.

/// A quantity in thousandths of its unit (millicores, millibytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Milli(pub i128);

impl std::ops::Add for Milli {
    type Output = Milli;
    fn add(self, other: Milli) -> Milli {
        Milli(self.0.saturating_add(other.0))
    }
}

/// Parses `500m`, `2`, `1.5Gi`, `1e3`, `128974848`... Rounds sub-milli values up,
/// as Kubernetes does.
pub fn parse(text: &str) -> Option<Milli> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (mul, div): (i128, i128) = match suffix {
        "" => (1000, 1),
        "n" => (1, 1_000_000),
        "u" => (1, 1000),
        "m" => (1, 1),
        "k" => (1000 * 1000, 1),
        "M" => (1000 * 1_000_000, 1),
        "G" => (1000 * 1_000_000_000, 1),
        "T" => (1000 * 1_000_000_000_000, 1),
        "P" => (1000 * 1_000_000_000_000_000, 1),
        "E" => (1000 * 1_000_000_000_000_000_000, 1),
        "Ki" => (1000 << 10, 1),
        "Mi" => (1000 << 20, 1),
        "Gi" => (1000 << 30, 1),
        "Ti" => (1000 << 40, 1),
        "Pi" => (1000 << 50, 1),
        "Ei" => (1000 << 60, 1),
        s if s.starts_with(['e', 'E']) => {
            let exp: u32 = s[1..].parse().ok()?;
            (1000 * 10i128.checked_pow(exp)?, 1)
        }
        _ => return None,
    };
    let negative = number.starts_with('-');
    let number = number.trim_start_matches(['+', '-']);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let scale = 10i128.checked_pow(frac.len() as u32)?;
    let whole: i128 = format!("{int}{frac}").parse().ok()?;
    let numerator = whole.checked_mul(mul)?;
    let denominator = scale * div;
    let value = (numerator + denominator - 1) / denominator;
    Some(Milli(if negative { -value } else { value }))
}

/// Formats canonically: whole units when exact, else millis.
pub fn format(q: Milli) -> String {
    if q.0 % 1000 == 0 {
        (q.0 / 1000).to_string()
    } else {
        format!("{}m", q.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1", 1000)]
    #[case("500m", 500)]
    #[case("0.5", 500)]
    #[case("1Ki", 1024 * 1000)]
    #[case("1.5Gi", 1536 * 1024 * 1024 * 1000)]
    #[case("2k", 2_000_000)]
    #[case("1e3", 1_000_000)]
    #[case("100n", 1)]
    fn parses(#[case] text: &str, #[case] milli: i128) {
        assert_eq!(parse(text), Some(Milli(milli)));
    }

    #[rstest]
    #[case("")]
    #[case("abc")]
    #[case("1Xi")]
    #[case(".")]
    fn rejects(#[case] text: &str) {
        assert_eq!(parse(text), None);
    }

    #[test]
    fn formats() {
        assert_eq!(format(Milli(1500)), "1500m");
        assert_eq!(format(Milli(2000)), "2");
    }
}
