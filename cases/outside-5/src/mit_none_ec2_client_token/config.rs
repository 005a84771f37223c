pub const LONG_POLL_SECS: i32 = 20;
pub const SANDBOX_AMI: &str = "ami-0a1b2c3d4e5f67890";
pub const GPU_INSTANCE: &str = "g5.xlarge";
pub const CPU_INSTANCE: &str = "m6i.large";
pub const SUBNET_ID: &str = "subnet-0123456789abcdef0";
