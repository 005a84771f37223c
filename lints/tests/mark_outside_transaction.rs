use idem_lints::testing::{assert_annotations, fixture_crates, fixture_package};
use idem_lints::Settings;
use std::path::Path;

#[test]
fn fixtures_match_their_annotations() {
    let crates = fixture_crates(Path::new("../fixtures/mark_outside_transaction"));
    assert!(!crates.is_empty());
    for dir in crates {
        let (package, texts) = fixture_package(&dir);
        assert_annotations(
            &package,
            &texts,
            &Settings::default(),
            &["mark_outside_transaction"],
        );
    }
}
