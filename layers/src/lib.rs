//! The layers of a crate's modules, read from its sources, for a test to keep.
//!
//! A crate lists its top-level modules bottom-up ([`Layers`]); a module may import from its own
//! layer or any layer below, never from one above, and no modules may import each other in a
//! circle. The runtime's `tests/layers.rs` and the actions' `tests/layers.rs` keep their crates
//! that way with this one reader, so a reader can take either crate bottom-up and a change to a
//! module can only break what sits above it.
//!
//! How it reads the graph, kept simple on purpose: every `crate::<name>` in a file under `src`
//! (outside `//` comments), including each name in a `crate::{a, b::c}` group, is an edge from
//! the file's top-level module to `<name>`. `lib.rs` is the root that declares the modules and is
//! not part of the graph. Names re-exported at the crate root (`crate::ApiError`) are refused,
//! because the edge they hide would go unchecked. Exported macros (`text_enum!`) live at the root
//! whatever module declares them: naming one is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A crate's top-level modules, bottom layer first.
pub type Layers<'a> = &'a [&'a [&'a str]];

/// One source file: its top-level module, its path as shown (`src/...`), its text.
pub type Source = (String, String, String);

/// The modules `lib.rs` under `src` declares (`mod x;` and `pub mod x;`).
pub fn declared_modules(src: &Path) -> BTreeSet<String> {
    let lib = fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// Checks that every module `lib.rs` declares is in exactly one layer, and no layer lists one it
/// does not declare.
pub fn check_every_module_in_one_layer(layers: Layers, src: &Path) -> Result<(), String> {
    let declared = declared_modules(src);
    let mut listed = BTreeSet::new();
    for module in layers.iter().flat_map(|layer| layer.iter()) {
        if !listed.insert(module.to_string()) {
            return Err(format!("`{module}` appears twice in the layers"));
        }
    }
    let missing: Vec<_> = declared.difference(&listed).collect();
    if !missing.is_empty() {
        return Err(format!(
            "declared in lib.rs but not placed in the layers (tests/layers.rs): {missing:?}; \
             put each in the lowest layer that holds everything it imports"
        ));
    }
    let stale: Vec<_> = listed.difference(&declared).collect();
    if !stale.is_empty() {
        return Err(format!(
            "listed in the layers but not declared in lib.rs: {stale:?}"
        ));
    }
    Ok(())
}

/// Every `.rs` file under `dir`, recursively (also for the other tests that read the sources:
/// the actions' prelude and owner tests, the manuals' configuration check).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`oauth/token.rs` -> `oauth`), or `None` for `lib.rs`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let first = relative
        .components()
        .next()?
        .as_os_str()
        .to_str()?
        .to_owned();
    if first == "lib.rs" {
        return None;
    }
    Some(first.strip_suffix(".rs").unwrap_or(&first).to_owned())
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segment of every item in the `{...}` group that `text` starts with.
fn group_heads(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 1 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            break;
        }
        if !(depth == 1 && c == '{') {
            current.push(c);
        }
    }
    items.push(current);
    items
        .iter()
        .map(|item| {
            item.trim()
                .chars()
                .take_while(|&c| is_ident_char(c))
                .collect()
        })
        .filter(|head: &String| !head.is_empty() && head != "self")
        .collect()
}

/// The modules a source text names through `crate::`, with the line of each mention.
pub fn crate_paths(text: &str) -> Vec<(String, usize)> {
    let code: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    let mut rest = code.as_str();
    let mut offset = 0;
    while let Some(at) = rest.find("crate::") {
        let start = offset + at;
        let before = code[..start].chars().next_back();
        let after = &code[start + "crate::".len()..];
        let line = code[..start].matches('\n').count() + 1;
        // `$crate::` and `outreach_runtime::crate_x` are not this crate's paths.
        if !before.is_some_and(|c| is_ident_char(c) || c == '$') {
            if after.starts_with('{') {
                found.extend(group_heads(after).into_iter().map(|head| (head, line)));
            } else {
                let head: String = after.chars().take_while(|&c| is_ident_char(c)).collect();
                // `crate::text_enum!` is an exported macro, which lives at the root: not an edge.
                let is_macro = after[head.len()..].starts_with('!');
                if !head.is_empty() && !is_macro {
                    found.push((head, line));
                }
            }
        }
        offset = start + "crate::".len();
        rest = &code[offset..];
    }
    found
}

/// The module graph: module -> (imported module -> first place it is imported).
pub type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Every source file under `src` but `lib.rs`: (its top-level module, its path, its text).
pub fn sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .iter()
        .filter_map(|file| {
            let module = module_of(src, file)?;
            let shown = format!(
                "src/{}",
                file.strip_prefix(src).expect("under src").display()
            );
            Some((
                module,
                shown,
                fs::read_to_string(file).expect("read a source file"),
            ))
        })
        .collect()
}

/// The graph of the sources, or the `crate::` paths that name no listed module.
pub fn graph_of(layers: Layers, sources: &[Source]) -> Result<Graph, Vec<String>> {
    let known: BTreeSet<&str> = layers
        .iter()
        .flat_map(|layer| layer.iter().copied())
        .collect();
    // Exported macros (`price_item!`, `recovery!`, `text_enum!`) live at the crate root whatever
    // module declares them; naming one is not an edge.
    let macros: BTreeSet<String> = sources
        .iter()
        .flat_map(|(_, _, text)| {
            text.split("macro_rules!")
                .skip(1)
                .map(|rest| {
                    rest.trim_start()
                        .chars()
                        .take_while(|&c| is_ident_char(c))
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut graph = Graph::new();
    let mut unknown = Vec::new();
    for (module, shown, text) in sources {
        let edges = graph.entry(module.clone()).or_default();
        for (target, line) in crate_paths(text) {
            if macros.contains(&target) && !known.contains(target.as_str()) {
                continue;
            }
            if !known.contains(target.as_str()) {
                unknown.push(format!(
                    "{shown}:{line}: `crate::{target}` is not a module listed in the layers \
                     (a root re-export hides the module it comes from: name the module, e.g. \
                     `crate::error::ApiError`)"
                ));
            } else if &target != module {
                edges
                    .entry(target)
                    .or_insert_with(|| format!("{shown}:{line}"));
            }
        }
    }
    if unknown.is_empty() {
        Ok(graph)
    } else {
        Err(unknown)
    }
}

/// The graph of the crate under `src`; panics naming the paths that name no listed module.
pub fn graph(layers: Layers, src: &Path) -> Graph {
    graph_of(layers, &sources(src)).unwrap_or_else(|unknown| panic!("{}", unknown.join("\n")))
}

fn layer_of(layers: Layers, module: &str) -> usize {
    layers
        .iter()
        .position(|layer| layer.contains(&module))
        .unwrap_or_else(|| panic!("`{module}` is not in the layers"))
}

/// One sentence per import of a module from a higher layer.
pub fn upward_imports(layers: Layers, graph: &Graph) -> Vec<String> {
    let mut offences = Vec::new();
    for (module, edges) in graph {
        for (target, place) in edges {
            if layer_of(layers, target) > layer_of(layers, module) {
                offences.push(format!(
                    "{place}: `{module}` (layer {}) imports `crate::{target}` (layer {}), which \
                     is above it; move the shared piece down or the importer up",
                    layer_of(layers, module) + 1,
                    layer_of(layers, target) + 1,
                ));
            }
        }
    }
    offences
}

/// A cycle in the graph, one import per line, if there is one.
pub fn find_cycle(graph: &Graph) -> Option<String> {
    // Depth-first search: a module met again while still on the path closes a cycle.
    fn visit(
        module: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_owned());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for target in graph.get(module).into_iter().flat_map(|edges| edges.keys()) {
            if let Some(cycle) = visit(target, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(cycle) = visit(module, graph, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|pair| format!("{} -> {} ({})", pair[0], pair[1], graph[&pair[0]][&pair[1]]))
                .collect();
            return Some(steps.join("\n"));
        }
    }
    None
}

/// Takes the imports a crate still owes a fix out of its graph, so the checks judge the rest;
/// each is `(importer, imported, why it is still there)`. Returns the sentences for listed
/// imports the graph no longer has: a debt paid is struck from the list, so it only shrinks.
pub fn set_aside(graph: &mut Graph, owed: &[(&str, &str, &str)]) -> Vec<String> {
    let mut paid = Vec::new();
    for (from, to, _) in owed {
        let removed = graph.get_mut(*from).and_then(|edges| edges.remove(*to));
        if removed.is_none() {
            paid.push(format!(
                "`{from}` no longer imports `crate::{to}`: strike it from the owed imports"
            ));
        }
    }
    paid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_finds_crate_paths_in_groups_and_skips_comments() {
        let text = "use crate::{docs, oauth::revoke, state::{AppState, Documents}};\n\
                // crate::server is only mentioned here\n\
                let x = crate::ids::new_id(\"x\"); $crate::y";
        let names: Vec<String> = crate_paths(text)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["docs", "oauth", "state", "ids"]);
    }

    #[test]
    fn the_checks_name_an_upward_import_a_cycle_and_a_root_re_export() {
        let source = |module: &str, text: &str| {
            (
                module.to_owned(),
                format!("src/{module}.rs"),
                text.to_owned(),
            )
        };
        const LAYERS: Layers = &[&["clock"], &["state", "request_id"], &["auth"], &["server"]];
        let graph = graph_of(
            LAYERS,
            &[
                source("auth", "use crate::server::build_state;"),
                source("server", "use crate::{auth, state};"),
                source("state", "use crate::request_id::RequestId;"),
                source("request_id", "fn f() { crate::state::AppState::new(); }"),
            ],
        )
        .expect("every path names a module");
        assert_eq!(
            upward_imports(LAYERS, &graph),
            [
                "src/auth.rs:1: `auth` (layer 3) imports `crate::server` (layer 4), which is above it; \
          move the shared piece down or the importer up"
            ]
        );
        let cycle = find_cycle(&graph).expect("auth -> server -> auth");
        assert!(
            cycle.starts_with("auth -> server (src/auth.rs:1)\nserver -> auth"),
            "{cycle}"
        );
        let unknown = graph_of(LAYERS, &[source("clock", "crate::ApiError::internal(e)")])
            .expect_err("a root re-export is refused");
        assert!(
            unknown[0].starts_with("src/clock.rs:1: `crate::ApiError`"),
            "{unknown:?}"
        );
        let mut owing = graph.clone();
        let paid = set_aside(
            &mut owing,
            &[
                ("auth", "server", "planted"),
                ("clock", "auth", "never was"),
            ],
        );
        assert!(upward_imports(LAYERS, &owing).is_empty());
        let left = find_cycle(&owing).expect("request_id -> state -> request_id");
        assert!(left.starts_with("request_id -> state"), "{left}");
        assert_eq!(
            paid,
            ["`clock` no longer imports `crate::auth`: strike it from the owed imports"]
        );
    }
}
