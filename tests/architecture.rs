//! The layering invariant of ARCHITECTURE.md: a module of the library imports only from
//! layers below its own. The test reads every `crate::…` path of `src/` (the binary's
//! `main.rs` and `cli/` are above everything and use the public API only) and fails on any
//! edge that points sideways or up, naming the file and the line. The crate root holds no
//! item of its own, only re-exports: a `crate::X` that names no module of [`LAYERS`]
//! (`crate::BoxFuture`, `crate::Error`) is an edge to nowhere and fails the same way.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::util::rust_files;

/// The library's top-level modules, lowest layer first. Modules in one layer do not import
/// each other.
const LAYERS: &[&[&str]] = &[
    &["codes", "future", "unwind", "security", "spans"],
    &["world", "cost", "label"],
    &["tools"],
    &["model"],
    &["gate"],
    &["memory"],
    &["agent"],
    &["human", "multi"],
    &["lab"],
    &["design"],
    &["eval"],
    &["suite"],
    &["report"],
    &["store"],
    &["testkit"],
    &["error"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a file of `src/` belongs to (`src/gate/policy.rs` → `gate`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    Some(first.strip_suffix(".rs").unwrap_or(first).to_string())
}

/// The code of a file without comments and without its unit-test module (by this crate's
/// convention the `#[cfg(test)] mod tests` block closes the file): unit tests may reach
/// any layer, library code may not.
fn library_code(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|(_, next)| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split("//").next().unwrap_or(line);
        out.push((n + 1, code));
    }
    out
}

/// Every top-level name a `crate::` path on this line starts with, grouped uses included:
/// a module, or an item of the crate root (which the layers may not name).
fn targets(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let body = group.split('}').next().unwrap_or("");
            for item in body.split(',') {
                let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                found.push(name);
            }
        } else {
            found.push(after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
        rest = after;
    }
    found
}

/// Every edge against the layer order in the files under `src`, as `file:line: a -> b`.
fn violations(src: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut bad = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let Some(from) = module_of(relative) else { continue };
        let Some(own) = layer_of(&from) else {
            bad.push(format!("{}: module `{from}` has no layer in LAYERS", relative.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, code) in library_code(&text) {
            for to in targets(code) {
                if to == from {
                    continue;
                }
                match layer_of(&to) {
                    Some(l) if l < own => {}
                    Some(_) => bad.push(format!("{}:{n}: {from} -> {to}", relative.display())),
                    None if to.starts_with(|c: char| c.is_ascii_uppercase()) => {
                        bad.push(format!(
                            "{}:{n}: {from} -> crate::{to} (a root item: name its module)",
                            relative.display()
                        ));
                    }
                    None => bad.push(format!("{}:{n}: {from} -> {to} (no layer)", relative.display())),
                }
            }
        }
    }
    bad
}

/// The library's files: everything under `src/` but the crate root and the binary.
fn library_files(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| {
        let r = f.strip_prefix(src).unwrap();
        r != Path::new("lib.rs") && r != Path::new("main.rs") && !r.starts_with("cli")
    });
    files.sort();
    files
}

#[test]
fn layers_only_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = library_files(&src);
    assert!(files.len() > 50, "the walk found the library ({} files)", files.len());
    let bad = violations(&src, &files);
    assert!(bad.is_empty(), "edges against the layer order:\n{}", bad.join("\n"));
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f.strip_prefix(&src).unwrap())).collect();
    let listed: BTreeSet<String> = LAYERS.iter().flat_map(|l| l.iter().map(|m| m.to_string())).collect();
    assert_eq!(modules, listed, "every module has a layer and every layer entry exists");
}

#[test]
fn an_upward_or_sideways_use_is_reported_with_its_line() {
    let dir = std::env::temp_dir().join(format!("rolegate-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("gate")).unwrap();
    let gate = dir.join("gate/mod.rs");
    std::fs::write(
        &gate,
        "//! use crate::eval in a comment is not an edge\n\
         use crate::tools::ToolCall;\n\
         use crate::{model::LlmRequest, design::Plan};\n\
         fn f() { crate::eval::grade(); } // crate::store in a comment\n\
         #[cfg(test)]\nmod tests {\n    use crate::store::Store;\n}\n",
    )
    .unwrap();
    let human = dir.join("human.rs");
    std::fs::write(&human, "use crate::multi::Role;\nuse crate::nowhere::X;\n").unwrap();
    // a root item, even one every layer could see, is no layer: name the module it is in
    std::fs::create_dir_all(dir.join("model")).unwrap();
    let model = dir.join("model/mod.rs");
    std::fs::write(&model, "use crate::BoxFuture;\nuse crate::future::BoxFuture as Fine;\nfn f() -> crate::Error {}\n")
        .unwrap();
    let bad = violations(&dir, &[gate, human, model]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        bad,
        [
            "gate/mod.rs:3: gate -> design",
            "gate/mod.rs:4: gate -> eval",
            "human.rs:1: human -> multi",
            "human.rs:2: human -> nowhere (no layer)",
            "model/mod.rs:1: model -> crate::BoxFuture (a root item: name its module)",
            "model/mod.rs:3: model -> crate::Error (a root item: name its module)",
        ]
    );
}

/// The modules `src/lib.rs` declares (`mod x;`, `pub mod x;`, under any attribute).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub ").unwrap_or(l.trim()).strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_crate_docs_list_every_module_in_their_layout() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let layout: String = lib
        .lines()
        .skip_while(|l| !l.starts_with("//! # Layout"))
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let modules = declared_modules(&lib);
    let listed: BTreeSet<String> = LAYERS.iter().flat_map(|l| l.iter().map(|m| m.to_string())).collect();
    assert_eq!(modules, listed, "lib.rs declares the modules of LAYERS");
    let missing: Vec<&String> = modules
        .iter()
        .filter(|m| !layout.contains(&format!("[`{m}`]")) && !layout.contains(&format!("`{m}` (")))
        .collect();
    assert!(missing.is_empty(), "lib.rs's Layout does not list {missing:?}");
}

#[test]
fn no_public_field_is_a_compact_string() {
    // an inline string is a storage choice: a public field reads as `&str` through an
    // accessor, so the choice can change without changing the API
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("pub ") && !t.starts_with("pub fn") && t.contains(": ") && t.contains("CompactString") {
                bad.push(format!("{}:{}: {t}", file.strip_prefix(&src).unwrap().display(), n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "public CompactString fields:\n{}", bad.join("\n"));
}
