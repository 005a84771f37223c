//! UI fixtures of `check_then_act`: every annotated finding and nothing else.

use idem_lints::testing;
use idem_lints::Settings;
use std::path::Path;

#[test]
fn fixtures() {
    let crates = testing::fixture_crates(Path::new("../fixtures/check_then_act"));
    assert!(crates.len() >= 4, "fixtures found: {crates:?}");
    for dir in crates {
        let (package, texts) = testing::fixture_package(&dir);
        testing::assert_annotations(
            &package,
            &texts,
            &Settings::default(),
            &["nondeterministic_key", "check_then_act"],
        );
    }
}
