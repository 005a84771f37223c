//! Operations whose request takes an idempotency token: [`aws::AWS`], generated from the AWS
//! SDK for Rust's sources by `scripts/gen-token-catalog.py`, plus the APIs users add in the
//! config (`[lints.missing_idempotency_token] apis = [...]`).
//!
//! Not in the table: SQS `SendMessage`'s `message_deduplication_id`. Only FIFO queues take it,
//! and a FIFO queue without content-based deduplication rejects a message that lacks it, so
//! leaving it out is never a silent duplicate: either the call fails loudly or the queue
//! derives the id from the body. Which kind of queue a URL names is not in the source.

pub mod aws;

/// What happens to a request sent without its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// The SDK fills in a fresh random UUID on every `send()` (a Smithy `@idempotencyToken`
    /// member): the SDK's own retries of that one `send()` are deduplicated, nothing else.
    SdkUuid,
    /// Nothing fills it: every request is a new one.
    Unset,
}

/// One operation of the built-in table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenApi {
    /// The crate as code names it: `aws_sdk_mediaconvert`.
    pub krate: &'static str,
    /// The client method starting the operation's fluent builder: `create_job`.
    pub method: &'static str,
    /// The builder's setter for the token: `client_request_token`.
    pub token: &'static str,
    pub fill: Fill,
    /// What the SDK documentation says of the token, one sentence.
    pub note: &'static str,
}

/// An operation the lint looks for, from the built-in table or the user's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api<'a> {
    /// `None` for a configured API without a crate: the method name alone identifies it.
    pub krate: Option<&'a str>,
    pub method: &'a str,
    pub token: &'a str,
    /// The method that sends the built request.
    pub send: &'a str,
    pub fill: Fill,
    pub note: &'a str,
    /// An AWS SDK operation: its client type is the crate's `Client`.
    pub is_aws: bool,
}

impl<'a> From<&'a TokenApi> for Api<'a> {
    fn from(t: &'a TokenApi) -> Api<'a> {
        Api {
            krate: Some(t.krate),
            method: t.method,
            token: t.token,
            send: "send",
            fill: t.fill,
            note: t.note,
            is_aws: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::aws::AWS;
    use super::Fill;

    fn find(krate: &str, method: &str) -> Option<&'static super::TokenApi> {
        AWS.iter().find(|t| t.krate == krate && t.method == method)
    }

    #[test]
    fn the_table_holds_the_operations_the_design_names() {
        let want = [
            ("aws_sdk_mediaconvert", "create_job", "client_request_token"),
            (
                "aws_sdk_dynamodb",
                "transact_write_items",
                "client_request_token",
            ),
            ("aws_sdk_ec2", "run_instances", "client_token"),
            ("aws_sdk_sfn", "start_execution", "name"),
            ("aws_sdk_efs", "create_file_system", "creation_token"),
        ];
        for (krate, method, token) in want {
            let t = find(krate, method).unwrap_or_else(|| panic!("{krate} {method}"));
            assert_eq!(t.token, token);
        }
        assert_eq!(
            find("aws_sdk_mediaconvert", "create_job").map(|t| t.fill),
            Some(Fill::SdkUuid)
        );
        assert!(find("aws_sdk_sqs", "send_message").is_none());
        assert!(find("aws_sdk_codepipeline", "acknowledge_third_party_job").is_none());
    }

    #[test]
    fn the_table_is_sorted_without_duplicates() {
        for pair in AWS.windows(2) {
            let key = |t: &super::TokenApi| (t.krate, t.method, t.token);
            assert!(key(&pair[0]) < key(&pair[1]), "{:?}", pair[1]);
        }
    }
}
