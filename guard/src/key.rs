//! What identifies a request (its key) and what it asked for (its payload fingerprint).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::Value;
use sha2::Sha256;
use xxhash_rust::xxh3::Xxh3;

use crate::Error;

/// Longest key the guard accepts, so that a key built from untrusted input cannot blow up the
/// store (Redis and PostgreSQL would take far more, but no real key needs it).
pub const MAX_KEY_LEN: usize = 1024;

/// A value that can be (part of) an idempotency key.
///
/// Implemented for strings, integers, `Option` (where `None` means "no key") and tuples, so
/// `(order_id, "capture")` keys one stage of one order. A tuple's parts are escaped (`%` as `%25`,
/// `:` as `%3A`) and joined with `:`, so `("acme:eu", "42")` and `("acme", "eu:42")` are two
/// keys. A part without `:` or `%` is written as it is, so records stored before the escaping
/// (by version 0.1.0) keep their key; only keys that were ambiguous change. For any other
/// type that implements `Display` (a `Uuid`, say) wrap it in [`DisplayKey`]; `#[idempotent]` does
/// that on its own.
///
/// A key must come from the message (event id, command id, order id + stage), never from the
/// clock or an RNG: a fresh key per delivery dedupes nothing.
pub trait KeyPart {
    /// The key text, or `None` when the key is missing.
    fn key_part(&self) -> Option<String>;
}

/// Uses a type's `Display` output as a key part.
#[derive(Debug, Clone, Copy)]
pub struct DisplayKey<T>(pub T);

impl<T: fmt::Display> KeyPart for DisplayKey<T> {
    fn key_part(&self) -> Option<String> {
        Some(self.0.to_string())
    }
}

impl KeyPart for str {
    fn key_part(&self) -> Option<String> {
        Some(self.to_owned())
    }
}

impl KeyPart for String {
    fn key_part(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl KeyPart for Cow<'_, str> {
    fn key_part(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl KeyPart for Box<str> {
    fn key_part(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl KeyPart for Arc<str> {
    fn key_part(&self) -> Option<String> {
        Some(self.to_string())
    }
}

macro_rules! key_part_via_display {
    ($($t:ty),*) => {$(
        impl KeyPart for $t {
            fn key_part(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}
key_part_via_display!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, char);

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn key_part(&self) -> Option<String> {
        (**self).key_part()
    }
}

impl<T: KeyPart> KeyPart for Option<T> {
    fn key_part(&self) -> Option<String> {
        self.as_ref().and_then(KeyPart::key_part)
    }
}

macro_rules! key_part_tuple {
    ($($name:ident),+) => {
        impl<$($name: KeyPart),+> KeyPart for ($($name,)+) {
            #[allow(non_snake_case)]
            fn key_part(&self) -> Option<String> {
                let ($($name,)+) = self;
                // A composite key is missing as soon as one of its parts is.
                Some([$(escape_part(&$name.key_part()?)),+].join(":"))
            }
        }
    };
}
key_part_tuple!(A, B);
key_part_tuple!(A, B, C);
key_part_tuple!(A, B, C, D);

/// A 128-bit fingerprint of a payload, used to reject a key reused with a different payload.
///
/// Computed from the payload's JSON form with object keys sorted, so a `HashMap` payload hashes
/// the same on every delivery whatever its iteration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(u128);

impl Fingerprint {
    /// Fingerprints a serializable payload.
    pub fn of<P: Serialize + ?Sized>(payload: &P) -> Result<Self, Error> {
        let value = serde_json::to_value(payload).map_err(Error::Payload)?;
        Ok(Self::of_value(&value))
    }

    pub(crate) fn of_value(value: &Value) -> Self {
        let mut hasher = Xxh3::new();
        hash_value(value, &mut hasher);
        Fingerprint(hasher.digest128())
    }

    /// Parses the 32-digit hex form written by [`Display`](fmt::Display); for store implementors.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 32 {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(Fingerprint)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Feeds a JSON value to the hasher with a type tag and lengths before every variable-size part,
/// so that no two different values produce the same byte stream.
fn hash_value(value: &Value, h: &mut Xxh3) {
    match value {
        Value::Null => h.update(b"n"),
        Value::Bool(b) => h.update(if *b { b"t" } else { b"f" }),
        Value::Number(n) => hash_bytes(b'#', n.to_string().as_bytes(), h),
        Value::String(s) => hash_bytes(b's', s.as_bytes(), h),
        Value::Array(items) => {
            h.update(b"[");
            h.update(&(items.len() as u64).to_le_bytes());
            items.iter().for_each(|item| hash_value(item, h));
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            h.update(b"{");
            h.update(&(entries.len() as u64).to_le_bytes());
            for (k, v) in entries {
                hash_bytes(b'k', k.as_bytes(), h);
                hash_value(v, h);
            }
        }
    }
}

fn hash_bytes(tag: u8, bytes: &[u8], h: &mut Xxh3) {
    h.update(&[tag]);
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// What [`Guard::run`](crate::Guard::run) accepts as the payload: a reference to anything
/// serializable, or a [`Fingerprint`] computed earlier (as `#[idempotent]` does, so that the
/// fingerprint is taken before the body may change its arguments).
pub trait Payload {
    /// The payload's fingerprint.
    fn fingerprint(self) -> Result<Fingerprint, Error>;
}

impl<P: Serialize + ?Sized> Payload for &P {
    fn fingerprint(self) -> Result<Fingerprint, Error> {
        Fingerprint::of(self)
    }
}

impl Payload for Fingerprint {
    fn fingerprint(self) -> Result<Fingerprint, Error> {
        Ok(self)
    }
}

/// A fingerprint computed earlier, or why it could not be: the guard returns that error
/// (converted into the body's error type) without reserving anything.
impl Payload for Result<Fingerprint, Error> {
    fn fingerprint(self) -> Result<Fingerprint, Error> {
        self
    }
}

/// Escapes `%` and `:` so that a part joined with `:` cannot be mistaken for two parts. Text
/// without either is returned as is (stored keys of earlier versions stay the same).
pub(crate) fn escape_part(part: &str) -> Cow<'_, str> {
    if part.contains(['%', ':']) {
        Cow::Owned(part.replace('%', "%25").replace(':', "%3A"))
    } else {
        Cow::Borrowed(part)
    }
}

/// Builds the stored key: `prefix:scope:key`.
///
/// `:` and `%` are escaped in the prefix and the scope (the key goes last and may contain
/// anything), so that tenant `a:b` with key `c` and tenant `a` with key `b:c` never share a record.
pub(crate) fn full_key(prefix: &str, scope: Option<&str>, key: &str) -> Result<String, Error> {
    if key.is_empty() {
        return Err(Error::InvalidKey("the key is empty".into()));
    }
    let full = format!(
        "{}:{}:{}",
        escape_part(prefix),
        escape_part(scope.unwrap_or("")),
        key
    );
    if full.len() > MAX_KEY_LEN {
        return Err(Error::InvalidKey(format!(
            "the key is {} bytes long; at most {MAX_KEY_LEN} are accepted",
            full.len()
        )));
    }
    Ok(full)
}

/// What stores see of a key: the full key as it is, or with [`Guard::hash_keys`] its HMAC-SHA256
/// under the user's secret.
///
/// [`Guard::hash_keys`]: crate::Guard::hash_keys
#[derive(Clone, Default)]
pub(crate) enum KeyHashing {
    #[default]
    Off,
    /// The MAC keyed once with the secret; cloned per key.
    Keyed(Arc<Hmac<Sha256>>),
    /// An empty secret: every guarded call fails, rather than hash under a guessable key.
    EmptySecret,
}

impl fmt::Debug for KeyHashing {
    // Never the secret, nor anything derived from it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyHashing::Off => "Off",
            KeyHashing::Keyed(_) => "HmacSha256(..)",
            KeyHashing::EmptySecret => "EmptySecret",
        })
    }
}

impl KeyHashing {
    pub(crate) fn with_secret(secret: &[u8]) -> Self {
        if secret.is_empty() {
            return KeyHashing::EmptySecret;
        }
        match <Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
            Ok(mac) => KeyHashing::Keyed(Arc::new(mac)),
            // HMAC takes a key of any length; kept as an error rather than a panic all the same.
            Err(_) => KeyHashing::EmptySecret,
        }
    }

    /// The key the store sees for the full key `full` (built by [`full_key`] from `prefix`):
    /// `full` itself, or `prefix:#` and the 64 hex digits of its HMAC. The prefix stays readable
    /// (it names an operation, not a request); tenant and key are only in the hash. The single
    /// `:` after the escaped prefix keeps hashed keys apart from raw ones, which have two.
    pub(crate) fn stored(&self, prefix: &str, full: String) -> Result<String, Error> {
        match self {
            KeyHashing::Off => Ok(full),
            KeyHashing::EmptySecret => Err(Error::InvalidKey(
                "the secret given to `Guard::hash_keys` is empty".into(),
            )),
            KeyHashing::Keyed(mac) => {
                let mut mac = Hmac::<Sha256>::clone(mac);
                mac.update(full.as_bytes());
                let digest = mac.finalize().into_bytes();
                let mut stored = String::with_capacity(prefix.len() + 2 + 64);
                stored.push_str(&escape_part(prefix));
                stored.push_str(":#");
                for byte in digest.iter() {
                    stored.push_str(&format!("{byte:02x}"));
                }
                Ok(stored)
            }
        }
    }
}

/// Whether `stored` is a key as [`KeyHashing::stored`] writes it with a secret: the escaped
/// prefix (no `:`), `:#` and 64 hex digits. Raw keys have two unescaped `:`, so none looks so.
pub(crate) fn is_hashed(stored: &str) -> bool {
    stored.split_once(":#").is_some_and(|(prefix, hex)| {
        !prefix.contains(':')
            && hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn fingerprint_ignores_map_order_but_not_content() {
        let pairs: Vec<(String, i32)> = (0..50).map(|i| (format!("k{i}"), i)).collect();
        let a: HashMap<String, i32> = pairs.iter().cloned().collect();
        let b: HashMap<String, i32> = pairs.into_iter().rev().collect();
        assert_eq!(Fingerprint::of(&a).unwrap(), Fingerprint::of(&b).unwrap());
        assert_ne!(
            Fingerprint::of(&("a", "bc")).unwrap(),
            Fingerprint::of(&("ab", "c")).unwrap()
        );
        assert_ne!(Fingerprint::of(&1).unwrap(), Fingerprint::of(&"1").unwrap());
    }

    #[test]
    fn default_payload_parts_hash_as_their_tuple() {
        let parts = crate::__private::fingerprint_parts([
            crate::__private::payload_part("evt-1"),
            crate::__private::payload_part(&100u64),
        ]);
        assert_eq!(
            parts.unwrap(),
            Fingerprint::of(&(&"evt-1", &100u64)).unwrap()
        );
    }

    #[test]
    fn fingerprint_round_trips_through_hex() {
        let f = Fingerprint::of(&"payload").unwrap();
        assert_eq!(Fingerprint::from_hex(&f.to_string()), Some(f));
        assert_eq!(Fingerprint::from_hex("xyz"), None);
    }

    #[test]
    fn key_parts() {
        assert_eq!(("order", 7u64).key_part().as_deref(), Some("order:7"));
        assert_eq!((Some("a"), None::<&str>).key_part(), None);
        assert_eq!(DisplayKey(3.5).key_part().as_deref(), Some("3.5"));
    }

    #[test]
    fn tuple_parts_cannot_collide() {
        let a = ("acme:eu", "42").key_part().unwrap();
        let b = ("acme", "eu:42").key_part().unwrap();
        assert_ne!(a, b);
        assert_ne!(("a%3Ab", "c").key_part(), ("a:b", "c").key_part());
        assert_ne!(
            (("a", "b"), "c").key_part(),
            ("a", ("b", "c")).key_part(),
            "nested tuples keep their grouping"
        );
        // Parts without `:` or `%` are stored as before the escaping, so old records stay found.
        assert_eq!(
            ("order", 7u64, "capture").key_part().as_deref(),
            Some("order:7:capture")
        );
        // Tenants built from tuples go through the same escaping, then the scope's.
        let t1 = full_key("p", ("acme:eu", "42").key_part().as_deref(), "k").unwrap();
        let t2 = full_key("p", ("acme", "eu:42").key_part().as_deref(), "k").unwrap();
        assert_ne!(t1, t2);
    }

    #[test]
    fn hashed_keys_hide_tenant_and_key_and_depend_on_the_secret() {
        let full = full_key("pay", Some("acme"), "alice@example.com").unwrap();
        let a = KeyHashing::with_secret(b"secret-a");
        let b = KeyHashing::with_secret(b"secret-b");
        let stored = a.stored("pay", full.clone()).unwrap();
        assert!(
            stored.starts_with("pay:#") && stored.len() == "pay:#".len() + 64,
            "{stored}"
        );
        assert!(
            !stored.contains("acme") && !stored.contains("alice"),
            "{stored}"
        );
        assert_eq!(stored, a.stored("pay", full.clone()).unwrap());
        assert_ne!(stored, b.stored("pay", full.clone()).unwrap());
        let other = full_key("pay", Some("acme"), "bob@example.com").unwrap();
        assert_ne!(stored, a.stored("pay", other).unwrap());
        // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
        let known = KeyHashing::with_secret(b"Jefe")
            .stored("p", "what do ya want for nothing?".into())
            .unwrap();
        assert_eq!(
            known,
            "p:#5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(is_hashed(&stored) && is_hashed(&known));
        assert!(!is_hashed(&full) && !is_hashed(&full_key("p", None, &stored).unwrap()));
        assert_eq!(KeyHashing::Off.stored("pay", full.clone()).unwrap(), full);
        let empty = KeyHashing::with_secret(b"")
            .stored("pay", full)
            .unwrap_err();
        assert!(empty.to_string().contains("empty"), "{empty}");
        assert!(!format!("{a:?}").contains("secret"));
    }

    #[test]
    fn scopes_cannot_collide_with_keys() {
        let a = full_key("p", Some("t1"), "k").unwrap();
        let b = full_key("p", None, "t1:k").unwrap();
        let c = full_key("p", Some("t1:k"), "x").unwrap();
        assert_ne!(a, b);
        assert_eq!(c, "p:t1%3Ak:x");
        assert!(full_key("p", None, "").is_err());
        assert!(full_key("p", None, &"x".repeat(2000)).is_err());
    }
}
