//! Stable hashes of findings: SARIF's `partialFingerprints` and the baseline's keys must
//! stay the same across runs, Rust releases and machines.

/// FNV-1a over `parts`, each followed by a zero byte (so `("ab", "c")` and `("a", "bc")`
/// differ), as 16 hex digits. Tiny and stable, unlike `DefaultHasher`.
pub fn hash_parts(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.as_bytes().iter().chain([&0u8]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// `text` with every run of whitespace made one space and the ends trimmed: reindenting
/// or rewrapping the flagged code does not change what it is.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_delimited() {
        assert_ne!(hash_parts(&["ab", "c"]), hash_parts(&["a", "bc"]));
        assert_eq!(hash_parts(&["x"]).len(), 16);
        assert_eq!(normalize("  let  x =\n\t1; "), "let x = 1;");
    }
}
