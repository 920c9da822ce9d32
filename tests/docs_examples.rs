//! Every console example in `README.md` and `docs/*.md` is run, and its output compared
//! with what the page shows (in the manner of trycmd, which cargo and clap use): a page
//! whose output no longer matches fails the tests, so the docs cannot drift.
//!
//! A ```` ```console ```` block holds commands and their output:
//! - a line `$ COMMAND` runs COMMAND with `sh -c`, with the `rolegate` built for the tests
//!   first on the `PATH`, in a scratch folder of the page's own where `data/` is the
//!   repository's (so a file one example writes is there for the next of the same page);
//! - the lines after it, up to the next `$ ` line, are the expected output (standard output
//!   and standard error as they were written), each compared whole, except that `[..]` in a line stands for any text, and a
//!   line `...` stands for any number of lines (none too);
//! - a last line `? N` gives the expected exit code (0 when absent).
//!
//! Blocks fenced as `sh` or `text` are not run: they are for what needs a server or a
//! person.

use std::path::{Path, PathBuf};

/// One command of a console block with what it must print and exit with.
#[derive(Debug, PartialEq)]
struct Example {
    /// Where it is: `FILE:LINE` of the `$` line.
    at: String,
    command: String,
    expected: Vec<String>,
    code: i32,
}

/// The console examples of `text` (the page `file`).
fn examples(file: &str, text: &str) -> Result<Vec<Example>, String> {
    let mut out = Vec::new();
    let mut in_console = false;
    let mut current: Option<Example> = None;
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        if !in_console {
            in_console = line.trim_start().starts_with("```console");
            continue;
        }
        if line.trim_start().starts_with("```") {
            in_console = false;
            out.extend(current.take());
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            out.extend(current.take());
            current = Some(Example { at, command: command.to_string(), expected: Vec::new(), code: 0 });
        } else if let Some(ex) = current.as_mut() {
            match line.strip_prefix("? ") {
                Some(code) => ex.code = code.trim().parse().map_err(|_| format!("{at}: `? N` wants a number"))?,
                None => ex.expected.push(line.to_string()),
            }
        } else if !line.trim().is_empty() {
            return Err(format!("{at}: output before any `$ ` command"));
        }
    }
    if in_console {
        return Err(format!("{file}: a console block is not closed"));
    }
    Ok(out)
}

/// True when `line` matches `pattern`, where `[..]` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// True when `lines` match `expected`, where a line `...` stands for any number of lines.
fn lines_match(expected: &[String], lines: &[&str]) -> bool {
    match expected.split_first() {
        None => lines.is_empty(),
        Some((first, rest)) if first == "..." => (0..=lines.len()).any(|skip| lines_match(rest, &lines[skip..])),
        Some((first, rest)) => {
            lines.split_first().is_some_and(|(l, more)| line_matches(first, l) && lines_match(rest, more))
        }
    }
}

/// Runs `ex` in `dir` and says how it differs from the page, if it does.
fn check(ex: &Example, dir: &Path) -> Result<(), String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_rolegate")).parent().map(Path::to_path_buf).unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .map_err(|e| e.to_string())?;
    // standard error joins standard output where it is written, as on a terminal
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("{{ {}\n}} 2>&1", ex.command)])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("ROLEGATE_BASE_URL")
        .env_remove("ROLEGATE_API_KEY")
        .output()
        .map_err(|e| format!("{}: {e}", ex.at))?;
    let text = [String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)].concat();
    let lines: Vec<&str> = text.lines().collect();
    let code = out.status.code().unwrap_or(-1);
    if code == ex.code && lines_match(&ex.expected, &lines) {
        return Ok(());
    }
    Err(format!(
        "{}: `{}` exited {code} (the page says {}) and printed:\n{text}\n--- the page shows:\n{}",
        ex.at,
        ex.command,
        ex.code,
        ex.expected.join("\n")
    ))
}

/// The pages with console examples: the README and every page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect()
        })
        .unwrap_or_default();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A fresh scratch folder `name` whose `data/` is the repository's.
fn scratch(name: &str) -> PathBuf {
    let dir = crate::util::temp_dir(name);
    #[cfg(unix)]
    std::os::unix::fs::symlink(Path::new(env!("CARGO_MANIFEST_DIR")).join("data"), dir.join("data")).unwrap();
    dir
}

#[test]
fn every_console_example_of_the_readme_and_the_docs_prints_what_the_page_shows() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        let dir = scratch(&format!("docs-{name}"));
        for ex in examples(&name, &text).unwrap() {
            ran += 1;
            if let Err(e) = check(&ex, &dir) {
                failures.push(e);
            }
        }
    }
    assert!(ran >= 3, "only {ran} console examples: the pages lost theirs");
    assert!(failures.is_empty(), "{} example(s) differ:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn an_example_whose_output_changed_is_reported_with_where_it_is() {
    let page = "intro\n```console\n$ rolegate suite --format jsonl data/scenarios.jsonl | head -2\n\
                {\"table\":\"single\",\"id\":\"s01\",\"status\":\"done\"[..]\n...\n```\n\
                ```console\n$ rolegate run --design nosuch 'a goal'\n...\n[..]nosuch[..]\n...\n? 2\n```\n";
    let ex = examples("page.md", page).unwrap();
    assert_eq!(ex.len(), 2);
    assert_eq!(
        (ex[0].at.as_str(), ex[1].code, ex[1].command.as_str()),
        ("page.md:3", 2, "rolegate run --design nosuch 'a goal'")
    );
    let dir = scratch("docs-examples-changed");
    assert_eq!(check(&ex[0], &dir), Ok(()));
    assert_eq!(check(&ex[1], &dir), Ok(()));
    // the same page after an output changed (the first row is no longer done): reported
    // with where the example is and what it printed
    let changed = page.replace("\"status\":\"done\"[..]", "\"status\":\"stopped\"[..]");
    let err = check(&examples("page.md", &changed).unwrap()[0], &dir).unwrap_err();
    assert!(
        err.starts_with("page.md:3: `rolegate suite --format jsonl data/scenarios.jsonl | head -2` exited 0"),
        "{err}"
    );
    // a wrong exit code is a difference too
    let mut wrong = examples("page.md", page).unwrap().remove(1);
    wrong.code = 0;
    assert!(check(&wrong, &dir).is_err());
    assert!(examples("p.md", "```console\nstray output\n```\n").unwrap_err().contains("before any `$ ` command"));
    assert!(examples("p.md", "```console\n$ rolegate suite\n").unwrap_err().contains("not closed"));
}

#[test]
fn wildcards_match_any_text_in_a_line_and_any_lines() {
    assert!(line_matches("a [..] c", "a b b c") && line_matches("[..]", "") && !line_matches("a [..] c", "a b d"));
    assert!(line_matches("x[..]y[..]z", "x1y2z") && !line_matches("x[..]y[..]z", "x1z"));
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&e(&["a", "...", "z"]), &["a", "b", "c", "z"]));
    assert!(lines_match(&e(&["a", "...", "z"]), &["a", "z"]));
    assert!(!lines_match(&e(&["a", "...", "z"]), &["a", "b"]));
    assert!(!lines_match(&e(&["a"]), &["a", "b"]));
}
