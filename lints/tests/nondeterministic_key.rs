//! UI fixtures of `nondeterministic_key`: every annotated finding and nothing else.

use idem_lints::testing;
use idem_lints::Settings;
use std::path::Path;

#[test]
fn fixtures() {
    let checked = testing::assert_fixture_crates(
        Path::new("../fixtures/nondeterministic_key"),
        &["nondeterministic_key", "check_then_act"],
    );
    assert!(checked >= 4, "fixture crates checked: {checked}");
}

#[test]
fn configured_sources_and_key_names_are_used() {
    let src = r#"
        pub fn submit(job_key: String) { let _ = job_key; }
        pub fn handler() {
            submit(my_ids::fresh_id());
            let job_key = snowflake::next_id().to_string();
            let _ = job_key;
        }
    "#;
    let package = testing::package("app", &["my_ids", "snowflake"], &[("crate", src)]);
    let texts = [src.to_owned()];
    // Built-in catalogs: neither the sources nor the key name are known.
    let findings = testing::check(&package, &Settings::default());
    assert!(findings.is_empty(), "{findings:?}");
    let mut settings = Settings::default();
    settings
        .set(
            "nondeterministic_key",
            serde_json::json!({"sources": ["snowflake::*", "my_ids::fresh_id"], "key_names": ["job_key"]}),
        )
        .unwrap();
    let findings = testing::check(&package, &settings);
    // `submit(my_ids::fresh_id())` reaches the parameter `job_key` of `submit`.
    assert_eq!(findings.len(), 2, "{findings:#?}");
    let lines: Vec<usize> = findings
        .iter()
        .map(|d| testing::line_of(&texts[0], d.span.lo))
        .collect();
    assert_eq!(lines, vec![4, 5]);
}
