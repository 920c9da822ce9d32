//! One connection limit for the process: `--max-connections` bounds the model requests in
//! flight across every client made from one endpoint; the wait for a connection never
//! counts against an attempt's timeout, while the run's deadline still ends it.
//!
//! Time: real (unpaused) tokio time: the server is a real socket and its one slot takes
//! 40 ms per request (paused time would fire every timeout at once while the runtime waits
//! on the socket). The limits are chosen so the outcome does not depend on the machine's
//! speed: one at a time, each attempt waits only for its own 40 ms; thirty at once, the
//! last waits 30 × 40 ms = 1.2 s for the slot, over its 0.5 s timeout.

use rolegate::eval::{SingleRow, bundled_single, run_single_with};
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::http::{ConnectionLimit, Endpoint, ToolMode};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message, ModelError};
use std::time::Duration;
use tokio::task::JoinSet;

use crate::http_server::{Reply, Server};
use crate::util::env;

/// Thirty single rows: the bundled ones without simulated latency, in turn, renamed apart.
fn thirty_rows() -> Vec<SingleRow> {
    let rows: Vec<SingleRow> = bundled_single().unwrap().into_iter().filter(|r| r.slow_seconds.is_none()).collect();
    (0..30)
        .map(|i| {
            let mut row = rows[i % rows.len()].clone();
            row.id = format!("{}-{i}", row.id);
            row
        })
        .collect()
}

/// Runs thirty rows at once through `server` with `limit` connections and a 0.5 s
/// per-attempt timeout; returns (rows matching their expectation, requests the server saw).
async fn thirty_at_once(server: &Server, limit: usize) -> (usize, usize) {
    let mut ep = Endpoint::new(&server.base_url).unwrap();
    ep.tool_mode = ToolMode::Native;
    ep.timeout = Duration::from_millis(500);
    ep.retry.max_retries = 0;
    ep.connections = ConnectionLimit::new(limit).unwrap();
    let env = env();
    let mut set = JoinSet::new();
    for row in thirty_rows() {
        let http = ep.config(&format!("fake-{}", row.model)).unwrap().with_max_tokens(200).unwrap();
        let cfg = LabConfig { decider: DeciderSpec::Http(http), ..row.lab_config().unwrap() };
        let env = env.clone();
        set.spawn(async move { run_single_with(&row, &env, cfg).await.unwrap().matches });
    }
    let mut matching = 0;
    while let Some(m) = set.join_next().await {
        matching += usize::from(m.unwrap());
    }
    (matching, server.seen().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_rows_against_a_one_slot_server_with_one_connection_all_succeed() {
    let server = Server::start_one_slot(Reply::Fake, Duration::from_millis(40)).await;
    let (matching, requests) = thirty_at_once(&server, 1).await;
    assert_eq!(matching, 30, "every row ends as its fake does: no call timed out in the queue");
    assert!(requests >= 30, "{requests}");

    // the same rows with thirty connections: the queue moves to the server, where the
    // wait counts against each attempt's timeout, and rows fail
    let server = Server::start_one_slot(Reply::Fake, Duration::from_millis(40)).await;
    let (matching, _) = thirty_at_once(&server, 30).await;
    assert!(matching < 30, "without the limit some calls time out in the server's queue");
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "local-model".into(),
        messages: vec![Message::system("rules"), Message::user("<goal source=\"user-input\">Check T-601.</goal>")],
        tools: Vec::new(),
        max_tokens: 50,
    }
}

#[tokio::test]
async fn the_wait_for_a_connection_ends_at_the_run_deadline_and_sends_nothing() {
    let server = Server::start(vec![Reply::Hang], Some(Reply::Fake)).await;
    let mut ep = Endpoint::new(&server.base_url).unwrap();
    ep.timeout = Duration::from_secs(3600);
    ep.connections = ConnectionLimit::new(1).unwrap();
    let cfg = ep.config("local-model").unwrap();
    // the first call hangs at the server, holding the only connection
    let mut first = HttpClient::new(cfg.clone());
    let hanging = tokio::spawn(async move { first.complete(&request()).await });
    server.arrived(1).await;
    assert_eq!(ep.connections.in_flight(), 1);
    // the second waits for it until its run's deadline, long before its hour of timeout
    let mut second = HttpClient::new(cfg);
    second.set_deadline(Some(tokio::time::Instant::now() + Duration::from_millis(300)));
    let started = tokio::time::Instant::now();
    match second.complete(&request()).await {
        Err(ModelError::Failed { code, message, .. }) => {
            assert_eq!(code, "time_budget");
            assert!(message.contains("waiting for a connection"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(server.seen().len(), 1, "the waiting call sent nothing");
    hanging.abort();
    let _ = hanging.await;
    assert_eq!(ep.connections.in_flight(), 0, "an abandoned call gives its connection back");
}
