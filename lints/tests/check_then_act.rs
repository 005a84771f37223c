//! UI fixtures of `check_then_act`: every annotated finding and nothing else.

use idem_lints::testing;
use std::path::Path;

#[test]
fn fixtures() {
    let checked = testing::assert_fixture_crates(
        Path::new("../fixtures/check_then_act"),
        &["nondeterministic_key", "check_then_act"],
    );
    assert!(checked >= 4, "fixture crates checked: {checked}");
}

/// A check and a write reached through a trait (`Arc<dyn Store>`, `S: Store`, `impl Store`,
/// a destructured `State(st)`) name the implementation they went through.
#[test]
fn findings_through_a_trait_name_the_implementation() {
    let (package, _) = testing::fixture_package(Path::new("../fixtures/check_then_act/dispatch"));
    let found = testing::check(&package, &Default::default());
    let through: Vec<_> = found
        .iter()
        .filter(|d| d.lint.name == "check_then_act")
        .collect();
    assert_eq!(through.len(), 7, "{found:#?}");
    for d in through {
        let labels: Vec<&str> = d.labels.iter().map(|l| l.message.as_str()).collect();
        assert!(
            labels.contains(&"`exists` reads the store here, in `impl Store for RedisStore`")
                && labels.contains(&"`set` writes it here, in `impl Store for RedisStore`"),
            "{labels:?}"
        );
    }
}
