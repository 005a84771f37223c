//! `#[idempotent]`: the attribute of `idem-guard`. Documented on its re-export,
//! `idem_guard::idempotent`.
//!
//! The expansion is ordinary code over the plain API: compute the key and the payload fingerprint
//! from the arguments, build a `Guard` from the options, and hand the original body to
//! `Guard::run` (or `run_outcome` / `run_in_tx`) as an `async move` block.

mod nondeterminism;
mod options;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Type};

use crate::options::{InFlight, OnError, Options};

/// Makes an `async fn` returning `Result<T, E>` run at most once per key.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    let item2 = TokenStream2::from(item.clone());
    match expand(args.into(), item2.clone()) {
        Ok(tokens) => tokens.into(),
        // Emitting the function unchanged next to the error keeps the user's other code
        // compiling, so the only error they see is ours.
        Err(e) => {
            let error = e.to_compile_error();
            quote!(#error #item2).into()
        }
    }
}

fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let options = Options::parse(args)?;
    let mut func: ItemFn = syn::parse2(item)?;
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            func.sig.fn_token.span(),
            "#[idempotent] goes on an `async fn` returning `Result<T, E>`",
        ));
    }
    let ret = match &func.sig.output {
        ReturnType::Type(_, ty) => (**ty).clone(),
        ReturnType::Default => return Err(syn::Error::new(
            func.sig.ident.span(),
            "#[idempotent] needs a return type `Result<T, E>` with `E: From<idem_guard::Error>`",
        )),
    };
    if plainly_not_result(&ret) {
        return Err(syn::Error::new_spanned(
            &ret,
            "#[idempotent] needs a return type `Result<T, E>` with `E: From<idem_guard::Error>`: the result is stored for replay, and the guard's own errors are returned as `E`",
        ));
    }
    for expr in [
        Some(&options.key),
        options.scope.as_ref(),
        options.payload.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        nondeterminism::reject(expr, options.name_of(expr))?;
    }

    if let (Some(attempt), Some(_)) = (&options.attempt, &options.tx) {
        return Err(syn::Error::new_spanned(
            attempt,
            "`attempt` is for non-transactional mode: with `tx` the effect and the completion commit together, so no earlier attempt can have made the effect",
        ));
    }
    let key = &options.key;
    let store = &options.store;
    let fingerprint = match &options.payload {
        Some(payload) => quote!(::idem_guard::Fingerprint::of(&(#payload))),
        None => default_payload(&func, &options)?,
    };
    let prefix = match &options.prefix {
        Some(prefix) => quote!(#prefix),
        None => {
            let name = func.sig.ident.to_string();
            quote!(#name)
        }
    };
    // Checked where it is given, so that a value that is not a store is reported there.
    let checked_store = quote_spanned!(store.span()=> {
        #[allow(unused_imports)]
        use ::idem_guard::__private::{ByNotAStore as _, ByStore as _};
        (&::idem_guard::__private::StoreProbe((#store).clone())).checked()
    });
    let mut builder = quote!(::idem_guard::Guard::new(#checked_store).prefix(#prefix));
    if let Some(scope) = &options.scope {
        let scope = key_probe(scope);
        builder.extend(quote!(.tenant(#scope)));
    }
    if let Some(lease) = &options.lease {
        builder.extend(quote!(.lease(#lease)));
    }
    if let Some(deadline) = &options.deadline {
        builder.extend(quote!(.deadline(#deadline)));
    }
    if let Some(retention) = &options.retention {
        builder.extend(quote!(.retention(#retention)));
    }
    match &options.in_flight {
        Some(InFlight::Reject) => {
            builder.extend(quote!(.in_flight(::idem_guard::InFlight::Reject)))
        }
        Some(InFlight::Wait(d)) => {
            builder.extend(quote!(.in_flight(::idem_guard::InFlight::Wait(#d))))
        }
        None => {}
    }
    match options.on_error {
        Some(OnError::Release) => {
            builder.extend(quote!(.on_error(::idem_guard::on_error::Release)))
        }
        Some(OnError::Cache) => builder.extend(quote!(.on_error(::idem_guard::on_error::Cache))),
        Some(OnError::Cacheable) => {
            builder.extend(quote!(.on_error(::idem_guard::on_error::Cacheable)))
        }
        Some(OnError::Classify) => {
            builder.extend(quote!(.on_error(::idem_guard::on_error::Classified)))
        }
        None => {}
    }
    if let Some(required) = &options.required {
        builder.extend(quote!(.required(#required)));
    }

    let block = &func.block;
    let returns_outcome = ok_type(&ret).is_some_and(is_outcome);
    // The body runs as an async block of its own, typed with the declared return type, so `?`
    // and `return` inside it mean what they meant before the attribute was added (a `return`
    // leaves that block, with the function's type, also when it returns an `Outcome`).
    //
    // The block's first statement is a `return` of the declared type that never runs, so the
    // compiler knows the block's type before it meets the body's own `return`s: a `return`
    // of the wrong type is reported at that `return`, not at the attribute or at a later,
    // correct one.
    let stmts = &block.stmts;
    let typed_block = quote_spanned! {ret.span()=>
        async {
            #[allow(unreachable_code, clippy::diverging_sub_expression)]
            if let ::core::option::Option::Some(__idem_declared) = ::core::option::Option::None::<#ret> {
                return __idem_declared;
            }
            #(#stmts)*
        }
    };
    let own_block = quote!(::idem_guard::__private::returning::<#ret, _>(#typed_block).await);
    // A return type that is not spelled `...Result<..>` is an alias or not a `Result` at all:
    // the body's value goes through `ReturnsResult`, whose one error (at the return type) says
    // which, instead of type mismatches with suggestions that do not apply.
    let aliased = result_args(&ret).is_none();
    let own_block = if aliased {
        quote_spanned!(ret.span()=> ::idem_guard::__private::into_result::<#ret>(#own_block))
    } else {
        quote!({ let __idem_declared: #ret = #own_block; __idem_declared })
    };
    let value = if returns_outcome {
        quote!(__idem_result.map(::idem_guard::Outcome::into_inner))
    } else {
        quote!(__idem_result)
    };
    // The result's parts are checked where the return type names them: `T` is stored for
    // replay, `E` receives the guard's errors.
    let (ok_span, err_span) = result_spans(&ret);
    // A failed bound of a call is reported at its argument: the argument is spanned too.
    let check_error = quote_spanned!(err_span=> ::idem_guard::__private::guard_error(__idem_value));
    let check_value = quote_spanned!(ok_span=> ::idem_guard::__private::replayable(__idem_value));
    let body = quote!({
        let __idem_result = #own_block;
        let __idem_value = #value;
        let __idem_value = #check_error;
        #check_value
    });
    let key_value = key_probe(key);
    let prelude = quote! {
        // #[idempotent]: the key and the payload fingerprint are taken from the arguments as they
        // arrive, before the body can change them.
        let __idem_key = #key_value;
        // A fingerprint that could not be computed is the guard's error, returned without
        // reserving anything.
        let __idem_fingerprint: ::core::result::Result<::idem_guard::Fingerprint, ::idem_guard::Error> = #fingerprint;
        let __idem_guard = #builder;
    };
    // The guard's calls require the same of `T` and `E` as the checks above: spanned at the
    // return type, what they report too points there.
    let span = ret.span();
    let new_block = match &options.tx {
        None => {
            let run = match (returns_outcome, &options.attempt) {
                (true, None) => "run_outcome",
                (false, None) => "run",
                (true, Some(_)) => "run_outcome_with",
                (false, Some(_)) => "run_with",
            };
            let run = syn::Ident::new(run, span);
            let params = match &options.attempt {
                Some(name) => quote!(#name: ::idem_guard::Attempt),
                None => quote!(),
            };
            quote_spanned! {span=> {
                #prelude
                __idem_guard.#run(__idem_key, __idem_fingerprint, move |#params| async move #body).await
            }}
        }
        // The transaction is never lent to a closure (that future could not be proved `Send`):
        // reserve through it, run the body inline, finish through it.
        Some(tx) => {
            let (done, fresh) = if returns_outcome {
                (quote!(done), quote!(.map(::idem_guard::Outcome::fresh)))
            } else {
                (
                    quote!(done.map(::idem_guard::Outcome::into_inner)),
                    quote!(),
                )
            };
            quote_spanned! {span=> {
                #prelude
                let __idem_attempt = match __idem_guard.begin_in_tx(&mut *#tx, __idem_key, __idem_fingerprint).await {
                    ::core::result::Result::Ok(::idem_guard::TxStart::Run(attempt)) => attempt,
                    ::core::result::Result::Ok(::idem_guard::TxStart::Done(done)) => return #done,
                    ::core::result::Result::Err(error) => return ::core::result::Result::Err(error),
                };
                let __idem_result = async #body.await;
                __idem_attempt.finish(&__idem_guard, &mut *#tx, __idem_result).await #fresh
            }}
        }
    };
    let new_block = if aliased {
        quote_spanned!(span=> { ::idem_guard::__private::from_result::<#ret>(#new_block) })
    } else {
        new_block
    };
    *func.block = syn::parse2(new_block)?;
    Ok(quote!(#func))
}

/// `Option<String>` of a key expression: its `KeyPart` impl if it has one, else its `Display`.
fn key_probe(expr: &syn::Expr) -> TokenStream2 {
    quote!({
        use ::idem_guard::__private::{ByDisplay as _, ByKeyPart as _};
        (&::idem_guard::__private::KeyProbe(&(#expr))).idem_key()
    })
}

/// The fingerprint of every argument but `self`, the store and the transaction arguments, and
/// arguments whose type is plainly not part of a request (an axum `State`, a pool, a store).
///
/// Each argument is serialized on its own, through a call spanned at that argument, so that one
/// which is not `Serialize` is reported there (naming it, suggesting `payload = ..`) instead of
/// as a bound on a tuple of all of them at the attribute. The parts hash as the tuple of them
/// did, so records stored by earlier versions keep matching.
fn default_payload(func: &ItemFn, options: &Options) -> syn::Result<TokenStream2> {
    let store_root = root_ident(&options.store);
    let mut parts = Vec::new();
    for arg in &func.sig.inputs {
        let FnArg::Typed(arg) = arg else { continue };
        if not_payload(&arg.ty) {
            continue;
        }
        match &*arg.pat {
            Pat::Ident(p) if Some(&p.ident) == options.tx.as_ref() => {}
            Pat::Ident(p) if Some(&p.ident) == store_root => {}
            Pat::Ident(p) => {
                let ident = &p.ident;
                parts.push(quote_spanned! {arg.span()=>
                    ::idem_guard::__private::payload_part(&#ident)
                });
            }
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "the default payload takes arguments by name; with a pattern here, say what the payload is: `payload = (...)`",
                ))
            }
        }
    }
    if parts.is_empty() {
        return Ok(quote!(::idem_guard::Fingerprint::of(&())));
    }
    Ok(quote!(::idem_guard::__private::fingerprint_parts([#(#parts),*])))
}

/// The variable an expression starts from: `store` in `store`, `store.inner`, `store.clone()`.
fn root_ident(expr: &syn::Expr) -> Option<&syn::Ident> {
    match expr {
        syn::Expr::Path(p) => p.path.get_ident(),
        syn::Expr::Field(f) => root_ident(&f.base),
        syn::Expr::MethodCall(m) => root_ident(&m.receiver),
        syn::Expr::Reference(r) => root_ident(&r.expr),
        syn::Expr::Paren(p) => root_ident(&p.expr),
        _ => None,
    }
}

/// Types that hold services, not request data: framework state and extensions, database pools,
/// connections and transactions, and the guard's own stores. Matched by the last path segment,
/// through references.
fn not_payload(ty: &Type) -> bool {
    const NOT_PAYLOAD: &[&str] = &[
        "State",
        "Extension",
        "PgPool",
        "Pool",
        "PoolConnection",
        "PgConnection",
        "Transaction",
        "ConnectionManager",
        "MultiplexedConnection",
        "MemoryStore",
        "RedisStore",
        "PostgresStore",
    ];
    match ty {
        Type::Reference(r) => not_payload(&r.elem),
        Type::Paren(p) => not_payload(&p.elem),
        Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| NOT_PAYLOAD.iter().any(|n| s.ident == n)),
        _ => false,
    }
}

/// Return types that cannot be a `Result` under any alias: primitives, common std types, tuples,
/// references, slices, `impl Trait`. Anything else (an alias) is left to the type checker.
fn plainly_not_result(ret: &Type) -> bool {
    const NOT_RESULT: &[&str] = &[
        "bool", "char", "str", "String", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16",
        "i32", "i64", "i128", "isize", "f32", "f64", "Option", "Vec", "Box", "HashMap", "BTreeMap",
        "Outcome",
    ];
    match ret {
        Type::Path(p) => {
            p.qself.is_none()
                && p.path
                    .segments
                    .last()
                    .is_some_and(|s| NOT_RESULT.iter().any(|n| s.ident == n))
        }
        Type::Paren(p) => plainly_not_result(&p.elem),
        Type::Group(g) => plainly_not_result(&g.elem),
        Type::Tuple(_)
        | Type::Reference(_)
        | Type::Slice(_)
        | Type::Array(_)
        | Type::Never(_)
        | Type::ImplTrait(_)
        | Type::Ptr(_)
        | Type::FnPtr(_) => true,
        _ => false,
    }
}

/// Where the return type names `T` (inside `Outcome<T>` too) and `E`, for the checks' errors;
/// the whole return type where it does not (an alias).
fn result_spans(ret: &Type) -> (proc_macro2::Span, proc_macro2::Span) {
    let whole = ret.span();
    let Some(args) = result_args(ret) else {
        return (whole, whole);
    };
    let ok = args.first().map_or(whole, |ok| match ok_type(ret) {
        Some(outcome) if is_outcome(outcome) => {
            outcome_arg(outcome).map_or(ok.span(), Spanned::span)
        }
        _ => ok.span(),
    });
    let err = args.get(1).map_or(whole, |e| e.span());
    (ok, err)
}

/// The type arguments of `...Result<..>`.
fn result_args(ret: &Type) -> Option<Vec<&Type>> {
    let Type::Path(path) = ret else { return None };
    let last = path.path.segments.last()?;
    if !last.ident.to_string().ends_with("Result") {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    Some(
        args.args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
    )
}

/// `T` of `Outcome<T>`.
fn outcome_arg(outcome: &Type) -> Option<&Type> {
    let Type::Path(path) = outcome else {
        return None;
    };
    let PathArguments::AngleBracketed(args) = &path.path.segments.last()?.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// `T` of `Result<T, E>` (or of an alias named `...Result<T>`).
fn ok_type(ret: &Type) -> Option<&Type> {
    let Type::Path(path) = ret else { return None };
    let last = path.path.segments.last()?;
    if !last.ident.to_string().ends_with("Result") {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

fn is_outcome(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Outcome"))
}
