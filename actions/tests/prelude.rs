//! The actions use the runtime through its prelude only.
//!
//! `outreach_runtime::prelude` is the set an action author may touch (see its `//!`); everything
//! else in the runtime (the state, the faces, auth, dispatch, the OAuth server, the web pages) may
//! change under the actions. This test reads every source file of this crate and fails on any
//! `outreach_runtime::` path that does not go through `outreach_runtime::prelude`, naming the
//! file and line, so a reach past the prelude is a conscious addition to it.

use std::fs;
use std::path::Path;

use outreach_layers::rust_files;

#[test]
fn actions_reach_the_runtime_only_through_its_prelude() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no sources under {}", src.display());
    let mut reaches = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("outreach_runtime::") {
                if !code[at..].starts_with("outreach_runtime::prelude") {
                    reaches.push(format!(
                        "{}:{}: {}",
                        file.strip_prefix(&src).unwrap_or(file).display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        reaches.is_empty(),
        "these lines reach past `outreach_runtime::prelude`; use the prelude, or add what is \
         needed to it (runtime/src/prelude.rs):\n{}",
        reaches.join("\n")
    );
}
