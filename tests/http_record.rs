//! Record and replay: `--cache DIR` records every model exchange as a JSON file and
//! reuses it without asking the server; `--replay DIR` answers from the recording with no
//! server at all, byte for byte as the recorded run; a missing exchange is `replay_miss`
//! and a tampered file `bad_recording`, never an answer.
//!
//! Time: real (unpaused) tokio time, as in `http_runs.rs`; nothing waits on a timer.

use rolegate::model::http::{Endpoint, RecordMode, Recording};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message, ModelError};
use serde_json::{Value, json};
use std::path::Path;

use crate::http_server::{Reply, Server, refused_base_url, tool_call};
use crate::util::temp_dir;

fn rolegate(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rolegate")).args(args).output().unwrap()
}

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut f: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    f.sort();
    f
}

#[tokio::test]
async fn a_recorded_suite_replayed_with_no_server_is_byte_identical() {
    let server = Server::start(Vec::new(), Some(Reply::Roles(rolegate::multi::Behaviours::default()))).await;
    let dir = temp_dir("recording");
    let rec = dir.join("rec");
    let (base, rec_s) = (server.base_url.clone(), rec.display().to_string());
    let suite = ["suite", "--format", "jsonl", "--model", "openai:fake-sensible", "--zero-price"];
    let recorded = tokio::task::spawn_blocking({
        let (base, rec_s) = (base.clone(), rec_s.clone());
        move || rolegate(&[&suite[..], &["--base-url", &base, "--cache", &rec_s]].concat())
    })
    .await
    .unwrap();
    assert!(matches!(recorded.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&recorded.stderr));
    let asked = server.seen().len();
    assert!(asked > 30, "{asked}");
    let recorded_files = files(&rec);
    assert!(!recorded_files.is_empty() && recorded_files.len() <= asked);
    for f in &recorded_files {
        let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(v["format"], "rolegate-exchange-1");
        assert_eq!(Some(v["key"].as_str().unwrap()), f.file_stem().and_then(|s| s.to_str()));
        assert!(v["request"]["messages"].is_array() && v["response"]["choices"].is_array());
    }

    // no server: no base URL at all, and the server this test runs sees nothing more
    let replayed = tokio::task::spawn_blocking({
        let rec_s = rec_s.clone();
        move || rolegate(&[&suite[..], &["--replay", &rec_s]].concat())
    })
    .await
    .unwrap();
    assert_eq!(replayed.stdout, recorded.stdout, "the replay prints exactly what the recorded run printed");
    assert_eq!(replayed.status.code(), recorded.status.code());
    assert!(!String::from_utf8_lossy(&replayed.stdout).contains("replay_miss"));
    // the cache reuses every exchange too: the server is not asked again
    let cached = tokio::task::spawn_blocking(move || {
        rolegate(&[&suite[..], &["--base-url", &base, "--cache", &rec_s]].concat())
    })
    .await
    .unwrap();
    assert_eq!(cached.stdout, recorded.stdout);
    assert_eq!(server.seen().len(), asked, "nothing was sent during the replay or the cached run");
    assert_eq!(files(&rec), recorded_files);
}

fn request(goal: &str) -> LlmRequest {
    LlmRequest {
        model: "local-model".into(),
        messages: vec![Message::system("rules"), Message::user(format!("<goal source=\"user-input\">{goal}</goal>"))],
        tools: Vec::new(),
        max_tokens: 50,
    }
}

fn code_of(r: Result<rolegate::model::LlmResponse, ModelError>) -> &'static str {
    match r {
        Err(ModelError::Failed { code, .. }) => code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_replay_miss_and_a_tampered_exchange_are_named_and_nothing_is_contacted() {
    let dir = temp_dir("replay-miss");
    // a replay of an empty recording, with a base URL where nothing listens
    let mut ep = Endpoint::new(&refused_base_url().await).unwrap();
    ep.recording = Some(Recording::new(dir.clone(), RecordMode::Replay).unwrap());
    let mut client = HttpClient::new(ep.config("local-model").unwrap());
    assert_eq!(code_of(client.complete(&request("Check T-601.")).await), "replay_miss");

    // record one exchange, then tamper with it
    let server =
        Server::start(vec![tool_call("finish", json!({"answer": "ok", "sources": ["o1"]}), Some((10, 2)))], None).await;
    let mut ep = Endpoint::new(&server.base_url).unwrap();
    ep.retry.max_retries = 0;
    ep.recording = Some(Recording::new(dir.clone(), RecordMode::Cache).unwrap());
    let mut client = HttpClient::new(ep.config("local-model").unwrap());
    let first = client.complete(&request("Check T-601.")).await.unwrap();
    assert_eq!(client.complete(&request("Check T-601.")).await.unwrap(), first, "the second is the recording");
    assert_eq!(server.seen().len(), 1);
    // another repetition is another exchange
    let mut again =
        HttpClient::new(rolegate::model::http::HttpConfig { repetition: 1, ..ep.config("local-model").unwrap() });
    assert_eq!(code_of(again.complete(&request("Check T-601.")).await), "server_error", "asked: script exhausted");
    assert_eq!(server.seen().len(), 2);

    let file = files(&dir).into_iter().next().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("Check T-601.", "Check T-602.")).unwrap();
    assert_eq!(code_of(client.complete(&request("Check T-601.")).await), "bad_recording");
    std::fs::write(&file, "garbage").unwrap();
    assert_eq!(code_of(client.complete(&request("Check T-601.")).await), "bad_recording");
    assert_eq!(server.seen().len(), 2, "a bad file is an error, not a reason to ask the server");

    // the binary: a replay miss ends the run with its code in the trace, exit 1
    let empty = temp_dir("replay-empty").display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        rolegate(&["run", "Check T-601.", "--model", "openai:local-model", "--zero-price", "--replay", &empty])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("replay_miss"), "{}", String::from_utf8_lossy(&out.stdout));
}
