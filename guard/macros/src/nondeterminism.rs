//! Compile-time rejection of keys built from a clock or an RNG.
//!
//! A key must name the request (event id, command id), so that every delivery of it computes
//! the same key. `Uuid::new_v4()` or `Utc::now()` in the key gives each redelivery a fresh key and
//! the guard then dedupes nothing; in the payload, it makes every redelivery a payload mismatch.
//! The check is syntactic (a proc macro sees no types), matching the calls by name, like the
//! `nondeterministic_key` lint of `cargo idem-lint`.

use syn::punctuated::Punctuated;
use syn::visit::Visit;
use syn::{Expr, Token};

/// Errors at the first clock or RNG call found in `expr`.
pub(crate) fn reject(expr: &Expr, option: &str) -> syn::Result<()> {
    let mut finder = Finder { found: None };
    finder.visit_expr(expr);
    match finder.found {
        None => Ok(()),
        Some((tokens, source, name)) => Err(syn::Error::new_spanned(
            tokens,
            format!(
                "`{option}` must not come from the {source}: `{name}` differs on every delivery, so a redelivered message would never match its first run; derive it from the message (event id, command id, order id + stage)"
            ),
        )),
    }
}

struct Finder {
    found: Option<(proc_macro2::TokenStream, &'static str, String)>,
}

impl Finder {
    fn report(&mut self, tokens: proc_macro2::TokenStream, hit: Option<(&'static str, String)>) {
        if self.found.is_none() {
            if let Some((source, name)) = hit {
                self.found = Some((tokens, source, name));
            }
        }
    }
}

const CLOCK_FNS: &[&str] = &[
    "now",
    "now_utc",
    "now_local",
    "today",
    "elapsed",
    "new_v1",
    "new_v6",
    "new_v7",
    "now_v1",
    "now_v6",
    "now_v7",
    "unix_timestamp",
    "timestamp_now",
];
const RNG_FNS: &[&str] = &[
    "new_v4",
    "random",
    "random_range",
    "thread_rng",
    "rng",
    "gen",
    "gen_range",
    "from_entropy",
    "nanoid",
];
const RNG_CRATES: &[&str] = &[
    "rand",
    "fastrand",
    "getrandom",
    "nanoid",
    "OsRng",
    "ThreadRng",
];
/// Types whose `new()` / `generate()` draws a fresh random or time-based id.
const ID_TYPES: &[&str] = &["Ulid", "ObjectId", "Ksuid", "Xid", "Cuid", "Snowflake"];

fn classify_path(path: &syn::Path) -> Option<(&'static str, String)> {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let name = segments.join("::");
    let last = segments.last()?.as_str();
    let prev = segments.len().checked_sub(2).map(|i| segments[i].as_str());
    if CLOCK_FNS.contains(&last) {
        return Some(("clock", name));
    }
    if RNG_FNS.contains(&last) || segments.iter().any(|s| RNG_CRATES.contains(&s.as_str())) {
        return Some(("RNG", name));
    }
    if matches!(last, "new" | "generate") && prev.is_some_and(|p| ID_TYPES.contains(&p)) {
        return Some(("RNG and the clock", name));
    }
    None
}

fn classify_method(method: &syn::Ident) -> Option<(&'static str, String)> {
    let name = method.to_string();
    if CLOCK_FNS.contains(&name.as_str()) {
        Some(("clock", format!(".{name}()")))
    } else if RNG_FNS.contains(&name.as_str()) {
        Some(("RNG", format!(".{name}()")))
    } else {
        None
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Expr::Path(p) = &*call.func {
            self.report(quote::quote!(#call), classify_path(&p.path));
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        syn::visit::visit_expr_method_call(self, call);
        // Report the innermost call first: `Utc::now().timestamp()` points at `Utc::now()`.
        self.report(quote::quote!(#call), classify_method(&call.method));
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if RNG_CRATES.contains(&name.as_str()) {
            self.report(quote::quote!(#mac), Some(("RNG", format!("{name}!"))));
        }
        // `format!("{}-{}", a, Uuid::new_v4())` and friends: look inside comma-separated arguments.
        if let Ok(args) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}
