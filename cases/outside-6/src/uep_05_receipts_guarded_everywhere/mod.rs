//! expect: none
//! Receipt mailer with two entry points: a Kafka consumer of `payments.settled` and an admin
//! "resend receipt" route. Both go through `mailer::send_receipt_once`, which takes the claim
//! itself; the admin route passes the resend request id the admin UI generated and put in the
//! request body, so a double click is one resend and a second resend is a new request.
pub mod admin;
pub mod consumer;
pub mod mailer;
