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
