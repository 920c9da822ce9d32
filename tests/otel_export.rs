//! OpenTelemetry export: the binary's `--otlp` (and `OTEL_EXPORTER_OTLP_ENDPOINT`) sends
//! the spans of rows m01 and m06 over OTLP/HTTP to a loopback receiver this test starts,
//! which decodes the protobuf bodies with the `opentelemetry-proto` types: the span names,
//! the parent links (roles under the run, calls under the roles), the GenAI attributes, a
//! guardrail span for m06's refused send, and no e-mail address in clear anywhere. A
//! collector that cannot be reached, or that never answers, costs a warning, not the run.

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the receiver got: every request, decoded.
type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

/// Starts the receiver on loopback; returns its base URL and what it receives.
async fn receiver() -> (String, Received) {
    let got = Received::default();
    let keep = got.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let keep = keep.clone();
            async move {
                match ExportTraceServiceRequest::decode(body) {
                    Ok(req) => {
                        keep.lock().unwrap().push(req);
                        let answer = ExportTraceServiceResponse::default().encode_to_vec();
                        (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], answer)
                    }
                    Err(_) => (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "text/plain")], b"bad".to_vec()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, got)
}

/// One received span, flattened.
#[derive(Clone, Debug)]
struct Got {
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
    name: String,
    attrs: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| text(Some(v))).collect();
            format!("[{}]", items.join(","))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

fn spans(got: &Received) -> Vec<Got> {
    let mut out = Vec::new();
    for req in got.lock().unwrap().iter() {
        for rs in &req.resource_spans {
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    out.push(Got {
                        trace: s.trace_id.clone(),
                        id: s.span_id.clone(),
                        parent: s.parent_span_id.clone(),
                        name: s.name.clone(),
                        attrs: attrs(&s.attributes),
                        events: s.events.iter().map(|e| (e.name.clone(), attrs(&e.attributes))).collect(),
                    });
                }
            }
        }
    }
    out
}

fn service_names(got: &Received) -> Vec<String> {
    let mut names = Vec::new();
    for req in got.lock().unwrap().iter() {
        for rs in &req.resource_spans {
            let a = rs.resource.as_ref().map(|r| attrs(&r.attributes)).unwrap_or_default();
            names.push(a.get("service.name").cloned().unwrap_or_default());
        }
    }
    names
}

/// A rows file holding the bundled m01 and m06, in a folder of `test`'s own (the tests run
/// side by side).
fn rows_file(test: &str) -> std::path::PathBuf {
    let table = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/multi_scenarios.jsonl")).unwrap();
    let rows: Vec<&str> =
        table.lines().filter(|l| l.contains(r#""id": "m01""#) || l.contains(r#""id": "m06""#)).collect();
    assert_eq!(rows.len(), 2);
    let dir = crate::util::temp_dir(&format!("otel-{test}"));
    let path = dir.join("m01_m06.jsonl");
    std::fs::write(&path, rows.join("\n") + "\n").unwrap();
    path
}

async fn rolegate(args: Vec<String>, env: Vec<(&'static str, String)>) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rolegate"));
        cmd.args(&args);
        for var in ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"] {
            cmd.env_remove(var);
        }
        cmd.envs(env);
        cmd.output().unwrap()
    })
    .await
    .unwrap()
}

fn by_id(all: &[Got]) -> BTreeMap<Vec<u8>, &Got> {
    all.iter().map(|s| (s.id.clone(), s)).collect()
}

/// The spans of the run whose root has `run_id`, with the root first.
fn run_tree<'a>(all: &'a [Got], run_id: &str) -> (&'a Got, Vec<&'a Got>) {
    let roots: Vec<&Got> =
        all.iter().filter(|s| s.attrs.get("rolegate.run.id").map(String::as_str) == Some(run_id)).collect();
    assert_eq!(roots.len(), 1, "one root span for {run_id}: {roots:?}");
    let root = roots[0];
    assert!(root.parent.is_empty(), "the run span is a root");
    (root, all.iter().filter(|s| s.trace == root.trace && s.id != root.id).collect())
}

fn check_run(all: &[Got], run_id: &str) -> Vec<Got> {
    let ids = by_id(all);
    let (root, rest) = run_tree(all, run_id);
    assert_eq!(root.name, "run multi");
    assert_eq!(root.attrs["rolegate.run.reason"], "done");
    let roles: Vec<&&Got> = rest
        .iter()
        .filter(|s| s.attrs.get("gen_ai.operation.name").map(String::as_str) == Some("invoke_agent"))
        .collect();
    let mut names: Vec<&str> = roles.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["invoke_agent planner", "invoke_agent researcher", "invoke_agent reviewer"], "{run_id}");
    for r in &roles {
        assert_eq!(r.parent, root.id, "{} is a child of the run span", r.name);
        assert_eq!(r.name, format!("invoke_agent {}", r.attrs["gen_ai.agent.name"]));
    }
    let role_of = |s: &Got| -> String {
        let parent = ids.get(&s.parent).unwrap_or_else(|| panic!("{}: its parent arrived", s.name));
        assert_eq!(
            parent.attrs.get("gen_ai.operation.name").map(String::as_str),
            Some("invoke_agent"),
            "{} sits under a role span",
            s.name
        );
        assert_eq!(parent.trace, root.trace);
        parent.attrs["gen_ai.agent.name"].clone()
    };
    let chats: Vec<&&Got> = rest.iter().filter(|s| s.name.starts_with("chat ")).collect();
    let mut chat_roles: Vec<String> = chats.iter().map(|s| role_of(s)).collect();
    chat_roles.dedup();
    assert_eq!(chat_roles.first().map(String::as_str), Some("planner"));
    assert!(chat_roles.contains(&"researcher".to_string()) && chat_roles.contains(&"reviewer".to_string()));
    for c in &chats {
        assert_eq!(c.attrs["gen_ai.operation.name"], "chat");
        assert_eq!(c.name, format!("chat {}", c.attrs["gen_ai.request.model"]));
        let input: u64 = c.attrs["gen_ai.usage.input_tokens"].parse().unwrap();
        let output: u64 = c.attrs["gen_ai.usage.output_tokens"].parse().unwrap();
        assert!(input > 0 && output > 0, "{c:?}");
        assert!(["[stop]", "[tool_calls]"].contains(&c.attrs["gen_ai.response.finish_reasons"].as_str()), "{c:?}");
    }
    let tools: Vec<&&Got> = rest.iter().filter(|s| s.name.starts_with("execute_tool ")).collect();
    assert!(!tools.is_empty());
    for t in &tools {
        assert_eq!(t.attrs["gen_ai.operation.name"], "execute_tool");
        assert_eq!(t.name, format!("execute_tool {}", t.attrs["gen_ai.tool.name"]));
        assert!(t.attrs["gen_ai.tool.call.id"].starts_with(run_id), "{t:?}");
        let role = role_of(t);
        assert!(role == "researcher" || role == "reviewer", "{t:?}");
    }
    let researcher_tools: Vec<&str> =
        tools.iter().filter(|t| role_of(t) == "researcher").map(|t| t.attrs["gen_ai.tool.name"].as_str()).collect();
    assert!(
        researcher_tools.contains(&"get_ticket") && researcher_tools.contains(&"lookup_document"),
        "{researcher_tools:?}"
    );
    // the decision lines ride along as events of the role spans
    assert!(roles.iter().any(|r| !r.events.is_empty()));
    rest.iter()
        .filter(|s| s.name.starts_with("apply_guardrail"))
        .map(|s| {
            role_of(s);
            (*s).clone()
        })
        .collect()
}

fn assert_no_address(got: &Received) {
    let email = regex::Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+").unwrap();
    for req in got.lock().unwrap().iter() {
        let text = format!("{req:?}");
        assert!(!email.is_match(&text), "an e-mail address in clear: {:?}", email.find(&text));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m01_and_m06_arrive_as_span_trees_with_genai_attributes_a_guardrail_and_no_address() {
    let rows = rows_file("m01-m06");
    let (url, got) = receiver().await;
    let trace_json = rows.with_file_name("trace.jsonl");
    let args = vec![
        "--otlp".to_string(),
        url.clone(),
        "--trace-json".to_string(),
        trace_json.to_str().unwrap().to_string(),
        "suite".to_string(),
        rows.to_str().unwrap().to_string(),
    ];
    let out = rolegate(args, vec![]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "no warning: {}", String::from_utf8_lossy(&out.stderr));
    // what is printed does not change with the export on
    let plain = rolegate(vec!["suite".to_string(), rows.to_str().unwrap().to_string()], vec![]).await;
    assert_eq!(out.stdout, plain.stdout);
    // --trace-json beside it still writes every decision, in full
    let lines = std::fs::read_to_string(&trace_json).unwrap();
    assert!(lines.lines().count() > 10 && lines.contains("run-m06") && lines.contains("send_email_draft"));

    let all = spans(&got);
    assert_eq!(service_names(&got).first().map(String::as_str), Some("rolegate"));
    let m01_guards = check_run(&all, "run-m01");
    assert!(m01_guards.is_empty(), "m01 refused nothing: {m01_guards:?}");
    let m06_guards = check_run(&all, "run-m06");
    let ids = by_id(&all);
    let refused: Vec<(&str, &str, &str, &str)> = m06_guards
        .iter()
        .map(|g| {
            let role = ids[&g.parent].attrs["gen_ai.agent.name"].as_str();
            (
                role,
                g.attrs["gen_ai.tool.name"].as_str(),
                g.attrs["rolegate.code"].as_str(),
                g.attrs["gen_ai.guardian.name"].as_str(),
            )
        })
        .collect();
    assert_eq!(refused, [("reviewer", "send_email_draft", "not_allowed", "scope_check")]);
    let guard = &m06_guards[0];
    assert_eq!(guard.name, "apply_guardrail scope_check tool_call");
    assert_eq!(guard.attrs["gen_ai.operation.name"], "apply_guardrail");
    assert_eq!(guard.attrs["gen_ai.security.decision.type"], "deny");
    assert_eq!(guard.attrs["gen_ai.security.target.type"], "tool_call");
    // the decision lines ride along as events: the reviewer's refused call is one
    let reviewer = ids[&guard.parent];
    assert!(
        reviewer.events.iter().any(|(name, a)| name == "decision"
            && a.get("code").map(String::as_str) == Some("not_allowed")
            && a.get("detail").map(String::as_str) == Some("call send_email_draft")),
        "{reviewer:?}"
    );
    // the paraphrased payload asks for the customer list to go to the attacker's address:
    // it reached the exported events, redacted
    let (root, rest) = run_tree(&all, "run-m06");
    let texts: Vec<&String> =
        rest.iter().chain([&root]).flat_map(|s| s.events.iter().flat_map(|(_, a)| a.values())).collect();
    assert!(texts.iter().any(|t| t.contains("[email]")), "the address was there and is redacted");
    assert_no_address(&got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_variables_choose_the_collector_and_the_service_name() {
    let rows = rows_file("env");
    let (url, got) = receiver().await;
    let env = vec![("OTEL_EXPORTER_OTLP_ENDPOINT", url), ("OTEL_SERVICE_NAME", "rolegate-ci".to_string())];
    let out = rolegate(vec!["suite".to_string(), rows.to_str().unwrap().to_string()], env).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = spans(&got);
    check_run(&all, "run-m01");
    assert!(service_names(&got).iter().all(|n| n == "rolegate-ci"), "{:?}", service_names(&got));
    assert_no_address(&got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_agent_run_is_a_run_span_over_one_agent_span_with_its_calls() {
    let (url, got) = receiver().await;
    let args = ["--otlp", &url, "run", "--design", "single", "--model", "fake:obey", "Read T-602 and summarise it."];
    let out = rolegate(args.iter().map(ToString::to_string).collect(), vec![]).await;
    assert!(out.status.code().is_some(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = spans(&got);
    let roots: Vec<&Got> = all.iter().filter(|s| s.parent.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{all:?}");
    assert_eq!(roots[0].name, "run single");
    let agent: Vec<&Got> = all.iter().filter(|s| s.parent == roots[0].id).collect();
    assert_eq!(agent.len(), 1);
    assert_eq!(agent[0].attrs["gen_ai.operation.name"], "invoke_agent");
    let under: Vec<&str> = all.iter().filter(|s| s.parent == agent[0].id).map(|s| s.name.as_str()).collect();
    assert!(
        under.iter().any(|n| n.starts_with("chat ")) && under.iter().any(|n| n.starts_with("execute_tool ")),
        "{under:?}"
    );
    assert_no_address(&got);
}

/// A collector nobody listens on, and one that takes the connection and never answers:
/// the run ends as it would without the export, with a warning, within a bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_or_silent_collector_is_a_warning_within_a_bounded_time() {
    let rows = rows_file("unreachable");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
        // dropped: nothing listens there any more
    };
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = silent.accept().await {
            keep.lock().unwrap().push(sock);
        }
    });
    for url in [closed, silent_url] {
        let started = Instant::now();
        let args = vec!["--otlp".to_string(), url.clone(), "suite".to_string(), rows.to_str().unwrap().to_string()];
        let out = rolegate(args, vec![]).await;
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0), "{url}: {}", String::from_utf8_lossy(&out.stderr));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("warning: spans not exported to"), "{url}: {stderr}");
        // the export gives up after 10 s (the OTLP default); the flush is bounded at 15 s
        assert!(took < Duration::from_secs(40), "{url}: took {took:?}");
    }
}

/// Issue 31, item 4: a collector that answers 200 with an endless body is read up to a
/// bound (64 KiB), never into the command's memory: the run succeeds, the export fails
/// with a warning, and the command ends within the export's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_answering_an_endless_body_is_read_up_to_a_bound_and_the_run_succeeds() {
    let rows = rows_file("endless");
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = sent.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |_body: Bytes| {
            let count = count.clone();
            async move {
                // 1 MiB chunks for ever: the reply never ends
                let chunks = futures_stream(count);
                let body = axum::body::Body::from_stream(chunks);
                (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let started = Instant::now();
    let args = vec!["--otlp".to_string(), url.clone(), "suite".to_string(), rows.to_str().unwrap().to_string()];
    let out = rolegate(args, vec![]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: spans not exported to"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(40), "took {:?}", started.elapsed());
    // the reply was not read to the end: at most a few chunks went out before the client
    // stopped reading and dropped the connection
    let chunks = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(chunks < 1024, "{chunks} MiB sent: the reply was read without a bound");
}

/// An endless stream of 1 MiB chunks, counting those taken.
fn futures_stream(
    count: Arc<std::sync::atomic::AtomicU64>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::unfold(count, |count| async move {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some((Ok(vec![b'x'; 1 << 20]), count))
    })
}
