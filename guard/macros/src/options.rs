//! The attribute's arguments: `name = value` pairs, checked one by one with errors at the name.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, MetaNameValue, Token};

pub(crate) enum InFlight {
    Reject,
    Wait(Expr),
}

#[derive(Clone, Copy)]
pub(crate) enum OnError {
    Release,
    Cache,
    Cacheable,
    Classify,
}

pub(crate) struct Options {
    pub key: Expr,
    pub store: Expr,
    pub payload: Option<Expr>,
    pub prefix: Option<Expr>,
    pub scope: Option<Expr>,
    pub lease: Option<Expr>,
    pub retention: Option<Expr>,
    pub in_flight: Option<InFlight>,
    pub on_error: Option<OnError>,
    pub required: Option<Expr>,
    pub tx: Option<syn::Ident>,
    pub attempt: Option<syn::Ident>,
    pub deadline: Option<Expr>,
}

const USAGE: &str = "expected `#[idempotent(key = <expr>, store = <expr>, ...)]`; options: key, store, payload, prefix (or scope), tenant, lease, retention, in_flight, on_error, required, tx, attempt, deadline";

impl Options {
    pub fn parse(args: TokenStream) -> syn::Result<Self> {
        let pairs = Punctuated::<MetaNameValue, Token![,]>::parse_terminated
            .parse2(args)
            .map_err(|e| syn::Error::new(e.span(), format!("{e}; {USAGE}")))?;
        let (mut key, mut store) = (None, None);
        let mut o = Options {
            key: Expr::Verbatim(TokenStream::new()),
            store: Expr::Verbatim(TokenStream::new()),
            payload: None,
            prefix: None,
            scope: None,
            lease: None,
            retention: None,
            in_flight: None,
            on_error: None,
            required: None,
            tx: None,
            attempt: None,
            deadline: None,
        };
        let mut seen = Vec::new();
        for pair in pairs {
            let Some(name) = pair.path.get_ident().map(ToString::to_string) else {
                return Err(syn::Error::new_spanned(&pair.path, USAGE));
            };
            if seen.contains(&name) {
                return Err(syn::Error::new_spanned(
                    &pair.path,
                    format!("`{name}` is given twice"),
                ));
            }
            seen.push(name.clone());
            let value = pair.value;
            match name.as_str() {
                "key" => key = Some(value),
                "store" => store = Some(value),
                "payload" => o.payload = Some(value),
                // `scope` is another spelling of `prefix`: both name the operation.
                "prefix" | "scope" => o.prefix = Some(value),
                "tenant" => o.scope = Some(value),
                "lease" => o.lease = Some(value),
                "retention" => o.retention = Some(value),
                "required" => o.required = Some(value),
                "deadline" => o.deadline = Some(value),
                "in_flight" => o.in_flight = Some(in_flight(value)?),
                "on_error" => o.on_error = Some(on_error(&value)?),
                "tx" => match value {
                    Expr::Path(p) if p.path.get_ident().is_some() => o.tx = p.path.get_ident().cloned(),
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`tx` names the transaction argument, e.g. `tx = tx` for `tx: &mut Transaction<'_, Postgres>`",
                        ))
                    }
                },
                "attempt" => match value {
                    Expr::Path(p) if p.path.get_ident().is_some() => o.attempt = p.path.get_ident().cloned(),
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`attempt` names a variable for the body, e.g. `attempt = attempt` (an `idem_guard::Attempt`)",
                        ))
                    }
                },
                _ => return Err(syn::Error::new_spanned(&pair.path, format!("unknown option `{name}`; {USAGE}"))),
            }
        }
        o.key = key.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `key = <expr>`: the key must come from the message, e.g. `key = event.id`",
            )
        })?;
        o.store = store.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `store = <expr>`, e.g. `store = self.store` or `store = STORE`",
            )
        })?;
        Ok(o)
    }

    /// Which option an expression was given as, for error messages.
    pub fn name_of(&self, expr: &Expr) -> &'static str {
        if std::ptr::eq(expr, &self.key) {
            "key"
        } else if self.scope.as_ref().is_some_and(|s| std::ptr::eq(s, expr)) {
            "tenant"
        } else {
            "payload"
        }
    }
}

fn string(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.value()),
        _ => None,
    }
}

fn in_flight(value: Expr) -> syn::Result<InFlight> {
    if string(&value).as_deref() == Some("reject") {
        return Ok(InFlight::Reject);
    }
    if let Expr::Call(call) = &value {
        let is_wait = matches!(&*call.func, Expr::Path(p) if p.path.is_ident("wait"));
        if is_wait && call.args.len() == 1 {
            return Ok(InFlight::Wait(call.args[0].clone()));
        }
    }
    Err(syn::Error::new_spanned(
        value,
        "expected `in_flight = \"reject\"` or `in_flight = wait(<Duration>)`",
    ))
}

fn on_error(value: &Expr) -> syn::Result<OnError> {
    match string(value).as_deref() {
        Some("release") => Ok(OnError::Release),
        Some("cache") => Ok(OnError::Cache),
        Some("cacheable") => Ok(OnError::Cacheable),
        Some("classify") => Ok(OnError::Classify),
        _ => Err(syn::Error::new_spanned(
            value,
            "expected `on_error = \"release\"`, `\"cache\"`, `\"cacheable\"` or `\"classify\"`",
        )),
    }
}
