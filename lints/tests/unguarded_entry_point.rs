//! UI fixtures of `unguarded_entry_point`: every annotated finding of every lint, and nothing else.

use idem_lints::testing;
use std::path::Path;

#[test]
fn fixtures_match_their_annotations() {
    let checked =
        testing::assert_fixture_crates(Path::new("../fixtures/unguarded_entry_point"), &[]);
    assert!(checked >= 6, "fixture crates checked: {checked}");
}
