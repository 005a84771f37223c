//! A real axum server on a loopback port, and a real HTTP/1 client (hyper's) to call it.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use axum::Router;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A server running `app` on `127.0.0.1:0`, until the test's runtime ends.
#[derive(Clone)]
pub struct Server {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A response as the client received it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn is_replay(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    /// The problem+json `code` member, for the layer's own refusals.
    pub fn problem_code(&self) -> String {
        assert_eq!(
            self.headers["content-type"], "application/problem+json",
            "not a problem: {self:?}"
        );
        let problem: serde_json::Value = serde_json::from_slice(&self.body).unwrap();
        assert_eq!(problem["status"], self.status.as_u16());
        problem["code"].as_str().unwrap().to_owned()
    }
}

pub async fn serve(app: Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        base: format!("http://{address}"),
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// A request to `path` with `headers` (name, value) and `body`.
pub fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        // From bytes: a test may send a value that is not visible ASCII.
        builder = builder.header(*name, HeaderValue::from_bytes(value.as_bytes()).unwrap());
    }
    builder
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

impl Server {
    /// The server's `host:port`, for a raw TCP client.
    pub fn address(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    pub async fn send(&self, mut request: Request<Full<Bytes>>) -> Reply {
        let uri = format!("{}{}", self.base, request.uri());
        *request.uri_mut() = uri.parse().unwrap();
        let response = self
            .client
            .request(request)
            .await
            .expect("the server answers");
        let (parts, body) = response.into_parts();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body: body.collect().await.expect("the whole body").to_bytes(),
        }
    }
}
