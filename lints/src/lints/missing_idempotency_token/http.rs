//! Payment APIs called through a generic HTTP client: a `POST` to a host of the catalog's
//! [`HttpToken`] table (`api.stripe.com`, PayPal, Adyen, Square, ...) sent without the key
//! the provider takes (`Idempotency-Key`, `PayPal-Request-Id`, Square's `idempotency_key`
//! body field). A key that is set, whatever its value, is not this lint's: a key minted per
//! call (`Uuid::new_v4()`) is `nondeterministic_key`'s.

use super::{is_test_code, MISSING_IDEMPOTENCY_TOKEN};
use crate::analysis::message_key;
use crate::analysis::resolve::Krate;
use crate::analysis::{Analysis, Chain, Locals, Step};
use crate::catalog::tokens::{http_api_of, HttpToken, TokenPlace};
use crate::context::LintContext;
use crate::diagnostic::Applicability;
use crate::model::ir::{Expr, ExprKind, Lit};
use crate::model::{FileModel, Package, Span};

/// Methods of an HTTP client that start a `POST` with its URL as the one argument.
const POST_STARTS: &[&str] = &["post"];
/// Methods that start a request of any method: `request(Method::POST, url)`.
const REQUEST_STARTS: &[&str] = &["request"];
/// Methods that send a built request.
const SENDS: &[&str] = &["send"];
/// Methods that set many headers at once, from a map the source may build anywhere.
const HEADER_MAPS: &[&str] = &["headers"];
/// Methods that set one header: `(name, value)`.
const HEADER_SETTERS: &[&str] = &["header"];
/// Methods that set the body.
const BODY_SETTERS: &[&str] = &["json", "form", "body"];

struct Finding {
    api: &'static HttpToken,
    start: Span,
    send: Span,
    insert_at: Span,
    key: Option<message_key::MessageKey>,
}

pub(super) fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let analysis = cx.analysis();
    let mut findings = Vec::new();
    for file in &package.files {
        for f in &file.fns {
            let Some(body) = &f.body else { continue };
            if is_test_code(package, file, f) || !starts_a_request(body) {
                continue;
            }
            let locals = Locals::of_body(body);
            body.walk(&mut |e| {
                for (api, start, send, insert_at) in
                    unkeyed_posts(package, analysis, file, &f.module, &locals, e)
                {
                    if !findings.iter().any(|g: &Finding| g.start == start) {
                        findings.push(Finding {
                            api,
                            start,
                            send,
                            insert_at,
                            key: message_key::in_params(package, f),
                        });
                    }
                }
            });
        }
    }
    for f in findings {
        report(cx, f);
    }
}

/// Whether the body starts an HTTP request (most bodies do not), which may be a `POST`.
fn starts_a_request(body: &crate::model::ir::Block) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if !found {
            found = matches!(&e.kind, ExprKind::MethodCall { method, .. } if POST_STARTS.contains(&method.as_str()) || REQUEST_STARTS.contains(&method.as_str()));
        }
    });
    found
}

/// The `POST`s to a table host that `e` sends (if it is a `send` call) without their key.
fn unkeyed_posts(
    package: &Package,
    analysis: &Analysis,
    file: &FileModel,
    module: &[String],
    locals: &Locals<'_>,
    e: &Expr,
) -> Vec<(&'static HttpToken, Span, Span, Span)> {
    let ExprKind::MethodCall {
        receiver,
        method,
        method_span,
        ..
    } = &e.kind
    else {
        return Vec::new();
    };
    if !SENDS.contains(&method.as_str()) {
        return Vec::new();
    }
    // Too many ways to follow: one of them might set the key.
    let Some(chains) = locals.chains(receiver) else {
        return Vec::new();
    };
    let url_text = |u: &Expr| url_text(package, analysis, locals, file, module, u, 0);
    let mut out = Vec::new();
    for chain in &chains {
        let Some((at, api, start)) = post_in(chain, &url_text) else {
            continue;
        };
        if key_may_be_set(&chain.steps[at + 1..], api.place) {
            continue;
        }
        out.push((api, start, *method_span, receiver.span.shrink_to_hi()));
    }
    out
}

/// The step starting a `POST` to a table host, its API and the call's span.
fn post_in(
    chain: &Chain<'_>,
    url_text: &dyn Fn(&Expr) -> Option<String>,
) -> Option<(usize, &'static HttpToken, Span)> {
    chain.steps.iter().enumerate().find_map(|(i, s)| {
        let Step::Method(m) = s else { return None };
        let url = if POST_STARTS.contains(&m.method) {
            m.args.first()?
        } else if REQUEST_STARTS.contains(&m.method) {
            let [verb, url] = m.args else { return None };
            let is_post = verb.as_path().is_some_and(|p| p.last() == "POST")
                || verb.as_str_lit() == Some("POST");
            if !is_post {
                return None;
            }
            url
        } else {
            return None;
        };
        let api = http_api_of(&url_text(url)?)?;
        Some((i, api, m.call_span()))
    })
}

/// Whether a step after the start may set the key: the header by name (any spelling of its
/// case), a header map or a header of unknown name, a body whose field list is not written
/// here, or a call that takes the request through a function of its own.
fn key_may_be_set(later: &[Step<'_>], place: TokenPlace) -> bool {
    later.iter().any(|s| match s {
        Step::Through(_) => true,
        Step::Method(m) => match place {
            TokenPlace::Header(name) => {
                HEADER_MAPS.contains(&m.method)
                    || (HEADER_SETTERS.contains(&m.method)
                        && m.args.first().is_none_or(|a| names_header(a, name)))
            }
            TokenPlace::BodyField(field) => {
                BODY_SETTERS.contains(&m.method)
                    && m.args.first().is_none_or(|a| body_may_hold(a, field))
            }
        },
    })
}

/// Whether a header-name argument is `name` or may be (a name not written as a literal).
fn names_header(arg: &Expr, name: &str) -> bool {
    match &arg.peel().kind {
        ExprKind::Lit(Lit::Str(s)) => s.eq_ignore_ascii_case(name),
        // `HeaderName::from_static("idempotency-key")`.
        ExprKind::Call { args, .. } => args.iter().any(|a| names_header(a, name)),
        _ => true,
    }
}

/// Whether a body argument may hold `field`: a `json!` literal that names it, or anything
/// whose fields are not written at the call (a struct built elsewhere, a `json!` object,
/// whose `{ "k": v }` input the lowering does not keep).
fn body_may_hold(arg: &Expr, field: &str) -> bool {
    match &arg.peel().kind {
        ExprKind::Macro(m) if m.path.last() == "json" => {
            // `json!({ .. })` keeps its keys as string literals among its arguments.
            let mut named = !m.parsed;
            for a in &m.args {
                a.walk(&mut |e| {
                    if matches!(&e.kind, ExprKind::Lit(Lit::Str(s)) if s == field) {
                        named = true;
                    }
                });
            }
            named
        }
        _ => true,
    }
}

/// The constant text of a URL argument: a literal, a constant of the crate, the template of
/// a `format!` with its constant arguments filled in (`format!("{STRIPE}/v1/refunds")`).
fn url_text(
    package: &Package,
    analysis: &Analysis,
    locals: &Locals<'_>,
    file: &FileModel,
    module: &[String],
    e: &Expr,
    depth: usize,
) -> Option<String> {
    if depth > 4 {
        return None;
    }
    match &e.peel().kind {
        ExprKind::Lit(Lit::Str(s)) => Some(s.clone()),
        ExprKind::Path(p) => {
            // A local with one definition: `let url = format!(..);`.
            if let Some(name) = p.as_ident() {
                if let [def] = locals.defs(name) {
                    return url_text(package, analysis, locals, file, module, def, depth + 1);
                }
            }
            let def = analysis.resolver.resolve(file.target, module, p, None);
            let Krate::Local(target) = def.krate else {
                return None;
            };
            let (cfile, c) = package.const_def(target, &def.segments)?;
            url_text(
                package,
                analysis,
                &Locals::default(),
                cfile,
                &c.module,
                &c.value,
                depth + 1,
            )
        }
        ExprKind::Macro(m) if m.path.last() == "format" => {
            let template_arg = m.args.first()?;
            let template = template_arg.as_str_lit()?;
            // Only the start matters (the host): fill the first hole when it opens the text.
            match template.strip_prefix('{') {
                Some(rest) => {
                    let (name, tail) = rest.split_once('}')?;
                    let arg = if name.is_empty() {
                        m.args.get(1).filter(|a| a.span != template_arg.span)?
                    } else {
                        m.args[1..]
                            .iter()
                            .find(|a| a.as_path().and_then(|p| p.as_ident()) == Some(name))?
                    };
                    let head = url_text(package, analysis, locals, file, module, arg, depth + 1)?;
                    Some(format!("{head}{tail}"))
                }
                None => Some(template.to_owned()),
            }
        }
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(
            method.as_str(),
            "to_string" | "to_owned" | "as_str" | "into"
        ) =>
        {
            url_text(package, analysis, locals, file, module, receiver, depth + 1)
        }
        _ => None,
    }
}

fn report(cx: &mut LintContext<'_>, f: Finding) {
    let Finding {
        api,
        start,
        send,
        insert_at,
        key,
    } = f;
    let (what, how) = match api.place {
        TokenPlace::Header(h) => (
            format!("the `{h}` header"),
            format!(".header(\"{h}\", {{}})"),
        ),
        TokenPlace::BodyField(b) => (format!("`{b}` in its body"), String::new()),
    };
    let message = format!(
        "a `POST` to {} is sent without {what}, its idempotency key",
        api.provider
    );
    cx.span_lint(&MISSING_IDEMPOTENCY_TOKEN, start, message, |d| {
        d.primary_label(format!("a `POST` to {}", api.provider));
        d.span_label(send, format!("sent here without {what}"));
        d.note(format!(
            "without the key every request is a new one: a redelivered message or a restarted \
             worker charges, refunds or creates again; {}",
            api.note
        ));
        d.help(format!(
            "send {what} derived from the message being handled (its event id, command id or \
             order id), so every delivery of it sends the same key"
        ));
        match (api.place, key) {
            (TokenPlace::Header(_), Some(key)) => d.suggest(
                format!(
                    "set the key from {} before `.send()` (add the stage or item when one \
                     message starts several of these)",
                    key.describe()
                ),
                insert_at,
                how.replace("{}", &key.as_string_arg()),
                Applicability::MaybeIncorrect,
            ),
            (TokenPlace::Header(_), None) => d.suggest(
                "set the key before `.send()`".to_owned(),
                insert_at,
                how.replace("{}", "/* idempotency key */"),
                Applicability::HasPlaceholders,
            ),
            (TokenPlace::BodyField(_), _) => d,
        };
    });
}

#[cfg(test)]
mod tests {
    use crate::testing;

    fn found(src: &str) -> Vec<String> {
        let package = testing::package("app", &["reqwest"], &[("crate", src)]);
        testing::check(&package, &Default::default())
            .into_iter()
            .filter(|d| d.lint.name == "missing_idempotency_token")
            .map(|d| d.message)
            .collect()
    }

    #[test]
    fn a_post_to_a_payment_host_without_its_key_is_found() {
        let src = r#"async fn f(http: &reqwest::Client) {
            http.post("https://api.stripe.com/v1/refunds").form(&[("a", "b")]).send().await;
        }"#;
        assert_eq!(
            found(src),
            ["a `POST` to Stripe is sent without the `Idempotency-Key` header, its idempotency key"]
        );
    }
}
