//! The tests and functions the docs name exist. `ARCHITECTURE.md`, `CONTRIBUTING.md` and
//! `docs/*.md` name the test that holds each invariant and fast path to account
//! (`module::test_name` for an integration test under `tests/`, `module::file::test_name`
//! or `module::file::tests::test_name` for a unit test under `src/`); a name that no longer
//! matches a function fails here, so a renamed or deleted test cannot leave a claim behind.

use std::path::{Path, PathBuf};

use crate::util::rust_files;

/// Every backquoted `a::b::c_d_e` path of `text` whose last segment looks like a test name
/// (lower case, three or more words), with the line it is on.
fn named_tests(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, quoted) in line.split('`').enumerate() {
            let is_path = quoted.contains("::")
                && quoted.split("::").all(|s| {
                    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                });
            let last = quoted.rsplit("::").next().unwrap_or("");
            if i % 2 == 1 && is_path && last.matches('_').count() >= 2 {
                found.push((n + 1, quoted.to_string()));
            }
        }
    }
    found
}

/// The files a path's function may be defined in: the integration test module it names,
/// else every file of the library module its first segment names.
fn candidates(root: &Path, path: &str) -> Vec<PathBuf> {
    let path = path.strip_prefix("rolegate::").unwrap_or(path);
    let first = path.split("::").next().unwrap_or("");
    let test_file = root.join("tests").join(format!("{first}.rs"));
    if test_file.is_file() {
        return vec![test_file];
    }
    let mut files = Vec::new();
    let single = root.join("src").join(format!("{first}.rs"));
    if single.is_file() {
        files.push(single);
    }
    rust_files(&root.join("src").join(first), &mut files);
    files
}

fn defines(files: &[PathBuf], name: &str) -> bool {
    let wanted = [format!("fn {name}("), format!("fn {name}<")];
    files.iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| wanted.iter().any(|w| t.contains(w))))
}

/// The names of `text` (a page at `page`) that match no function, as `page:line: name`.
fn missing(root: &Path, page: &str, text: &str) -> Vec<String> {
    named_tests(text)
        .into_iter()
        .filter(|(_, path)| {
            let name = path.rsplit("::").next().unwrap_or("");
            !defines(&candidates(root, path), name)
        })
        .map(|(line, path)| format!("{page}:{line}: {path}"))
        .collect()
}

#[test]
fn every_test_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("ARCHITECTURE.md"), root.join("CONTRIBUTING.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        pages.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")));
    }
    let mut problems = Vec::new();
    let mut named = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_default();
        named += named_tests(&text).len();
        let shown = page.strip_prefix(root).unwrap_or(page).display().to_string();
        problems.extend(missing(root, &shown, &text));
    }
    assert!(named > 50, "the docs name the tests that hold their claims ({named} found)");
    assert!(problems.is_empty(), "names in the docs that match no function:\n{}", problems.join("\n"));
}

#[test]
fn a_name_that_matches_no_function_is_reported_with_its_page_and_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = "- held by `architecture::layers_only_point_down`.\n\
                - and by `architecture::a_test_that_was_renamed_long_ago`, `world::index::tests::no_such_unit_test`.\n\
                - `security::terminal_safe` is a function, not a test name.";
    assert_eq!(
        missing(root, "page.md", text),
        [
            "page.md:2: architecture::a_test_that_was_renamed_long_ago",
            "page.md:2: world::index::tests::no_such_unit_test"
        ]
    );
}
