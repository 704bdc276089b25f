//! Short, DNS-safe names from hashes: lowercase base32 (letters and 2-7), no padding.

use data_encoding::BASE32_NOPAD;
use sha2::{Digest, Sha256};

/// The first `chars` characters (at most 52) of the lowercase base32 of a 32-byte hash.
pub fn base32(hash: &[u8], chars: usize) -> String {
    let mut encoded = BASE32_NOPAD.encode(hash);
    encoded.truncate(chars);
    encoded.make_ascii_lowercase();
    encoded
}

/// `chars` characters of the SHA-256 of `input`.
pub fn hashed(input: &str, chars: usize) -> String {
    base32(&Sha256::digest(input.as_bytes()), chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_label_safe_and_stable() {
        let name = hashed("cluster/group", 16);
        assert_eq!(name.len(), 16);
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
        );
        assert_eq!(name, hashed("cluster/group", 16));
        assert_ne!(name, hashed("cluster/group2", 16));
        assert_eq!(base32(&[0u8; 32], 52).len(), 52);
    }
}
