//! Every field read with `crate::common::patch` (an update's field where `null` clears and
//! leaving it out keeps the value) carries the schema mark that says so,
//! `#[schemars(extend("x-null-clears" = true))]`: without it the MCP tool list would take `null`
//! out of the field's type (as it does for every other optional field), and a host that checks
//! arguments could not clear it. serde's attributes are not visible to the schema, so the source
//! is read.

use std::path::Path;

const PATCH: &str = r#"deserialize_with = "crate::common::patch""#;
const MARK: &str = r#"#[schemars(extend("x-null-clears" = true))]"#;

fn sources(folder: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(folder).expect("a folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_field_where_null_clears_carries_the_mark() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut marked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("#[serde(") || !line.contains(PATCH) {
                continue;
            }
            let attributes = lines[index + 1..].iter().take_while(|next| {
                next.trim_start().starts_with("#[") || next.trim_start().starts_with("///")
            });
            assert!(
                attributes.clone().any(|next| next.trim() == MARK),
                "{}:{}: a field read with `crate::common::patch` needs {MARK}",
                file.display(),
                index + 1
            );
            marked += 1;
        }
    }
    assert!(
        marked > 20,
        "only {marked} patch fields found: is the pattern still right?"
    );
}
