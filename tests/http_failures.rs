//! Every way a server can fail gives a named code in the trace and a clean stop, never a
//! panic; 429 and 5xx are retried (honouring `Retry-After`); a hanging request or a
//! backoff is abandoned when the run is cancelled.
//!
//! Time: the backoff sleeper is injected (it records the waits and returns at once, or
//! never returns), so no test sleeps between retries. Tests use real tokio time, not
//! `start_paused`: paused time auto-advances while the runtime waits on a socket, which
//! would fire every timeout at once. Per-call timeouts are therefore an hour (never
//! reached), except in the one test whose point is the timeout: a server that never
//! answers and a 300 ms timeout.

use rolegate::BoxFuture;
use rolegate::Run;
use rolegate::agent::ModelDecider;
use rolegate::agent::{StopReason, TraceKind};
use rolegate::lab::{Lab, LabConfig};
use rolegate::model::http::{HttpCode, HttpConfig, Sleeper};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message, ModelError};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http_runs::{http_cfg, http_env};
use crate::http_server::{Reply, Server, refused_base_url, text, tool_call};
use rolegate::model::http::{Endpoint, ToolMode};

/// Records every wait and returns at once.
#[derive(Clone, Debug, Default)]
struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Recorder {
    fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleeper for Recorder {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(duration);
        Box::pin(std::future::ready(()))
    }
}

/// A backoff that never ends.
#[derive(Debug)]
struct Forever;

impl Sleeper for Forever {
    fn sleep(&self, _: Duration) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }
}

const HOUR: Duration = Duration::from_secs(3600);

fn cfg(server: &Server) -> HttpConfig {
    let mut c = http_cfg(server, "local-model", ToolMode::Native);
    c.endpoint.timeout = HOUR;
    // these tests assert exact waits (tests/hardening_limits.rs covers the jitter)
    c.endpoint.retry.jitter = rolegate::model::http::Jitter::Off;
    c
}

/// A triage lab whose decider is `client`.
fn lab_with_client(client: HttpClient) -> Lab {
    let mut lab = LabConfig::default().build(&http_env());
    lab.agent.replace_decider(Box::new(ModelDecider::new(client)));
    lab
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "local-model".into(),
        messages: vec![Message::system("rules"), Message::user("<goal source=\"user-input\">Check T-601.</goal>")],
        tools: Vec::new(),
        max_tokens: 50,
    }
}

fn stopped_with(run: &Run, code: &str) {
    assert_eq!(run.reason(), StopReason::ModelError, "{code}");
    assert_eq!(run.state.status().name(), "stopped", "{code}");
    assert_eq!(run.trace().codes(TraceKind::Model), [code]);
    assert_eq!(run.trace().codes(TraceKind::Stop), ["model_error"]);
    assert_eq!(run.state.step(), 1, "{code}: stopped within the first step");
    assert!(run.calls().is_empty(), "{code}: no tool ran");
}

/// The run's paid calls: one for an answer a model worked on (a chat-completions answer
/// with a choice or a usage block, however unusable), none for a failure without one.
fn billed(run: &Run, code: HttpCode, paid: u64) {
    assert_eq!(run.ledger().summary().calls, paid, "{code}: billed only when the server answered");
}

#[tokio::test]
async fn every_server_failure_stops_the_run_cleanly_with_its_code() {
    let bad_args = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_ticket","arguments":"{\"ticket_id\": \"T-60"}}]}}]}"#;
    let cases: Vec<(Vec<Reply>, HttpCode, u64)> = vec![
        (vec![Reply::Status(500, "boom", None); 3], HttpCode::ServerError, 0),
        (vec![Reply::Raw("<html>Bad gateway</html>")], HttpCode::MalformedJson, 0),
        (vec![Reply::Raw(r#"{"object":"chat.completion","choices":[]}"#)], HttpCode::MalformedJson, 0),
        (vec![Reply::Raw(r#"{"error":{"message":"model is loading"}}"#)], HttpCode::MalformedJson, 0),
        (vec![text("", Some((10, 0)))], HttpCode::EmptyReply, 1),
        (
            vec![Reply::Raw(r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}]}"#)],
            HttpCode::EmptyReply,
            1,
        ),
        (vec![Reply::Raw(bad_args)], HttpCode::InvalidToolArguments, 1),
        (vec![tool_call("get_ticket", json!(["T-601"]), None)], HttpCode::InvalidToolArguments, 1),
        (vec![Reply::Status(401, "{\"error\":\"invalid api key\"}", None)], HttpCode::Unauthorized, 0),
        (vec![Reply::Status(404, "{\"error\":\"model not found\"}", None)], HttpCode::NotFound, 0),
        (vec![Reply::Status(400, "{\"error\":\"bad request\"}", None)], HttpCode::ClientError, 0),
    ];
    for (script, code, paid) in cases {
        let attempts = script.len();
        let server = Server::start(script, None).await;
        let waits = Recorder::default();
        let mut lab = lab_with_client(HttpClient::new(cfg(&server)).with_sleeper(Arc::new(waits.clone())));
        let run = lab.agent.run("What is the status of T-601?", "run-1").await.unwrap();
        stopped_with(&run, code.as_str());
        billed(&run, code, paid);
        assert_eq!(server.seen().len(), attempts, "{code}");
        let expected_waits = if code == HttpCode::ServerError {
            vec![Duration::from_millis(500), Duration::from_secs(1)]
        } else {
            vec![]
        };
        assert_eq!(waits.waits(), expected_waits, "{code}: only 429 and 5xx are retried");
    }
}

#[tokio::test]
async fn connection_refused_is_named_and_not_retried() {
    let ep = Endpoint::new(&refused_base_url().await).unwrap();
    let waits = Recorder::default();
    let mut lab =
        lab_with_client(HttpClient::new(ep.config("local-model").unwrap()).with_sleeper(Arc::new(waits.clone())));
    let run = lab.agent.run("What is the status of T-601?", "run-1").await.unwrap();
    stopped_with(&run, "connection_refused");
    billed(&run, HttpCode::ConnectionRefused, 0);
    assert!(waits.waits().is_empty());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_with_its_code() {
    // the only real wait in these tests: the timeout is what is under test
    let server = Server::start(vec![Reply::Hang], None).await;
    let mut c = cfg(&server);
    c.endpoint.timeout = Duration::from_millis(300);
    let mut lab = lab_with_client(HttpClient::new(c).with_sleeper(Arc::new(Recorder::default())));
    let run = lab.agent.run("What is the status of T-601?", "run-1").await.unwrap();
    stopped_with(&run, "timeout");
    billed(&run, HttpCode::Timeout, 0);
    assert_eq!(server.seen().len(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_the_server_asks_for() {
    let ok = tool_call("finish", json!({"answer": "a", "sources": ["o1"]}), Some((30, 5)));
    let server = Server::start(
        vec![Reply::Status(429, "slow down", Some("3")), Reply::Status(503, "busy", None), ok.clone()],
        None,
    )
    .await;
    let waits = Recorder::default();
    let mut client = HttpClient::new(cfg(&server)).with_sleeper(Arc::new(waits.clone()));
    let reply = client.complete(&request()).await.unwrap();
    assert_eq!(reply.text, r#"{"action":"finish","answer":"a","sources":["o1"]}"#);
    assert_eq!(reply.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((30, 5)));
    assert_eq!(server.seen().len(), 3);
    assert_eq!(waits.waits(), [Duration::from_secs(3), Duration::from_secs(1)], "Retry-After, then the backoff");

    // a date in Retry-After falls back to the backoff
    let server =
        Server::start(vec![Reply::Status(429, "", Some("Wed, 21 Oct 2015 07:28:00 GMT")), ok.clone()], None).await;
    let waits = Recorder::default();
    let mut client = HttpClient::new(cfg(&server)).with_sleeper(Arc::new(waits.clone()));
    assert!(client.complete(&request()).await.is_ok());
    assert_eq!(waits.waits(), [Duration::from_millis(500)]);

    // a wait longer than allowed ends the call at once
    let server = Server::start(vec![Reply::Status(429, "", Some("600")), ok.clone()], None).await;
    let waits = Recorder::default();
    let mut client = HttpClient::new(cfg(&server)).with_sleeper(Arc::new(waits.clone()));
    match client.complete(&request()).await {
        Err(ModelError::Failed { code, message, .. }) => {
            assert_eq!(code, "rate_limited");
            assert!(message.contains("Retry-After 600s"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((server.seen().len(), waits.waits().len()), (1, 0));

    // and retries are bounded
    let server = Server::start(vec![Reply::Status(429, "", Some("1")); 3], Some(ok)).await;
    let waits = Recorder::default();
    let mut client = HttpClient::new(cfg(&server)).with_sleeper(Arc::new(waits.clone()));
    match client.complete(&request()).await {
        Err(ModelError::Failed { code, message, .. }) => {
            assert_eq!(code, "rate_limited");
            assert!(message.contains("after 2 retries"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((server.seen().len(), waits.waits().len()), (3, 2));
}

#[tokio::test]
async fn a_hanging_request_is_abandoned_within_the_step_when_the_run_is_cancelled() {
    let server = Server::start(vec![Reply::Hang], None).await;
    let mut lab = lab_with_client(HttpClient::new(cfg(&server)));
    let cancel = lab.agent.cancel_token().clone();
    let task = tokio::spawn(async move { lab.agent.run("What is the status of T-601?", "run-1").await });
    server.arrived(1).await;
    cancel.cancel();
    let run = tokio::time::timeout(Duration::from_secs(10), task).await.expect("the run ends").unwrap().unwrap();
    assert_eq!(run.reason(), StopReason::Cancelled);
    assert_eq!(run.state.step(), 1, "within the step of the hanging call");
    assert_eq!(run.trace().codes(TraceKind::Model), ["cancelled"]);
    assert!(run.calls().is_empty());
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn cancellation_also_stops_the_backoff_between_retries() {
    // through the run's token: the loop drops the call, retries and all
    let server = Server::start(Vec::new(), Some(Reply::Status(503, "busy", None))).await;
    let mut lab = lab_with_client(HttpClient::new(cfg(&server)).with_sleeper(Arc::new(Forever)));
    let cancel = lab.agent.cancel_token().clone();
    let task = tokio::spawn(async move { lab.agent.run("What is the status of T-601?", "run-1").await });
    server.arrived(1).await;
    cancel.cancel();
    let run = tokio::time::timeout(Duration::from_secs(10), task).await.expect("the run ends").unwrap().unwrap();
    assert_eq!(run.reason(), StopReason::Cancelled);
    assert_eq!(server.seen().len(), 1, "no retry after the cancel");

    // through the client's own token (how a role actor with a child token uses it)
    let token = tokio_util::sync::CancellationToken::new();
    let mut client = HttpClient::new(cfg(&server)).with_sleeper(Arc::new(Forever)).with_cancel(token.clone());
    let task = tokio::spawn(async move { client.complete(&request()).await });
    server.arrived(2).await;
    token.cancel();
    let result = tokio::time::timeout(Duration::from_secs(10), task).await.expect("the call ends").unwrap();
    assert!(matches!(result, Err(ModelError::Failed { code: "cancelled", .. })), "{result:?}");
    assert_eq!(server.seen().len(), 2);
}
