//! What the layer stores of a response, how it replays it, and the problem+json answers of its
//! own refusals.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::response::Parts;
use axum::http::{HeaderName, HeaderValue, Response, StatusCode};
use serde::{Deserialize, Serialize};

/// Added to every replayed response.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, never the response, so
/// they are never stored whatever the configuration says.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A response as the store keeps it.
///
/// Header values are bytes (a value need not be UTF-8). A body over the configured limit is not
/// stored: the record then says only that the request was processed, and duplicates are told
/// so (409) instead of running it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum StoredResponse {
    Full {
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
    },
    BodyTooLarge {
        status: u16,
        len: usize,
        max: usize,
    },
}

impl StoredResponse {
    /// What to store of a response: its status, its headers but the hop-by-hop ones and those in
    /// `dropped`, and its body (when at most `max_body` bytes).
    pub(crate) fn capture(
        parts: &Parts,
        body: &Bytes,
        dropped: &[HeaderName],
        max_body: usize,
    ) -> Self {
        let status = parts.status.as_u16();
        if body.len() > max_body {
            return StoredResponse::BodyTooLarge {
                status,
                len: body.len(),
                max: max_body,
            };
        }
        let headers = parts
            .headers
            .iter()
            .filter(|(name, _)| is_stored(name, dropped))
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect();
        StoredResponse::Full {
            status,
            headers,
            body: body.to_vec(),
        }
    }

    /// The response a duplicate gets: the stored one with `Idempotent-Replayed: true`, or a
    /// problem when the stored record cannot be turned back into a response.
    pub(crate) fn replay(self) -> Response<Body> {
        match self {
            StoredResponse::Full {
                status,
                headers,
                body,
            } => rebuild(status, &headers, body).unwrap_or_else(|why| {
                problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "idempotency_record_unreadable",
                    &format!("the stored response of this Idempotency-Key cannot be replayed: {why}"),
                )
            }),
            StoredResponse::BodyTooLarge { status, len, max } => problem(
                StatusCode::CONFLICT,
                "idempotency_response_not_stored",
                &format!(
                    "a request with this Idempotency-Key was already processed (status {status}), but its {len}-byte response was larger than the {max} bytes kept for replay, so it cannot be sent again"
                ),
            ),
        }
    }
}

fn is_stored(name: &HeaderName, dropped: &[HeaderName]) -> bool {
    !HOP_BY_HOP.contains(&name.as_str()) && !dropped.contains(name)
}

fn rebuild(
    status: u16,
    headers: &[(String, Vec<u8>)],
    body: Vec<u8>,
) -> Result<Response<Body>, String> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).map_err(|_| format!("status {status} is not valid"))?;
    let map = response.headers_mut();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header name `{name}` is not valid"))?;
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| format!("the value of header `{name}` is not valid"))?;
        map.append(name, value);
    }
    map.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    Ok(response)
}

/// An RFC 9457 problem+json response. `code` is a stable machine-readable name (an extension
/// member) for clients that branch on the reason; `detail` is for people.
pub(crate) fn problem(status: StatusCode, code: &str, detail: &str) -> Response<Body> {
    typed_problem(status, "about:blank", code, detail)
}

/// A problem whose `type` is a link to its documentation.
pub(crate) fn typed_problem(
    status: StatusCode,
    kind: &str,
    code: &str,
    detail: &str,
) -> Response<Body> {
    let body = serde_json::json!({
        "type": kind,
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
        "code": code,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// 409 with `Retry-After` in whole seconds (rounded up, at least 1): the first request with this
/// key is still running.
pub(crate) fn in_progress(retry_after: Duration) -> Response<Body> {
    let mut response = problem(
        StatusCode::CONFLICT,
        "idempotency_request_in_progress",
        "a request with this Idempotency-Key is being processed; retry after the time in Retry-After",
    );
    let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_with(headers: &[(&str, &str)]) -> Parts {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::CREATED;
        for (name, value) in headers {
            response.headers_mut().append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::try_from(*value).unwrap(),
            );
        }
        response.into_parts().0
    }

    #[test]
    fn hop_by_hop_and_dropped_headers_are_not_stored() {
        let parts = parts_with(&[
            ("content-type", "text/plain"),
            ("connection", "close"),
            ("set-cookie", "s=1"),
            ("x-order", "7"),
            ("x-order", "8"),
        ]);
        let stored = StoredResponse::capture(
            &parts,
            &Bytes::from_static(b"ok"),
            &[HeaderName::from_static("set-cookie")],
            10,
        );
        let StoredResponse::Full {
            status, headers, ..
        } = &stored
        else {
            panic!("stored {stored:?}");
        };
        assert_eq!(*status, 201);
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["content-type", "x-order", "x-order"]);
        let replayed = stored.replay();
        assert_eq!(replayed.status(), StatusCode::CREATED);
        assert_eq!(replayed.headers()[IDEMPOTENT_REPLAYED], "true");
        let orders: Vec<_> = replayed.headers().get_all("x-order").iter().collect();
        assert_eq!(orders, ["7", "8"]);
    }

    #[test]
    fn a_large_body_is_not_stored() {
        let stored = StoredResponse::capture(&parts_with(&[]), &Bytes::from(vec![0; 11]), &[], 10);
        assert_eq!(
            stored,
            StoredResponse::BodyTooLarge {
                status: 201,
                len: 11,
                max: 10
            }
        );
        assert_eq!(stored.replay().status(), StatusCode::CONFLICT);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let header = |d| in_progress(d).headers()[RETRY_AFTER].clone();
        assert_eq!(header(Duration::from_millis(1)), "1");
        assert_eq!(header(Duration::from_millis(59_001)), "60");
        assert_eq!(header(Duration::ZERO), "1");
    }
}
