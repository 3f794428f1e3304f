//! The code's shape, as the redesigns left it: no file of the core's `shared/` imports a file
//! that imports it back (a file's `super::NAME` names a sibling file, never an item of
//! `mod.rs`), no Lua module requires one that requires it back, and one file writes
//! Prometheus text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use slidewin_tests::nginx::repo_root;

/// `text` without what follows `marker` on each line (comments).
fn code(text: &str, marker: &str) -> String {
    text.lines()
        .map(|l| l.split(marker).next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words that follow `prefix` in `text`, as far as they read as an identifier or a
/// dotted module name.
fn names_after<'t>(text: &'t str, prefix: &str) -> Vec<&'t str> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// A cycle of `graph`, as the path around it, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut around = path[at..].to_vec();
            around.push(node.to_string());
            return Some(around);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn files(dir: &Path, ext: &str, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn no_file_of_the_cores_shared_folder_imports_one_that_imports_it_back() {
    let dir = repo_root().join("crates/slidewin/src/shared");
    let mut paths = Vec::new();
    files(&dir, "rs", &mut paths);
    let module = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
    let modules: BTreeSet<String> = paths.iter().map(|p| module(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &paths {
        let (name, text) = (module(path), std::fs::read_to_string(path).unwrap());
        // Test modules (a file's own `mod tests`, and tests.rs) reach everything.
        let text = code(&text, "//");
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        if name == "tests" {
            continue;
        }
        let uses = graph.entry(name.clone()).or_default();
        if name == "mod" {
            // mod.rs declares the files and re-exports them: it uses each it names.
            for used in names_after(text, "pub use ") {
                uses.insert(used.split("::").next().unwrap().to_string());
            }
            continue;
        }
        for used in names_after(text, "super::") {
            let used = used.to_string();
            let sibling = modules.contains(&used) && used != "mod" && used != "tests";
            assert!(
                sibling || used == "super",
                "shared/{name}.rs takes super::{used}, an item of mod.rs: import it from its \
                 own file, so no file imports mod.rs, which imports them all"
            );
            if sibling {
                uses.insert(used);
            }
        }
        assert!(
            !text.contains("use super::{"),
            "shared/{name}.rs imports items of mod.rs (use super::{{...}})"
        );
    }
    assert_eq!(cycle(&graph), None, "{graph:#?}");
}

#[test]
fn no_lua_module_requires_one_that_requires_it_back() {
    let root = repo_root().join("lua");
    let mut paths = Vec::new();
    files(&root, "lua", &mut paths);
    let name_of = |p: &Path| {
        let relative = p.strip_prefix(&root).unwrap().with_extension("");
        relative.to_string_lossy().replace('/', ".")
    };
    let modules: BTreeSet<String> = paths.iter().map(|p| name_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &paths {
        let text = code(&std::fs::read_to_string(path).unwrap(), "--");
        let required = ["require \"", "require(\"", "require '", "require('"]
            .iter()
            .flat_map(|prefix| names_after(&text, prefix))
            .filter(|m| modules.contains(*m))
            .map(str::to_string);
        graph.entry(name_of(path)).or_default().extend(required);
    }
    assert!(
        graph["resty.slidewin"].contains("resty.slidewin.answer"),
        "the graph is read"
    );
    assert_eq!(cycle(&graph), None, "{graph:#?}");
}

#[test]
fn one_file_writes_prometheus_text() {
    let root = repo_root();
    let mut paths = Vec::new();
    for dir in ["crates", "lua"] {
        for ext in ["rs", "lua"] {
            files(&root.join(dir), ext, &mut paths);
        }
    }
    let writers: Vec<String> = paths
        .iter()
        .filter(|p| {
            !p.components()
                .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "target")
        })
        .filter(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .contains("# TYPE")
        })
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert_eq!(writers, ["crates/slidewin/src/prometheus.rs"]);
}
