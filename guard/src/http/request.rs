//! What the layer reads from a request: the client's key (the `Idempotency-Key` header or
//! another [`KeySource`](super::KeySource)), the key it builds from it, and the payload
//! fingerprint.

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::MatchedPath;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, Request};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::source::PayloadMatch;
use crate::{Fingerprint, KeyPart};

/// The request header that carries the key (IETF `draft-ietf-httpapi-idempotency-key-header`).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Why the client's key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadKey {
    /// The header appears more than once.
    Repeated,
    /// Empty, or empty between its quotes.
    Empty,
    /// Longer than the configured limit.
    TooLong { len: usize, max: usize },
    /// A byte outside visible ASCII (`!`..=`~`), e.g. a space, a control or a non-ASCII byte.
    NotVisibleAscii,
}

impl std::fmt::Display for BadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadKey::Repeated => f.write_str("the idempotency key's header appears more than once"),
            BadKey::Empty => f.write_str("the idempotency key is empty"),
            BadKey::TooLong { len, max } => write!(
                f,
                "the idempotency key is {len} characters long; at most {max} are accepted"
            ),
            BadKey::NotVisibleAscii => f.write_str(
                "the idempotency key may only hold visible ASCII characters (no spaces, controls or non-ASCII bytes)",
            ),
        }
    }
}

/// The key the client sent in header `name`: `Ok(None)` when there is no such header.
///
/// The draft makes the value a Structured Field string (`"8e03978e-..."`); most clients (and
/// Stripe's API) send it bare. Both are accepted and mean the same key, so `"abc"` and `abc` are
/// one key. A quoted value may not contain `"` or `\` (which would need escapes).
pub(crate) fn client_key(
    headers: &HeaderMap,
    name: &HeaderName,
    max_len: usize,
) -> Result<Option<String>, BadKey> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(BadKey::Repeated);
    }
    checked_key(value.as_bytes(), max_len).map(Some)
}

/// A key from any source, checked as the header is: unquoted, not empty, not too long, visible
/// ASCII.
pub(crate) fn checked_key(raw: &[u8], max_len: usize) -> Result<String, BadKey> {
    let key = match raw {
        [b'"', inner @ .., b'"'] => inner,
        _ => raw,
    };
    if key.is_empty() {
        return Err(BadKey::Empty);
    }
    if key.len() > max_len {
        return Err(BadKey::TooLong {
            len: key.len(),
            max: max_len,
        });
    }
    if !key.iter().all(|b| is_visible_ascii(*b) && *b != b'"') {
        return Err(BadKey::NotVisibleAscii);
    }
    // Every byte is ASCII, so this cannot fail; say so instead of unwrapping.
    String::from_utf8(key.to_vec()).map_err(|_| BadKey::NotVisibleAscii)
}

fn is_visible_ascii(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// The route a request was matched to: axum's route template (`/orders/{id}`) when the layer
/// runs inside a `Router` (added with `Router::layer` or `route_layer`), else the request path.
pub(crate) fn route(parts: &Parts) -> String {
    parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_owned(), |m| m.as_str().to_owned())
}

/// The key given to the guard: principal, route and client key as one tuple, whose parts the
/// guard escapes (`:` and `%`), so `("a:b", "c")` and `("a", "b:c")` stay apart. No principal
/// and an empty principal are the same part (`""`): neither identifies anyone.
pub(crate) fn guard_key(principal: Option<&str>, route: &str, client_key: &str) -> String {
    (principal.unwrap_or(""), route, client_key)
        .key_part()
        .unwrap_or_default()
}

/// Why the body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over the configured limit (by `Content-Length` or while reading).
    TooLarge { max: usize },
    /// The client's stream failed (connection reset, malformed chunking...).
    Read(String),
}

/// Reads the whole body, refusing more than `max` bytes.
pub(crate) async fn buffer_body<B>(body: B, max: usize) -> Result<Bytes, BodyError>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    if body.size_hint().lower() > max as u64 {
        return Err(BodyError::TooLarge { max });
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(BodyError::TooLarge { max }),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}

/// The payload fingerprint: method, path, query and a hash of the body (its bytes, or what
/// [`PayloadMatch`] keeps of its JSON value, `json` being the parsed body). A key reused with any
/// of them changed is refused (422), not served the earlier response.
pub(crate) fn fingerprint(
    parts: &Parts,
    body: &[u8],
    json: Option<&serde_json::Value>,
    matching: &PayloadMatch,
) -> Result<Fingerprint, crate::Error> {
    let body_hash = match (matching, json.filter(|_| matching.needs_json())) {
        // Tagged, so that no header or JSON fingerprint equals a byte hash.
        (PayloadMatch::Headers(names), _) => {
            let values: Vec<Vec<&[u8]>> = names
                .iter()
                .map(|name| {
                    parts
                        .headers
                        .get_all(name)
                        .iter()
                        .map(|v| v.as_bytes())
                        .collect()
                })
                .collect();
            format!("headers:{}", Fingerprint::of(&values)?)
        }
        (_, Some(json)) => format!("json:{}", Fingerprint::of_value(&matching.json_part(json))),
        (_, None) => format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body)),
    };
    Fingerprint::of(&(
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query(),
        body_hash,
    ))
}

/// The request again, with its buffered body.
pub(crate) fn rebuild(parts: Parts, body: Bytes) -> Request<Body> {
    Request::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn key_of(values: &[&[u8]]) -> Result<Option<String>, BadKey> {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(IDEMPOTENCY_KEY, HeaderValue::from_bytes(v).unwrap());
        }
        client_key(&headers, &IDEMPOTENCY_KEY, 16)
    }

    #[test]
    fn bare_and_quoted_keys_are_one_key() {
        assert_eq!(key_of(&[b"abc-1"]), Ok(Some("abc-1".into())));
        assert_eq!(key_of(&[b"\"abc-1\""]), Ok(Some("abc-1".into())));
        assert_eq!(key_of(&[]), Ok(None));
    }

    #[test]
    fn bad_keys_say_why() {
        assert_eq!(key_of(&[b""]), Err(BadKey::Empty));
        assert_eq!(key_of(&[b"\"\""]), Err(BadKey::Empty));
        assert_eq!(key_of(&[b"a", b"b"]), Err(BadKey::Repeated));
        assert_eq!(key_of(&[b"a b"]), Err(BadKey::NotVisibleAscii));
        assert_eq!(key_of(&[b"caf\xc3\xa9"]), Err(BadKey::NotVisibleAscii));
        assert_eq!(key_of(&[b"\"a\"b\""]), Err(BadKey::NotVisibleAscii));
        assert_eq!(
            key_of(&[&[b'x'; 17]]),
            Err(BadKey::TooLong { len: 17, max: 16 })
        );
        assert_eq!(key_of(&[&[b'x'; 16]]), Ok(Some("x".repeat(16))));
    }

    #[test]
    fn key_parts_cannot_run_into_each_other() {
        assert_ne!(
            guard_key(Some("a:b"), "/r", "k"),
            guard_key(Some("a"), "b:/r", "k")
        );
        assert_ne!(guard_key(None, "/a", "k"), guard_key(None, "/b", "k"));
        assert_ne!(
            guard_key(Some("alice"), "/a", "k"),
            guard_key(None, "/a", "k")
        );
        assert_eq!(guard_key(None, "/a", "k"), guard_key(Some(""), "/a", "k"));
    }
}
