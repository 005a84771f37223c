//! expect: none
//! Accounts service. The first verification e-mail goes out from the `user.signed_up` consumer,
//! once per event (claim on the event id). The "Send me another e-mail" button calls
//! `resend_verification`, which sends a fresh e-mail every time on purpose: each click is a new
//! user command with a new link, and the old link stays valid until it expires.
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message};
use axum::{extract::State, http::StatusCode, Extension};
use futures::StreamExt;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;

pub struct Accounts {
    pub ses: aws_sdk_sesv2::Client,
    pub redis: redis::aio::ConnectionManager,
    pub link_secret: Vec<u8>,
}

pub struct SessionUser {
    pub user_id: String,
    pub email: String,
}

fn signed_link(secret: &[u8], user_id: &str) -> String {
    let expires = chrono::Utc::now().timestamp() + 48 * 3600;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("key");
    mac.update(format!("{user_id}.{expires}").as_bytes());
    let sig = hex::encode(mac.finalize().into_bytes());
    format!("https://app.example.com/verify?u={user_id}&e={expires}&s={sig}")
}

async fn send_verification_email(a: &Accounts, user_id: &str, email: &str) -> anyhow::Result<()> {
    let link = signed_link(&a.link_secret, user_id);
    let msg = Message::builder()
        .subject(Content::builder().data("Confirm your e-mail").build()?)
        .body(Body::builder().text(Content::builder().data(format!("Confirm: {link}")).build()?).build())
        .build();
    a.ses
        .send_email()
        .from_email_address("no-reply@example.com")
        .destination(Destination::builder().to_addresses(email).build())
        .content(EmailContent::builder().simple(msg).build())
        .send()
        .await?;
    Ok(())
}

pub async fn on_signed_up(a: Arc<Accounts>, nats: async_nats::Client) -> anyhow::Result<()> {
    let mut sub = nats.subscribe("user.signed_up").await?;
    while let Some(msg) = sub.next().await {
        let ev: serde_json::Value = match serde_json::from_slice(&msg.payload) {
            Ok(v) => v,
            Err(_) => continue,
        };
        let event_id = ev["event_id"].as_str().unwrap_or_default().to_owned();
        let user_id = ev["user_id"].as_str().unwrap_or_default().to_owned();
        let email = ev["email"].as_str().unwrap_or_default().to_owned();
        let mut conn = a.redis.clone();
        let first: Option<String> = redis::cmd("SET")
            .arg(format!("verify-mail:{event_id}"))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(3 * 24 * 3600)
            .query_async(&mut conn)
            .await?;
        if first.is_none() {
            continue;
        }
        if let Err(e) = send_verification_email(&a, &user_id, &email).await {
            tracing::warn!(error = %e, "verification mail failed");
            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("verify-mail:{event_id}")).query_async(&mut conn).await;
        }
    }
    Ok(())
}

/// POST /me/verification-email (the user asked for another e-mail)
pub async fn resend_verification(State(a): State<Arc<Accounts>>, Extension(user): Extension<SessionUser>) -> StatusCode {
    match send_verification_email(&a, &user.user_id, &user.email).await {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => StatusCode::BAD_GATEWAY,
    }
}
