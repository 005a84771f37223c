//! Suppression comments, end to end.

mod common;

use common::{manifest, run, s, tree};

fn short(dir: &std::path::Path) -> common::Run {
    run(&[s(dir), "--message-format", "short"])
}

#[test]
fn on_the_line_above_an_item_and_on_the_line() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "// idem-lint: allow(parse_error)\nmod gone_a;\nmod gone_b; // idem-lint: allow(idem::parse_error)\nmod gone_c;\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["src/lib.rs:4:1: warning[idem::parse_error]: file not found for module `gone_c`"]
            .iter()
            .map(|l| format!("{}/{l}", dir.path().display()))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
}

#[test]
fn above_an_item_covers_the_whole_item() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "/// Docs and attributes may sit between.\n// idem-lint: allow(parse_error)\n#[cfg(feature = \"x\")]\nmod outer {\n    mod gone;\n}\nmod other {\n    mod gone;\n}\n",
        ),
    ]);
    let out = short(dir.path());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].contains("src/lib.rs:8:5"), "{}", out.stdout);
}

#[test]
fn allow_file_in_the_header_even_when_the_file_does_not_parse() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        ("src/lib.rs", "mod broken;\nmod also_broken;\n"),
        (
            "src/broken.rs",
            "//! Generated.\n// idem-lint: allow-file(parse_error)\n\nfn f( {}\n",
        ),
        (
            "src/also_broken.rs",
            "fn f( {}\n// idem-lint: allow-file(parse_error)\n",
        ),
    ]);
    let out = short(dir.path());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].contains("also_broken.rs"), "{}", out.stdout);
    // The late allow-file is a warning on stderr.
    assert!(
        out.stderr
            .contains("also_broken.rs:2:1: `allow-file` must be among the first lines"),
        "{}",
        out.stderr
    );
}

#[test]
fn unknown_names_warn_and_do_not_fail() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "mod gone; // idem-lint: allow(parse_eror, parse_error)\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(0);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("warning: ")
            && out
                .stderr
                .contains("src/lib.rs:1:11: unknown lint `parse_eror`"),
        "{}",
        out.stderr
    );
}

#[test]
fn suppressed_deny_findings_do_not_fail_the_run() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        ("src/lib.rs", "mod gone; // idem-lint: allow(parse_error)\n"),
    ]);
    run(&[s(dir.path()), "-D", "warnings"]).assert_code(0);
}

/// The claim and TTL lints (allow by default, turned on here) are silenced on their line like
/// any other: each source reports one finding without its comment and none with it.
#[test]
fn the_claim_and_ttl_lints_are_suppressed_on_the_line() {
    let deps = "[dependencies]\nredis = \"0.27\"\n";
    let claim = "pub async fn f(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> redis::RedisResult<()> {\n    \
                 let won: bool = redis::AsyncCommands::set_nx(conn, format!(\"job:{id}\"), 1).await?; // idem-lint: allow(claim_without_expiry)\n    \
                 if !won { return Ok(()); }\n    \
                 work().await?; // idem-lint: allow(claim_not_released)\n    \
                 Ok(())\n}\n\
                 async fn work() -> redis::RedisResult<()> { Ok(()) }\n";
    let ttl = "pub async fn g(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> redis::RedisResult<()> {\n    \
               // idem-lint: allow(ttl_shorter_than_redelivery)\n    \
               redis::AsyncCommands::set_ex(conn, format!(\"done:{id}\"), \"1\", 60).await\n}\n";
    let config = "[lints.ttl_shorter_than_redelivery]\nredelivery_seconds = 600\n";
    let flags = [
        "-W",
        "claim_without_expiry",
        "-W",
        "claim_not_released",
        "-W",
        "ttl_shorter_than_redelivery",
    ];
    for src in [claim, ttl] {
        for with_comment in [true, false] {
            let text = if with_comment {
                src.to_owned()
            } else {
                src.lines()
                    .map(|l| l.split(" // idem-lint").next().unwrap_or(l))
                    .filter(|l| !l.trim_start().starts_with("// idem-lint"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let dir = tree(&[
                ("Cargo.toml", &manifest("sup", deps)),
                ("idem-lint.toml", config),
                ("src/lib.rs", &text),
            ]);
            let mut args = vec![s(dir.path()), "--message-format", "short"];
            args.extend(flags);
            let out = run(&args);
            let found = out
                .stdout
                .lines()
                .filter(|l| {
                    l.contains("claim_without_expiry")
                        || l.contains("claim_not_released")
                        || l.contains("ttl_shorter_than_redelivery")
                })
                .count();
            let want = match (with_comment, src == claim) {
                (true, _) => 0,
                (false, true) => 2,
                (false, false) => 1,
            };
            assert_eq!(found, want, "{}\n{}", text, out.stdout);
        }
    }
}

/// Issue 38, item 7: a reason after `--` is part of the comment, not a slip.
#[test]
fn a_reason_after_the_list_is_accepted() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "mod gone; // idem-lint: allow(parse_error) -- generated by build.rs, absent in the repo\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(0);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, "", "no warning about the reason");
}

/// Issue 38, item 7: a suppression that suppresses nothing is an `unused_suppression`
/// finding (a warning; `-D unused_suppression` fails CI), removed by `--fix`; a name whose
/// lint did not run (at `allow`) is not judged.
#[test]
fn suppressions_that_suppress_nothing_are_reported() {
    let src = "mod gone; // idem-lint: allow(parse_error)\n\
               // idem-lint: allow(parse_error) -- was a missing module once\n\
               fn f() {}\n\
               fn g() {} // idem-lint: allow(claim_without_expiry)\n\
               mod also_gone; // idem-lint: allow(parse_error, check_then_act)\n";
    let dir = tree(&[("Cargo.toml", &manifest("sup", "")), ("src/lib.rs", src)]);
    let out = short(dir.path());
    out.assert_code(0);
    let found: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.rsplit("src/lib.rs:").next().unwrap_or(l).to_string())
        .collect();
    assert_eq!(
        found,
        [
            "2:1: warning[idem::unused_suppression]: suppression of `parse_error` suppresses nothing",
            "5:16: warning[idem::unused_suppression]: suppression of `check_then_act` suppresses nothing",
        ],
        "{}",
        out.stdout
    );
    run(&[s(dir.path()), "-D", "unused_suppression"]).assert_code(1);
    run(&[s(dir.path()), "-A", "unused_suppression"]).assert_code(0);
    // `--fix` removes the comment whose every name is unused, and only that one.
    run(&[s(dir.path()), "--fix"]).assert_code(0);
    let fixed = std::fs::read_to_string(dir.path().join("src/lib.rs")).expect("read");
    assert_eq!(
        fixed,
        src.replace(
            "// idem-lint: allow(parse_error) -- was a missing module once\n",
            ""
        )
    );
}

/// Issue 38, item 7: `suppression_without_reason` (allow by default) set to deny in the
/// config requires a reason on every suppression.
#[test]
fn reasons_can_be_required() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "idem-lint.toml",
            "[lints]\nsuppression_without_reason = \"deny\"\n",
        ),
        (
            "src/lib.rs",
            "mod gone; // idem-lint: allow(parse_error) -- generated\nmod also_gone; // idem-lint: allow(parse_error)\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(
        lines[0].ends_with(
            "src/lib.rs:2:16: error[idem::suppression_without_reason]: suppression without a reason"
        ),
        "{}",
        out.stdout
    );
}

/// A file that does not parse hides findings (the editor's buffer mid-edit): its
/// suppressions are not judged.
#[test]
fn suppressions_in_a_file_that_does_not_parse_are_not_judged() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        ("src/lib.rs", "mod half;\n"),
        (
            "src/half.rs",
            "// idem-lint: allow(check_then_act)\nfn f() {\n    let x = ;\n}\n",
        ),
    ]);
    let out = short(dir.path());
    assert!(!out.stdout.contains("unused_suppression"), "{}", out.stdout);
    assert!(out.stdout.contains("parse_error"), "{}", out.stdout);
}
