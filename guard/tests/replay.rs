//! A replay returns exactly what the first run returned, for values serde can write: nested
//! `Option`s, `Result`s, enums of every shape, unit, non-finite floats, maps.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};

use idem_guard::{Error, Guard, MemoryStore};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// A float compared by its bits, so that NaN equals itself and -0.0 differs from 0.0.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
struct Bits(f64);

impl PartialEq for Bits {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
struct Bits32(f32);

impl PartialEq for Bits32 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Unit,
    Newtype(Option<Option<Bits>>),
    Tuple(u8, Option<()>),
    Struct {
        name: Option<Option<String>>,
        ok: Result<(), Option<bool>>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Value {
    nested: Option<Option<Option<i64>>>,
    result: Result<Option<Bits>, Option<String>>,
    shapes: Vec<Option<Shape>>,
    unit: (),
    ordered: BTreeMap<String, Option<Option<Bits>>>,
    hashed: HashMap<u16, Result<(), Option<bool>>>,
    single: Bits32,
}

fn float() -> impl Strategy<Value = Bits> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE / 2.0),
    ]
    .prop_map(Bits)
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Unit),
        proptest::option::of(proptest::option::of(float())).prop_map(Shape::Newtype),
        (any::<u8>(), proptest::option::of(Just(()))).prop_map(|(a, b)| Shape::Tuple(a, b)),
        (
            proptest::option::of(proptest::option::of(".{0,8}")),
            prop_oneof![
                Just(Ok(())),
                proptest::option::of(any::<bool>()).prop_map(Err)
            ],
        )
            .prop_map(|(name, ok)| Shape::Struct { name, ok }),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(proptest::option::of(proptest::option::of(any::<i64>()))),
        prop_oneof![
            proptest::option::of(float()).prop_map(Ok),
            proptest::option::of(".{0,8}").prop_map(Err),
        ],
        proptest::collection::vec(proptest::option::of(shape()), 0..4),
        proptest::collection::btree_map(
            ".{0,6}",
            proptest::option::of(proptest::option::of(float())),
            0..4,
        ),
        proptest::collection::hash_map(
            any::<u16>(),
            prop_oneof![
                Just(Ok(())),
                proptest::option::of(any::<bool>()).prop_map(Err)
            ],
            0..4,
        ),
        any::<f32>(),
    )
        .prop_map(|(nested, result, shapes, ordered, hashed, single)| Value {
            nested,
            result,
            shapes,
            unit: (),
            ordered,
            hashed,
            single: Bits32(single),
        })
}

/// Runs `value` through a first delivery and a duplicate, and returns what the duplicate got.
fn replay<T>(value: T) -> T
where
    T: Serialize + serde::de::DeserializeOwned + Clone,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let guard = Guard::new(MemoryStore::new()).prefix("replay");
        let runs = AtomicU32::new(0);
        let body = || {
            runs.fetch_add(1, Ordering::SeqCst);
            let value = value.clone();
            async move { Ok::<T, Error>(value) }
        };
        guard.run("k", &(), body).await.unwrap();
        let replayed = guard.run_outcome("k", &(), body).await.unwrap();
        assert!(replayed.is_replay());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        replayed.into_inner()
    })
}

#[test]
fn the_cases_json_got_wrong() {
    assert_eq!(replay(Some(None::<u32>)), Some(None));
    assert!(replay(f64::NAN).is_nan());
    assert_eq!(replay(Ok::<Option<()>, ()>(Some(()))), Ok(Some(())));
}

#[test]
fn cached_errors_round_trip_too() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        enum Declined {
            Guard(String),
            Reason(Option<Option<String>>),
        }
        impl From<Error> for Declined {
            fn from(e: Error) -> Self {
                Declined::Guard(e.to_string())
            }
        }
        let guard = Guard::new(MemoryStore::new()).on_error(idem_guard::on_error::Cache);
        let first: Result<(), Declined> = guard
            .run("k", &(), || async { Err(Declined::Reason(Some(None))) })
            .await;
        let again: Result<(), Declined> = guard.run("k", &(), || async { Ok(()) }).await;
        assert_eq!(first, Err(Declined::Reason(Some(None))));
        assert_eq!(again, Err(Declined::Reason(Some(None))));
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_value_replays_as_it_was_returned(v in value()) {
        prop_assert_eq!(replay(v.clone()), v);
    }
}
