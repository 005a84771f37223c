use sha2::{Digest, Sha256};

/// MediaConvert accepts up to 64 characters; a hex SHA-256 of the source identity fits.
pub fn transcode_token(bucket: &str, key: &str, etag: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"audio-aac-v2:");
    h.update(bucket.as_bytes());
    h.update(b"/");
    h.update(key.as_bytes());
    h.update(b"@");
    h.update(etag.trim_matches('"').as_bytes());
    hex::encode(h.finalize())
}
