//! Compile-fail tests for `#[action]`: each misuse in `tests/ui/` must give one clear error, and
//! its `.stderr` file is the error a user sees. Regenerate the files after an intended change with
//! `TRYBUILD=overwrite cargo test -p outreach-runtime --test macro_ui` and read every one.

#[test]
fn action_macro_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    // A later glob overrides an earlier one, so `pass_*` files are expected to compile and run.
    cases.pass("tests/ui/pass_*.rs");
}
