//! Payment SDK calls that take the key through a request strategy (catalog
//! [`SdkToken`] rows): async-stripe's `Refund::create(&client, params)` on a client without
//! `with_strategy(RequestStrategy::Idempotent(key))` anywhere the client was built.

use super::{is_test_code, MISSING_IDEMPOTENCY_TOKEN};
use crate::analysis::{Locals, Step};
use crate::catalog::tokens::payments::SDKS;
use crate::catalog::tokens::SdkToken;
use crate::context::LintContext;
use crate::model::ir::{Expr, ExprKind};
use crate::model::Span;

pub(super) fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    if !SDKS
        .iter()
        .any(|s| s.packages.iter().any(|p| package.depends_on(p)))
    {
        return;
    }
    let resolver = &cx.analysis().resolver;
    let mut findings: Vec<(&'static SdkToken, Span, String)> = Vec::new();
    for file in &package.files {
        for f in &file.fns {
            let Some(body) = &f.body else { continue };
            if is_test_code(package, file, f) {
                continue;
            }
            let locals = Locals::of_body(body);
            body.walk(&mut |e| {
                let ExprKind::Call { func, args } = &e.kind else {
                    return;
                };
                let Some(path) = func.as_path() else { return };
                let def = resolver.resolve(file.target, &f.module, path, None);
                let Some(krate) = def.crate_name() else {
                    return;
                };
                let [.., ty, call] = &def.segments[..] else {
                    return;
                };
                let Some(sdk) = SDKS.iter().find(|s| {
                    s.krate == krate
                        && s.calls.contains(&call.as_str())
                        && s.types.contains(&ty.as_str())
                }) else {
                    return;
                };
                let keyed = args
                    .first()
                    .is_none_or(|client| client_may_be_keyed(&locals, client, sdk));
                if !keyed && !findings.iter().any(|(_, s, _)| *s == e.span) {
                    findings.push((sdk, e.span, format!("{ty}::{call}")));
                }
            });
        }
    }
    for (sdk, span, call) in findings {
        let message = format!(
            "`{call}` is sent without an idempotency key: its client has no `{}` strategy",
            sdk.keyed
        );
        cx.span_lint(&MISSING_IDEMPOTENCY_TOKEN, span, message, |d| {
            d.primary_label(format!("a {} create call", sdk.provider));
            d.note(
                "the default strategy sends no `Idempotency-Key`: a redelivered message or a \
                 restarted worker creates, charges or refunds again",
            );
            d.help(format!(
                "send it on `client.clone().with_strategy(RequestStrategy::{}(key))` with the \
                 key derived from the message being handled (its event id or order id)",
                sdk.keyed
            ));
        });
    }
}

/// Whether any way the client itself was built sets the keyed strategy, or may (a strategy
/// whose variant is not written at the setter). Ways through another call's arguments (the
/// strategy value of `with_strategy(..)` itself) are not the client; with no way of its own
/// the client is unknown and may be keyed.
fn client_may_be_keyed(locals: &Locals<'_>, client: &Expr, sdk: &SdkToken) -> bool {
    let Some(chains) = locals.chains(client) else {
        return true;
    };
    let mut own = chains
        .iter()
        .filter(|c| !c.steps.iter().any(|s| matches!(s, Step::Through(_))))
        .peekable();
    if own.peek().is_none() {
        return true;
    }
    own.any(|c| {
        c.methods().any(|m| {
            sdk.setters.contains(&m.method)
                && m.args.first().is_none_or(|a| names_keyed(a, sdk.keyed))
        })
    })
}

/// `RequestStrategy::Idempotent(key)`, or a strategy held elsewhere (it may be keyed).
fn names_keyed(arg: &Expr, keyed: &str) -> bool {
    match &arg.peel().kind {
        ExprKind::Call { func, .. } => func.as_path().is_none_or(|p| p.last() == keyed),
        ExprKind::Path(p) => p.segments.len() == 1,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing;

    fn found(src: &str) -> usize {
        let package = testing::package("app", &["async-stripe"], &[("crate", src)]);
        testing::check(&package, &Default::default())
            .iter()
            .filter(|d| d.lint.name == "missing_idempotency_token")
            .count()
    }

    #[test]
    fn a_create_on_a_client_without_the_keyed_strategy_is_found() {
        let bare = "use stripe::{Client, Refund};
            async fn f(client: &Client, p: stripe::CreateRefund<'_>) { Refund::create(client, p).await; }";
        let keyed = "use stripe::{Client, Refund, RequestStrategy};
            async fn f(client: &Client, id: &str, p: stripe::CreateRefund<'_>) {
                let c = client.clone().with_strategy(RequestStrategy::Idempotent(id.to_owned()));
                Refund::create(&c, p).await;
            }";
        let retried = "use stripe::{Client, Refund, RequestStrategy};
            async fn f(client: &Client, p: stripe::CreateRefund<'_>) {
                let c = client.clone().with_strategy(RequestStrategy::Retry(3));
                Refund::create(&c, p).await;
            }";
        assert_eq!((found(bare), found(keyed), found(retried)), (1, 0, 1));
    }
}
