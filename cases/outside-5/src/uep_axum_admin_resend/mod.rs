//! expect: unguarded_entry_point
//!
//! Order-confirmation e-mails. The public confirm endpoint goes through `OrderService`, which
//! claims the order's confirmation key first; the back-office "resend" button calls the mailer
//! directly with no claim, so a double click (or a proxy retry) sends two e-mails.

mod admin;
mod guard;
mod mailer;
mod service;

use std::sync::Arc;

use axum::routing::post;
use axum::Router;

use self::guard::RedisGuard;
use self::mailer::ConfirmationMailer;
use self::service::OrderService;

#[derive(Clone)]
pub struct AppState {
    pub orders: Arc<OrderService>,
    pub mailer: Arc<ConfirmationMailer>,
    pub guard: Arc<RedisGuard>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/orders/:id/confirm", post(service::confirm_order))
        .route("/admin/orders/:id/resend-confirmation", post(admin::resend_confirmation))
        .with_state(state)
}
