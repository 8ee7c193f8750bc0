//! Compile-fail tests for `#[action]`: each misuse in `tests/ui/` must give one clear error, and
//! its `.stderr` file is the error a user sees. Regenerate the files after an intended change with
//! `TRYBUILD=overwrite cargo test -p outreach-runtime --test macro_ui -- --ignored` and read every
//! one.
//!
//! Ignored by default: trybuild compiles the cases in a target folder of its own, which builds
//! every dependency of the runtime again (over ten minutes on a fresh machine), and that would
//! make the everyday `cargo test --workspace` slow. CI runs it in its `macro-ui` section
//! (`cargo test -p outreach-runtime --test macro_ui -- --ignored`).

#[test]
#[ignore = "slow (rebuilds the dependencies); CI runs it with --ignored"]
fn action_macro_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    // A later glob overrides an earlier one, so `pass_*` files are expected to compile and run.
    cases.pass("tests/ui/pass_*.rs");
}
