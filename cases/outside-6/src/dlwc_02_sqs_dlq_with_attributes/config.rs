pub const PAYOUT_EVENTS_QUEUE: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/payout-events";
pub const PAYOUT_EVENTS_DLQ: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/payout-events-dlq";
