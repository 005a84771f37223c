//! The fixtures of `missing_idempotency_token` (and the demo crate): every finding is
//! annotated in the source and nothing else is found.

use idem_lints::{testing, Settings};
use std::path::Path;

const LINT: &str = "missing_idempotency_token";

/// The `[lints.<name>]` settings of a fixture's `idem-lint.toml`, applied as the driver does.
fn settings_of(dir: &Path) -> Settings {
    let mut settings = Settings::default();
    let Ok(text) = std::fs::read_to_string(dir.join("idem-lint.toml")) else {
        return settings;
    };
    let config: toml::Table = toml::from_str(&text).expect("fixture config parses");
    let lints = config.get("lints").and_then(toml::Value::as_table);
    for (name, value) in lints.into_iter().flatten() {
        if let Some(table) = value.as_table() {
            let mut table = table.clone();
            table.remove("level");
            let value = serde_json::to_value(table).expect("toml converts to json");
            settings
                .set(name, value)
                .expect("fixture settings are valid");
        }
    }
    settings
}

fn check_fixtures(root: &str) -> usize {
    let crates = testing::fixture_crates(Path::new(root));
    for dir in &crates {
        let (package, texts) = testing::fixture_package(dir);
        testing::assert_annotations(&package, &texts, &settings_of(dir), &[LINT]);
    }
    crates.len()
}

#[test]
fn fixtures_report_exactly_their_annotations() {
    assert_eq!(check_fixtures("../fixtures/missing_idempotency_token"), 21);
}

#[test]
fn the_demo_reports_exactly_its_annotations() {
    assert_eq!(check_fixtures("../fixtures/demo"), 1);
}

#[test]
fn configured_apis_are_needed_for_their_findings() {
    let dir = Path::new("../fixtures/missing_idempotency_token/configured_api");
    let (package, _) = testing::fixture_package(dir);
    assert!(testing::check(&package, &Settings::default()).is_empty());
    assert_eq!(testing::check(&package, &settings_of(dir)).len(), 2);
}
