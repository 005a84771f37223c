use rand::distributions::Alphanumeric;
use rand::Rng;

/// MediaConvert accepts up to 64 ASCII chars as a client request token.
pub fn request_token(prefix: &str) -> String {
    let suffix: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("{prefix}-{suffix}")
}
