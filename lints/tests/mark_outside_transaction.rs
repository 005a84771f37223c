//! UI fixtures of `mark_outside_transaction`: every annotated finding of every lint, and nothing else.

use idem_lints::testing;
use std::path::Path;

#[test]
fn fixtures_match_their_annotations() {
    let checked =
        testing::assert_fixture_crates(Path::new("../fixtures/mark_outside_transaction"), &[]);
    assert!(checked >= 6, "fixture crates checked: {checked}");
}
