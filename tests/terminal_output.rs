//! Untrusted text never reaches a terminal live (issue 31, item 5): the same hostile text
//! (cursor moves, erase line, a window title, an OSC 52 clipboard write, a C1 control, a
//! bidirectional override, tag characters) handed to every printing path of the binary
//! comes out with each such character written as a visible escape.

use std::path::Path;

use crate::http_server::{Server, tool_call};
use crate::util::temp_dir;

const CONTROLS: &str = "T-601 is open.\u{1b}[1A\u{1b}[2K\u{1b}]0;owned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m";
/// The same with characters that render as nothing (a finish answer holding those is not
/// given at all: `unsupported_finish`, see `hidden_text`).
const HOSTILE: &str =
    "T-601 is open.\u{1b}[1A\u{1b}[2K\u{1b}]0;owned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m\u{202e}\u{e0041}";

/// No byte or character of `text` a terminal would act on or hide.
fn safe(text: &str) -> bool {
    !text
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || rolegate::security::is_hidden(c) || c == '\u{202e}')
}

fn rolegate(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rolegate")).current_dir(dir).args(args).output().unwrap()
}

fn both(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_printing_path_escapes_the_same_hostile_text() {
    let dir = temp_dir("terminal-output");
    // a model's answer (the answer line) and its proposal text (the trace)
    let server = Server::start(
        vec![
            tool_call("get_ticket", serde_json::json!({"ticket_id": "T-601"}), None),
            tool_call("finish", serde_json::json!({"answer": CONTROLS, "sources": ["o1"]}), None),
        ],
        None,
    )
    .await;
    let (d, base) = (dir.clone(), server.base_url.clone());
    let run = tokio::task::spawn_blocking(move || {
        rolegate(
            &d,
            &["run", "What is the status of T-601?", "--model", "openai:m", "--zero-price", "--base-url", &base],
        )
    })
    .await
    .unwrap();
    let text = both(&run);
    assert!(text.contains("answer (agent output, shown as data)"), "{text}");
    assert!(text.contains("\\u{1b}]52;c;"), "the clipboard write is shown, escaped: {text}");
    assert!(safe(&text), "{text:?}");

    // a results file's table lines, printed by merge
    let out = dir.join("rows.jsonl");
    let s = out.display().to_string();
    let made = rolegate(&dir, &["suite", "--repeat", "1", "--out", &s]);
    assert!(matches!(made.status.code(), Some(0 | 1)), "{}", both(&made));
    let file = std::fs::read_to_string(&out).unwrap();
    let mut lines: Vec<String> = file.lines().map(str::to_string).collect();
    let mut cell: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    let line = cell["result"]["table_line"].as_str().unwrap().to_string();
    cell["result"]["table_line"] = serde_json::Value::String(format!("{line}{HOSTILE}"));
    lines[1] = cell.to_string();
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    let merged = rolegate(&dir, &["merge", &s]);
    let text = both(&merged);
    assert!(text.contains("\\u{1b}[2K"), "the erase-line sequence is shown, escaped: {text}");
    assert!(safe(&text), "{text:?}");

    // an error that quotes the input
    let refused = rolegate(&dir, &["run", "--task", HOSTILE, "Check T-601."]);
    assert_eq!(refused.status.code(), Some(2));
    let text = both(&refused);
    assert!(text.contains("is not a task"), "{text}");
    assert!(safe(&text), "{text:?}");
}
