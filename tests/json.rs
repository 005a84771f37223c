//! `--message-format json` is read by rust-analyzer through `cargo_metadata::Message`: every
//! field it uses must survive that deserialization.

mod common;

use cargo_idem_lint::cli::MessageFormat;
use cargo_metadata::diagnostic::{Applicability, DiagnosticLevel};
use cargo_metadata::Message;
use common::{run, s};
use std::path::Path;

fn parse_lines(stdout: &str) -> Vec<Message> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Message>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn every_line_deserializes_as_cargo_check_output() {
    let fixture = common::repo().join("fixtures/parse_errors");
    let out = run(&[s(&fixture), "--message-format", "json"]);
    out.assert_code(0);
    let messages = parse_lines(&out.stdout);
    assert!(matches!(messages.last(), Some(Message::BuildFinished(b)) if b.success));
    let compiler: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            Message::CompilerMessage(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(compiler.len(), 3, "{}", out.stdout);
    let broken = compiler
        .iter()
        .find(|c| c.message.spans[0].file_name.ends_with("broken.rs"))
        .expect("the finding in broken.rs");
    let m = &broken.message;
    let code = m.code.as_ref().expect("code");
    assert_eq!(code.code, "idem::parse_error");
    // As rustc for a lint: no explanation (that is for error codes like `E0308`).
    assert_eq!(code.explanation, None);
    assert_eq!(m.level, DiagnosticLevel::Warning);
    assert_eq!(m.message, "file does not parse");
    let span = &m.spans[0];
    assert!(span.is_primary);
    assert!(
        Path::new(&span.file_name).is_absolute(),
        "{}",
        span.file_name
    );
    assert!(Path::new(&span.file_name).is_file());
    assert_eq!((span.line_start, span.line_end), (2, 2));
    assert_eq!((span.column_start, span.column_end), (13, 14));
    assert_eq!((span.byte_start, span.byte_end), (31, 32));
    assert_eq!(span.text[0].text, "    let x = ; //~ WARN parse_error");
    assert_eq!(
        (span.text[0].highlight_start, span.text[0].highlight_end),
        (13, 14)
    );
    assert_eq!(span.label.as_deref(), Some("expected an expression"));
    let rendered = m.rendered.as_deref().expect("rendered");
    assert!(
        rendered.starts_with("warning[idem::parse_error]: file does not parse"),
        "{rendered}"
    );
    assert!(rendered.contains("src/broken.rs:2:13"), "{rendered}");
    assert_eq!(m.children[0].level, DiagnosticLevel::Note);
    // A complete target: rust-analyzer drops a line whose target it cannot read.
    let t = &broken.target;
    assert_eq!(t.name, "parse_errors");
    assert!(t.is_lib());
    assert!(t.src_path.as_std_path().is_file());
    assert!(broken.package_id.repr.contains("parse-errors"));
}

#[test]
fn the_raw_target_object_is_complete() {
    let fixture = common::repo().join("fixtures/parse_errors");
    let out = run(&[s(&fixture), "--message-format", "json"]);
    let msg = &out.messages()[0];
    for key in [
        "kind",
        "crate_types",
        "name",
        "src_path",
        "edition",
        "doc",
        "doctest",
        "test",
    ] {
        assert!(
            msg["target"].get(key).is_some(),
            "target lacks `{key}`: {}",
            msg["target"]
        );
    }
    assert!(msg["manifest_path"]
        .as_str()
        .is_some_and(|p| p.ends_with("Cargo.toml")));
    assert_eq!(msg["message"]["$message_type"], "diagnostic");
    assert!(msg["message"]["spans"][0]["expansion"].is_null());
}

#[test]
fn labels_and_suggestions_take_rustc_shape() {
    let out = common::emit_decorated(MessageFormat::Json);
    let messages = parse_lines(&out);
    assert!(matches!(messages.last(), Some(Message::BuildFinished(b)) if !b.success));
    let m = messages
        .iter()
        .find_map(|m| match m {
            Message::CompilerMessage(c) if c.message.level == DiagnosticLevel::Error => {
                Some(&c.message)
            }
            _ => None,
        })
        .expect("the deny-level finding");
    assert_eq!(m.spans.len(), 2);
    let label = &m.spans[1];
    assert!(!label.is_primary);
    assert_eq!(label.label.as_deref(), Some("the key came from here"));
    // Columns count characters: `λ` is one column although two bytes.
    assert_eq!(
        (label.line_start, label.column_start, label.column_end),
        (2, 9, 10)
    );
    assert_eq!(label.byte_end - label.byte_start, 2);
    let levels: Vec<_> = m.children.iter().map(|c| c.level).collect();
    assert_eq!(
        levels,
        [
            DiagnosticLevel::Note,
            DiagnosticLevel::Help,
            DiagnosticLevel::Help
        ]
    );
    let fix = &m.children[2].spans[0];
    assert_eq!(
        fix.suggested_replacement.as_deref(),
        Some(".client_request_token(/* idempotency key */)")
    );
    assert_eq!(
        fix.suggestion_applicability,
        Some(Applicability::HasPlaceholders)
    );
    assert_eq!(fix.byte_start, fix.byte_end);
    assert_eq!((fix.line_start, fix.column_start), (4, 9));
    assert!(m
        .rendered
        .as_deref()
        .is_some_and(|r| r.starts_with("error[idem::parse_error]")));
}

/// The passes run side by side and share the analysis: what each lint finds with every lint
/// on must be what it finds alone, in the same order.
#[test]
fn each_lint_finds_with_the_others_on_what_it_finds_alone() {
    let fixture = common::repo().join("fixtures/demo");
    let lints = idem_lints::lints::ALL;
    let compiler_lines = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![s(&fixture), "--message-format", "json", "--no-cache"];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        out.stdout
            .lines()
            .filter(|l| l.contains("\"reason\":\"compiler-message\""))
            .map(str::to_owned)
            .collect()
    };
    let all = compiler_lines(&[]);
    let mut alone_codes = 0;
    for lint in lints {
        let code = format!("\"code\":\"idem::{}\"", lint.name);
        let mut allow = Vec::new();
        for other in lints.iter().filter(|o| o.name != lint.name) {
            allow.extend(["-A", other.name]);
        }
        let alone = compiler_lines(&allow);
        let with_others: Vec<&String> = all.iter().filter(|l| l.contains(&code)).collect();
        assert_eq!(
            alone.iter().collect::<Vec<_>>(),
            with_others,
            "{}",
            lint.name
        );
        alone_codes += usize::from(!alone.is_empty());
    }
    // The fixture exercises most lints, so the comparison is not between empty lists.
    assert!(
        alone_codes >= 4,
        "{alone_codes} lints with findings on the demo"
    );
}

/// Issue 38, item 10: the lines read as `cargo check --message-format=json` prints them
/// (checked against cargo 1.95 on a crate with a warning): a target without
/// `required-features` has no such key, children carry no `$message_type`, a lint's code
/// has a null `explanation`, and `rendered` has ANSI codes under
/// `json-diagnostic-rendered-ansi` only.
#[test]
fn lines_match_what_cargo_prints() {
    let fixture = common::repo().join("fixtures/demo");
    let plain = run(&[s(&fixture), "--message-format", "json", "--no-cache"]);
    let messages = plain.messages();
    assert!(messages.len() > 1, "{}", plain.stdout);
    for m in &messages {
        assert!(
            m["target"].get("required-features").is_none(),
            "{}",
            m["target"]
        );
        assert_eq!(m["message"]["$message_type"], "diagnostic");
        assert!(
            m["message"]["code"]["explanation"].is_null(),
            "{}",
            m["message"]["code"]
        );
        let children = m["message"]["children"].as_array().expect("children");
        assert!(!children.is_empty());
        for c in children {
            assert!(c.get("$message_type").is_none(), "{c}");
        }
        let rendered = m["message"]["rendered"].as_str().expect("rendered");
        assert!(!rendered.contains('\x1b'), "{rendered}");
    }
    let ansi = run(&[
        s(&fixture),
        "--message-format",
        "json-diagnostic-rendered-ansi",
        "--no-cache",
    ]);
    let colored = ansi.messages();
    assert_eq!(colored.len(), messages.len());
    for (c, p) in colored.iter().zip(&messages) {
        let rendered = c["message"]["rendered"].as_str().expect("rendered");
        assert!(rendered.contains("\x1b["), "{rendered}");
        // The same text once the codes are removed.
        let mut stripped = String::new();
        let mut chars = rendered.chars();
        while let Some(ch) = chars.next() {
            if ch == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                stripped.push(ch);
            }
        }
        assert_eq!(
            stripped,
            p["message"]["rendered"].as_str().expect("rendered")
        );
        let mut c = c.clone();
        let mut p = p.clone();
        c["message"]["rendered"] = serde_json::Value::Null;
        p["message"]["rendered"] = serde_json::Value::Null;
        assert_eq!(c, p);
    }
}

/// Issue 38, item 5: a `SELECT` check before an `UPDATE` of the row (a read-modify-write)
/// gets a conditional `UPDATE` as its help, not an `INSERT .. ON CONFLICT DO NOTHING`, which
/// has no row to insert; a `SELECT` before an `INSERT` keeps the claim.
#[test]
fn check_then_act_on_an_update_proposes_a_conditional_update() {
    let fixture = common::repo().join("fixtures/check_then_act/sql");
    let out = run(&[s(&fixture), "--message-format", "json", "--no-cache"]);
    let help_of = |write: &str| -> Vec<String> {
        let m = out
            .messages()
            .into_iter()
            .find(|m| {
                m["message"]["code"]["code"] == "idem::check_then_act"
                    && m["message"]["message"]
                        .as_str()
                        .is_some_and(|t| t.contains(&format!("`{write}` write")))
            })
            .unwrap_or_else(|| panic!("a finding on `{write}`: {}", out.stdout));
        m["message"]["children"]
            .as_array()
            .expect("children")
            .iter()
            .filter(|c| c["level"] == "help" && c["spans"].as_array().is_some_and(Vec::is_empty))
            .map(|c| c["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let update = help_of("UPDATE inbox").join("\n");
    assert!(update.contains("conditional update"), "{update}");
    assert!(update.contains("rows_affected()"), "{update}");
    assert!(!update.contains("ON CONFLICT"), "{update}");
    let insert = help_of("INSERT INTO processed_events").join("\n");
    assert!(
        insert.contains("INSERT ... ON CONFLICT DO NOTHING"),
        "{insert}"
    );
}

/// Issue 38, item 5: one check followed by several plain writes is one finding, at the
/// first write, with a label on each later one (it was one finding per write, three here);
/// and the help of a read-modify-write of a counter is the conditional form for a counter,
/// not an insert, nor a status's.
#[test]
fn one_check_before_several_writes_is_one_finding_with_a_label_per_write() {
    let fixture = common::repo().join("fixtures/check_then_act/one_check_many_writes");
    let out = run(&[s(&fixture), "--message-format", "json", "--no-cache"]);
    let findings: Vec<serde_json::Value> = out
        .messages()
        .into_iter()
        .filter(|m| m["message"]["code"]["code"] == "idem::check_then_act")
        .collect();
    assert_eq!(findings.len(), 1, "{}", out.stdout);
    let message = &findings[0]["message"];
    let text = std::fs::read_to_string(fixture.join("src/lib.rs")).expect("read");
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
            .unwrap_or_else(|| panic!("`{needle}` in the fixture"))
    };
    let spans = message["spans"].as_array().expect("spans");
    let primary: Vec<u64> = spans
        .iter()
        .filter(|s| s["is_primary"] == true)
        .map(|s| s["line_start"].as_u64().expect("line"))
        .collect();
    assert_eq!(primary, [line_of("SET score = score + 1")], "{message}");
    for later in ["SET upvotes = upvotes + 1", "SET processed = true"] {
        let labelled = spans.iter().any(|s| {
            s["is_primary"] == false
                && s["line_start"].as_u64() == Some(line_of(later))
                && s["label"]
                    .as_str()
                    .is_some_and(|l| l.contains("after the same check"))
        });
        assert!(labelled, "a label on `{later}`: {message}");
    }
    let help: Vec<&str> = message["children"]
        .as_array()
        .expect("children")
        .iter()
        .filter(|c| c["level"] == "help" && c["spans"].as_array().is_some_and(Vec::is_empty))
        .filter_map(|c| c["message"].as_str())
        .collect();
    let help = help.join("\n");
    assert!(
        help.contains("n = n + 1 WHERE id = $1 AND n = $2"),
        "{help}"
    );
    assert!(!help.contains("ON CONFLICT DO NOTHING`"), "{help}");
    assert!(!help.contains("status"), "{help}");
}
