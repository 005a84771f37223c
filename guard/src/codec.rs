//! How a result (or a cached error) is written for replay, so that a replay returns exactly what
//! the first run returned.
//!
//! JSON alone cannot: `Some(None)` and `None` are both `null`, and `f64::NAN` becomes `null`,
//! which then fails to decode. Results are therefore written with postcard (a compact binary
//! serde format that follows the type's own shape: an `Option` has its own tag, a float keeps its
//! bits), base64-encoded behind the version marker `p1:` so every store can keep it as text.
//!
//! Postcard is not self-describing, so types that decode through `deserialize_any`
//! (`serde_json::Value`, untagged or internally tagged enums, `#[serde(flatten)]`) or that skip
//! fields when serializing (`skip_serializing_if`) cannot be read back from it. The encoder
//! checks, before storing, that the bytes decode back into the type and give the same value;
//! when they do not, it falls back to JSON, the format of earlier versions, which the decoder
//! still reads (JSON text never starts with `p1:`).
//!
//! The JSON form gets the same check: `skip_serializing_if` over `Some(None)`, a NaN (written as
//! `null`), a `u128` inside `#[serde(flatten)]`, or an internally tagged enum can write JSON
//! that does not decode, or decodes into another value. Such a value is not stored for replay:
//! [`encode`] says why, and the key is completed as unreplayable (the effect happened; a
//! duplicate gets a decode error instead of a different value).

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Marks a postcard-encoded value (version 1 of the encoding).
const POSTCARD_V1: &str = "p1:";

/// Encodes `value` for storage, or says why it cannot be.
pub(crate) fn encode<T: Serialize + DeserializeOwned>(value: &T) -> Result<String, String> {
    if let Some(bytes) = postcard_round_trip(value) {
        let mut text = String::with_capacity(POSTCARD_V1.len() + bytes.len() * 4 / 3 + 4);
        text.push_str(POSTCARD_V1);
        STANDARD_NO_PAD.encode_string(bytes, &mut text);
        return Ok(text);
    }
    json_round_trip(value)
}

/// Decodes what [`encode`] wrote (or JSON written by earlier versions).
pub(crate) fn decode<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let Some(encoded) = text.strip_prefix(POSTCARD_V1) else {
        return serde_json::from_str(text).map_err(|e| e.to_string());
    };
    let bytes = STANDARD_NO_PAD
        .decode(encoded)
        .map_err(|e| format!("stored result is not valid base64: {e}"))?;
    match postcard::take_from_bytes(&bytes) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(format!(
            "{} bytes left over after decoding the stored result (has the result type changed?)",
            rest.len()
        )),
        Err(e) => Err(format!(
            "{e} (has the result type changed since it was stored?)"
        )),
    }
}

/// The JSON text of `value`, if it decodes back into the same value; else why not.
///
/// "The same" is judged by the JSON forms (the type need not be `PartialEq`), compared as values
/// so that a hash map's order does not count. What JSON cannot tell apart (`Some(None)` and
/// `None` written without `skip_serializing_if`) stays out of sight.
fn json_round_trip<T: Serialize + DeserializeOwned>(value: &T) -> Result<String, String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    let decoded: T = serde_json::from_str(&text).map_err(|e| {
        format!("its JSON form does not decode back into its type ({e}), so it cannot be replayed")
    })?;
    let again = serde_json::to_string(&decoded).map_err(|e| e.to_string())?;
    let same = again == text
        || serde_json::from_str::<serde_json::Value>(&again).ok()
            == serde_json::from_str(&text).ok();
    if !same {
        return Err("its JSON form decodes into a different value (a field skipped when `None`, a flattened or tagged enum?), so it cannot be replayed".to_owned());
    }
    Ok(text)
}

/// The postcard bytes of `value`, if they decode back into an equal value.
fn postcard_round_trip<T: Serialize + DeserializeOwned>(value: &T) -> Option<Vec<u8>> {
    let bytes = postcard::to_allocvec(value).ok()?;
    let (decoded, rest) = postcard::take_from_bytes::<T>(&bytes).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let again = postcard::to_allocvec(&decoded).ok()?;
    if again == bytes {
        return Some(bytes);
    }
    // A hash map decodes into another iteration order, so its bytes differ although the value is
    // the same; compare the values through JSON, whose objects ignore order.
    let same = serde_json::to_value(value).ok()? == serde_json::to_value(&decoded).ok()?;
    same.then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn round_trip<T: Serialize + DeserializeOwned>(value: &T) -> T {
        decode(&encode(value).unwrap()).unwrap()
    }

    #[test]
    fn nested_options_and_non_finite_floats_round_trip() {
        assert_eq!(round_trip(&Some(None::<u8>)), Some(None));
        assert_eq!(round_trip(&None::<Option<u8>>), None);
        assert!(round_trip(&f64::NAN).is_nan());
        assert_eq!(round_trip(&f64::INFINITY), f64::INFINITY);
        assert!(round_trip(&-0.0f64).is_sign_negative());
    }

    #[test]
    fn self_describing_types_fall_back_to_json() {
        let value = serde_json::json!({"id": 7, "tags": ["a", null]});
        let text = encode(&value).unwrap();
        assert!(!text.starts_with(POSTCARD_V1), "{text}");
        assert_eq!(round_trip(&value), value);

        #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Sparse {
            #[serde(skip_serializing_if = "Option::is_none", default)]
            note: Option<String>,
            n: u32,
        }
        let sparse = Sparse { note: None, n: 3 };
        assert_eq!(round_trip(&sparse), sparse);
    }

    /// Types that need JSON (postcard cannot read them back) but whose JSON does not round-trip
    /// either: each is refused with a reason instead of stored as something else.
    #[test]
    fn json_that_does_not_round_trip_is_refused() {
        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Skipped {
            #[serde(skip_serializing_if = "Option::is_none", default)]
            note: Option<Option<String>>,
            // Flattened: postcard cannot write it, so this type is stored as JSON.
            #[serde(flatten)]
            rest: HashMap<String, u8>,
        }
        let skipped = |note| Skipped {
            note,
            rest: HashMap::new(),
        };
        let e = encode(&skipped(Some(None))).unwrap_err();
        assert!(e.contains("decodes into a different value"), "{e}");
        assert!(encode(&skipped(None)).is_ok());
        assert!(encode(&skipped(Some(Some("n".into())))).is_ok());

        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Reading {
            #[serde(flatten)]
            extra: HashMap<String, f64>,
            id: u8,
        }
        let nan = Reading {
            extra: [("t".to_owned(), f64::NAN)].into(),
            id: 1,
        };
        let e = encode(&nan).unwrap_err();
        assert!(e.contains("does not decode back"), "{e}");

        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Big {
            #[serde(flatten)]
            inner: Inner,
        }
        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Inner {
            n: u128,
        }
        assert!(encode(&Big {
            inner: Inner { n: 1 }
        })
        .is_err());

        #[derive(Serialize, serde::Deserialize, Debug, PartialEq)]
        #[serde(untagged)]
        enum Amount {
            Whole(u64),
            Exact(f64),
        }
        // 2.0 is written `2.0`, read back as `Exact(2.0)`: the same value, so it is stored.
        assert_eq!(round_trip(&Amount::Exact(2.0)), Amount::Exact(2.0));
        // An untagged enum whose JSON is read back as another variant.
        #[derive(Serialize, serde::Deserialize, Debug)]
        #[serde(untagged)]
        enum Event {
            Created { id: u8 },
            Amended { id: u8, note: Option<String> },
        }
        let e = encode(&Event::Amended { id: 1, note: None }).unwrap_err();
        assert!(e.contains("decodes into a different value"), "{e}");
        assert!(encode(&Event::Created { id: 1 }).is_ok());
    }

    #[test]
    fn hash_maps_use_the_binary_encoding() {
        let map: HashMap<String, Option<Option<u8>>> = (0..20)
            .map(|i| {
                (
                    format!("k{i}"),
                    (i % 3 != 0).then_some((i % 2 == 0).then_some(i)),
                )
            })
            .collect();
        let text = encode(&map).unwrap();
        assert!(text.starts_with(POSTCARD_V1));
        assert_eq!(round_trip(&map), map);
    }

    #[test]
    fn json_of_earlier_versions_is_still_read() {
        assert_eq!(decode::<Option<u32>>("5").unwrap(), Some(5));
        assert_eq!(decode::<String>("\"p1:x\"").unwrap(), "p1:x");
        assert!(decode::<u32>("p1:!!").is_err());
    }
}
