//! Numbers for people: how every tool (`noticectl`, `notice-proof`) prints a count, in one place.

/// A whole number with a space between thousands: `1234567` → `1 234 567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_are_spaced_from_the_right() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1 000");
        assert_eq!(thousands(27_000_000), "27 000 000");
        assert_eq!(thousands(1_234_567), "1 234 567");
    }
}
