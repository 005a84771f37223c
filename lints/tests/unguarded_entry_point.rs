use idem_lints::testing::{assert_annotations, fixture_crates, fixture_package};
use idem_lints::Settings;
use std::path::Path;

#[test]
fn fixtures_match_their_annotations() {
    let crates = fixture_crates(Path::new("../fixtures/unguarded_entry_point"));
    assert!(!crates.is_empty(), "{crates:?}");
    for dir in crates {
        let (package, texts) = fixture_package(&dir);
        assert_annotations(
            &package,
            &texts,
            &Settings::default(),
            &["unguarded_entry_point"],
        );
    }
}
