//! `--message-format sarif` is valid SARIF 2.1.0 (checked against the official schema in
//! `../shared/schemas/`) and carries what code scanning needs.

mod common;

use cargo_idem_lint::cli::MessageFormat;
use common::{run, s};
use serde_json::Value;
use std::path::PathBuf;

fn schema() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/schemas/sarif-schema-2.1.0.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the SARIF schema is expected at `{}` (the shared/ folder beside the repository): {e}",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn assert_valid(doc: &Value) {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "invalid SARIF:\n{}", errors.join("\n"));
}

#[test]
fn the_schema_check_rejects_invalid_sarif() {
    let validator = jsonschema::options()
        .build(&schema())
        .expect("the schema compiles");
    let bad = serde_json::json!({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]});
    assert!(
        !validator.is_valid(&bad),
        "a driver without a name must be rejected"
    );
}

#[test]
fn fixture_output_validates_and_lists_every_lint() {
    let fixture = common::repo().join("fixtures/parse_errors");
    let out = run(&[s(&fixture), "--message-format", "sarif"]);
    out.assert_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_valid(&doc);
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), idem_lints::lints::ALL.len());
    for (rule, lint) in rules.iter().zip(idem_lints::lints::ALL) {
        assert_eq!(rule["id"], lint.code());
        assert_eq!(rule["name"], lint.name);
        assert_eq!(rule["shortDescription"]["text"], lint.desc);
        assert_eq!(rule["help"]["markdown"], lint.doc_markdown());
        assert_eq!(
            rule["defaultConfiguration"]["level"],
            lint.default_level
                .as_str()
                .replace("deny", "error")
                .replace("warn", "warning")
                // SARIF's level of a rule that is off by default.
                .replace("allow", "none")
        );
    }
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    let r = results
        .iter()
        .find(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                == "fixtures/parse_errors/src/broken.rs"
        })
        .expect("a result in fixtures/parse_errors/src/broken.rs, relative to the repository root");
    assert_eq!(r["ruleId"], "idem::parse_error");
    assert_eq!(r["ruleIndex"], 0);
    assert_eq!(r["level"], "warning");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(loc["region"]["startLine"], 2);
    assert_eq!(loc["region"]["startColumn"], 13);
    // 16 hex digits of hash, then the occurrence index of that hash in the run.
    assert!(r["partialFingerprints"]["idemLint/v2"]
        .as_str()
        .is_some_and(|f| f.len() == 18 && f.ends_with(":1")));
    let base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("base uri");
    let repo = common::repo().canonicalize().expect("canonical");
    assert_eq!(
        base,
        format!("file://{}/", repo.display()),
        "the repository root"
    );
}

#[test]
fn related_locations_validate() {
    let doc: Value =
        serde_json::from_str(&common::emit_decorated(MessageFormat::Sarif)).expect("JSON");
    assert_valid(&doc);
    let r = doc["runs"][0]["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["level"] == "error"))
        .expect("the deny finding");
    let related = &r["relatedLocations"][0];
    assert_eq!(related["message"]["text"], "the key came from here");
    assert_eq!(related["physicalLocation"]["region"]["startColumn"], 9);
    assert_eq!(related["physicalLocation"]["region"]["charLength"], 1);
}

#[test]
fn fingerprints_ignore_line_numbers() {
    let dir = common::tree(&[
        ("Cargo.toml", &common::manifest("fp", "")),
        ("src/lib.rs", "pub fn f() {\n    let x = ;\n}\n"),
    ]);
    let fingerprint = || {
        let out = run(&[s(dir.path()), "--message-format", "sarif"]);
        let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
        let r = &doc["runs"][0]["results"][0];
        (
            r["partialFingerprints"]["idemLint/v2"]
                .as_str()
                .expect("fingerprint")
                .to_string(),
            r["locations"][0]["physicalLocation"]["region"]["startLine"].as_u64(),
        )
    };
    let (before, line_before) = fingerprint();
    common::write(
        dir.path(),
        "src/lib.rs",
        b"// a comment\n\npub fn f() {\n        let x = ;\n}\n",
    );
    let (after, line_after) = fingerprint();
    assert_eq!(before, after);
    assert_ne!(line_before, line_after);
    common::write(
        dir.path(),
        "src/lib.rs",
        b"pub fn f() {\n    let y = ;\n}\n",
    );
    assert_ne!(fingerprint().0, before);
}

/// The artifact URIs of every result, with their base (issue 8, item 10).
fn result_uris(doc: &Value) -> Vec<(String, Value)> {
    doc["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"]["artifactLocation"];
            (
                loc["uri"].as_str().expect("uri").to_string(),
                loc["uriBaseId"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_backslash_in_a_file_name_stays_in_the_uri() {
    let dir = common::tree(&[("back\\slash.rs", "fn f( {\n")]);
    let out = run(&[s(dir.path()), "--message-format", "sarif"]);
    out.assert_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_valid(&doc);
    assert_eq!(
        result_uris(&doc),
        vec![("back%5Cslash.rs".to_string(), Value::from("%SRCROOT%"))],
        "`back/slash.rs` would name another file"
    );
}

#[cfg(unix)]
#[test]
fn a_non_utf8_file_name_is_percent_encoded_byte_wise() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.rs");
    std::fs::write(dir.path().join(name), "fn f( {\n").expect("write");
    let out = run(&[s(dir.path()), "--message-format", "sarif"]);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(
        result_uris(&doc),
        vec![("caf%E9.rs".to_string(), Value::from("%SRCROOT%"))],
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn a_file_outside_the_root_gets_an_absolute_uri_without_base() {
    let dir = common::tree(&[
        ("ws/Cargo.toml", &common::manifest("outside", "")),
        ("ws/src/lib.rs", "#[path = \"../../shared/x.rs\"]\nmod x;\n"),
        ("shared/x.rs", "fn f( {\n"),
    ]);
    let out = run(&[
        s(&dir.path().join("ws")),
        "--message-format",
        "sarif",
        "--allow-outside-workspace",
    ]);
    out.assert_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_valid(&doc);
    let uris = result_uris(&doc);
    assert_eq!(uris.len(), 1, "{uris:?}");
    let (uri, base) = &uris[0];
    assert!(
        uri.starts_with("file:///") && uri.ends_with("/shared/x.rs"),
        "{uri}"
    );
    assert_eq!(base, &Value::Null, "an absolute URI takes no uriBaseId");
}

#[test]
fn plain_mode_package_id_is_percent_encoded() {
    let dir = common::tree(&[("my dir#1/a.rs", "fn f( {\n")]);
    let root = dir.path().join("my dir#1");
    let out = run(&[s(&root), "--message-format", "json"]);
    let ids: Vec<String> = out
        .messages()
        .iter()
        .filter_map(|m| m["package_id"].as_str().map(str::to_string))
        .collect();
    assert!(!ids.is_empty(), "{}", out.stdout);
    for id in ids {
        assert!(
            id.starts_with("path+file:///") && id.contains("/my%20dir%231#my%20dir%231@0.0.0"),
            "{id}"
        );
    }
}

/// Issue 38, item 5: a note that names a place in a linked member's file (the random id
/// made in `common` and used as a key in `service`) is a related location there.
#[test]
fn notes_into_linked_members_are_related_locations() {
    let ws = common::repo().join("fixtures/cross_member/nondeterministic_key");
    let out = run(&[
        s(&ws),
        "--workspace",
        "--message-format",
        "sarif",
        "--sarif-root",
        s(&ws),
        "--no-cache",
    ]);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_valid(&doc);
    let results = doc["runs"][0]["results"].as_array().expect("results");
    let in_service = results
        .iter()
        .find(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "service/src/lib.rs"
        })
        .expect("a result in service");
    let related = in_service["relatedLocations"].as_array().expect("related");
    let made = related
        .iter()
        .find(|l| l["physicalLocation"]["artifactLocation"]["uri"] == "common/src/ids.rs")
        .unwrap_or_else(|| panic!("no related location in common: {related:?}"));
    assert_eq!(
        made["physicalLocation"]["artifactLocation"]["uriBaseId"],
        "%SRCROOT%"
    );
    assert_eq!(made["physicalLocation"]["region"]["startLine"], 5);
    assert_eq!(made["physicalLocation"]["region"]["startColumn"], 28);
    assert!(made["message"]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("in `common`: a random id")));
    let ids: Vec<u64> = related.iter().filter_map(|l| l["id"].as_u64()).collect();
    assert_eq!(
        ids,
        (0..related.len() as u64).collect::<Vec<_>>(),
        "one id each"
    );
}
