use std::time::Duration;

pub const MAX_ATTEMPTS: u32 = 6;
pub const RETRY_DELAY: Duration = Duration::from_secs(5);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
