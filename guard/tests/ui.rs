//! Compile-time errors of `#[idempotent]`, with the messages users see, and code that must
//! compile (and run) under it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
