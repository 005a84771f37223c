//! Compile-time errors of `#[idempotent]`, with the messages users see.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
