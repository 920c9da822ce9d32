//! Three roles through HTTP against a loopback server: every m-row with each role asking
//! the server gives the fake row's run (outcome, envelopes, refusals, usage, traces); m01
//! from scripted answers records each role's usage and cost from the responses and shows
//! what each role sent; a role whose server fails ends the run with a named reason; a
//! cancelled run abandons a role's request in flight; the binary takes the model flags
//! for `run --design multi`, `suite` and `compare`.
//!
//! Time: real (unpaused) tokio time, as in `http_runs.rs`; nothing waits on a timer (the
//! failing servers are asked with retries off, timeouts are far away).

use rolegate::agent::TraceKind;
use rolegate::eval::{bundled_multi, run_multi, run_multi_with};
use rolegate::model::http::{Endpoint, ToolMode};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message, ModelError, prompts};
use rolegate::multi::{Behaviours, MultiEnv, MultiReason, MultiRun, ResearcherKind, Role, RoleSetup, start};
use rolegate::multi::{FAKE_PLANNER, FAKE_RESEARCHER, FAKE_REVIEWER};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::http_runs::http_env;
use crate::http_server::{Reply, Seen, Server, refused_base_url, text, tool_call};
use crate::util::{m01, menv, temp_dir};

/// The server's endpoint in `mode`, without retries.
fn endpoint(base_url: &str, mode: ToolMode) -> Endpoint {
    let mut ep = Endpoint::new(base_url).unwrap();
    ep.tool_mode = mode;
    ep.retry.max_retries = 0;
    ep
}

/// Every role asks the server, under the fake role models' names (so the prices match).
fn fake_named(server: &Server, mode: ToolMode) -> RoleSetup {
    let ep = endpoint(&server.base_url, mode);
    RoleSetup {
        behaviours: Behaviours::default(),
        planner: Some(ep.config(FAKE_PLANNER).unwrap()),
        researcher: Some(ep.config(FAKE_RESEARCHER).unwrap()),
        reviewer: Some(ep.config(FAKE_REVIEWER).unwrap()),
    }
}

fn system(s: &Seen) -> &str {
    s.body["messages"][0]["content"].as_str().unwrap()
}

fn user(s: &Seen) -> &str {
    s.body["messages"][1]["content"].as_str().unwrap()
}

fn tools(s: &Seen) -> Vec<&str> {
    s.body["tools"]
        .as_array()
        .map_or(Vec::new(), |t| t.iter().map(|f| f["function"]["name"].as_str().unwrap()).collect())
}

/// Every trace line as (role, step, kind, code, detail); a researcher's proposal is
/// logged as the model's text, and the fake writes its keys in another order than the
/// HTTP client's re-serialised tool call, so there only what was proposed is compared.
fn lines(run: &MultiRun) -> Vec<(Option<String>, u32, TraceKind, String, String)> {
    run.traces
        .iter()
        .flat_map(|t| {
            t.lines.iter().map(|l| {
                let proposal = t.role() == Some("researcher") && l.kind == TraceKind::Model;
                let detail = if proposal { String::new() } else { l.detail().to_string() };
                (t.role().map(str::to_string), l.step, l.kind, l.code.to_string(), detail)
            })
        })
        .collect()
}

#[tokio::test]
async fn every_multi_row_through_http_gives_the_fake_rows_run_in_both_modes() {
    let menv = menv();
    for mode in [ToolMode::Native, ToolMode::Text] {
        for row in bundled_multi().unwrap() {
            let (fake, _) = run_multi(&row, &menv).await.unwrap();
            let server = Server::start(Vec::new(), Some(Reply::Roles(row.roles))).await;
            let (run, out) = run_multi_with(&row, &menv, fake_named(&server, mode).models()).await.unwrap();
            assert!(out.matches, "{} {mode:?}: {:?}", row.id, out.mismatches);
            let without_traces = |r: &MultiRun| MultiRun { traces: Vec::new(), ..r.clone() };
            assert_eq!(without_traces(&run), without_traces(&fake), "{} {mode:?}: envelopes, usage, audit", row.id);
            assert_eq!(lines(&run), lines(&fake), "{} {mode:?}: every role's trace", row.id);
            assert_eq!(server.seen().len() as u64, run.usage.values().map(|u| u.calls).sum::<u64>(), "{}", row.id);
        }
    }
    // the injection row: the researcher's send is refused by its own loop, through HTTP
    let m07 = bundled_multi().unwrap().into_iter().find(|r| r.id == "m07").unwrap();
    assert_eq!(m07.roles.researcher, ResearcherKind::Obey);
    assert_eq!(m07.expect.denied, ["researcher:send_email_draft:not_allowed"]);
}

#[tokio::test]
async fn m01_from_scripted_answers_records_each_roles_usage_and_cost_from_the_responses() {
    let env = http_env();
    let menv = MultiEnv::new(&env).unwrap();
    let row = m01();
    let (fake, _) = run_multi(&row, &menv).await.unwrap();
    let [brief, finding, verdict] = [0, 1, 2].map(|i| fake.messages[i].body.to_text());
    let server = Server::start(
        vec![
            text(&brief, Some((310, 22))),
            tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((700, 21))),
            tool_call("lookup_document", json!({"doc_id": "kc-returns-v3"}), Some((900, 24))),
            tool_call("finish", json!({"answer": finding, "sources": ["o1", "o2"]}), Some((1100, 60))),
            text(&format!("```json\n{verdict}\n```"), Some((500, 15))),
        ],
        None,
    )
    .await;
    let setup = RoleSetup::http(&endpoint(&server.base_url, ToolMode::Native).config("local-model").unwrap());
    let (run, out) = run_multi_with(&row, &menv, setup.models()).await.unwrap();
    assert!(out.matches, "{:?}", out.mismatches);
    assert_eq!(run.messages, fake.messages, "the same three envelopes as the fake row");
    assert_eq!((run.role_calls, run.emails), (5, 0));

    // usage and cost per role, from the responses, priced from the table
    let price = env.prices.price("local-model").unwrap();
    let researcher_cost = price.cost(700, 21) + price.cost(900, 24) + price.cost(1100, 60);
    let usage: Vec<(Role, u64, u64, u64, Decimal)> =
        run.usage.iter().map(|(r, u)| (*r, u.calls, u.input_tokens, u.output_tokens, u.cost)).collect();
    assert_eq!(
        usage,
        [
            (Role::Planner, 1, 310, 22, price.cost(310, 22)),
            (Role::Researcher, 3, 2700, 105, researcher_cost),
            (Role::Reviewer, 1, 500, 15, price.cost(500, 15)),
        ]
    );
    assert_eq!(run.cost, price.cost(310, 22) + researcher_cost + price.cost(500, 15));
    assert_eq!(run.cost, Decimal::new(31_488, 6), "0.003008 + 0.02412 + 0.00436 credits");

    // what each role sent: its trusted prompt alone as the system message, its scope as
    // the tools, everything else as untrusted blocks
    let seen = server.seen();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|s| s.body["model"] == "local-model" && s.path == "/v1/chat/completions"));
    assert_eq!(system(&seen[0]), prompts::PLANNER);
    assert!(tools(&seen[0]).is_empty(), "the planner holds no tool, and is offered no function");
    assert!(seen[0].body.get("tool_choice").is_none());
    assert_eq!(user(&seen[0]), "<goal source=\"user-input\">Status of T-601 and our refund policy?</goal>\n");
    for s in &seen[1..4] {
        assert!(system(s).starts_with(prompts::RESEARCHER));
        assert_eq!(tools(s), ["get_ticket", "lookup_document", "finish"]);
        assert!(user(s).starts_with("<goal source=\"user-input\">Status of T-601 and our refund policy?</goal>"));
    }
    assert_eq!(system(&seen[4]), prompts::REVIEWER);
    assert_eq!(tools(&seen[4]), ["lookup_document", "finish"]);
    let review = user(&seen[4]);
    assert!(review.starts_with("<envelope source=\"coordinator:m2\" kind=\"finding\">{"), "{review}");
    assert!(review.contains("<observation source=\"tool:lookup_document:r1\" id=\"r1\" ok=\"true\">"), "{review}");
}

#[tokio::test]
async fn a_role_whose_server_fails_ends_the_run_with_a_named_reason() {
    let env = http_env();
    let menv = MultiEnv::new(&env).unwrap();
    let row = m01();
    let healthy = Server::start(Vec::new(), Some(Reply::Roles(Behaviours::default()))).await;
    let named = fake_named(&healthy, ToolMode::Native);
    let run_with = |setup: RoleSetup, id: &'static str| {
        let (menv, row) = (menv.clone(), row.clone());
        async move { rolegate::multi::run(&menv, row.config(), setup.models(), &row.goal, id).await.unwrap() }
    };

    // the planner's server answers 500
    let broken = Server::start(vec![Reply::Status(500, "{\"error\":\"boom\"}", None)], None).await;
    let planner = endpoint(&broken.base_url, ToolMode::Native).config("local-model").unwrap();
    let run = run_with(RoleSetup { planner: Some(planner), ..named.clone() }, "run-planner-down").await;
    // the researcher's server is not there at all
    let gone = endpoint(&refused_base_url().await, ToolMode::Native).config("local-model").unwrap();
    let run2 = run_with(RoleSetup { researcher: Some(gone), ..named.clone() }, "run-researcher-down").await;
    // the reviewer's server answers something that is not chat completions
    let garbled = Server::start(vec![Reply::Raw("<html>502 Bad Gateway</html>")], None).await;
    let reviewer = endpoint(&garbled.base_url, ToolMode::Native).config("local-model").unwrap();
    let run3 = run_with(RoleSetup { reviewer: Some(reviewer), ..named }, "run-reviewer-down").await;

    for (run, role, code, accepted) in [
        (&run, Role::Planner, "server_error", 0),
        (&run2, Role::Researcher, "connection_refused", 1),
        (&run3, Role::Reviewer, "malformed_json", 2),
    ] {
        assert_eq!(run.reason, MultiReason::RoleStopped, "{role}");
        assert_eq!(run.messages.len(), accepted, "{role}");
        let slot = Role::MODEL_ROLES.iter().position(|r| *r == role).unwrap() + 1;
        assert_eq!(run.traces[slot].codes(TraceKind::Model), [code], "{role}: the server's failure, named");
        let stopped = run.traces[0].lines.iter().find(|l| l.code == "role_stopped").unwrap();
        assert_eq!(stopped.detail(), format!("{role}: model_error"), "the coordinator names the role");
        assert_eq!(run.usage[&role].calls, 0, "{role}: a failed call is not paid");
        assert!(run.failed.is_none() && run.emails == 0);
    }
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
async fn cancelling_a_run_abandons_a_roles_request_in_flight_and_a_bound_client_stops_by_itself() {
    let env = http_env();
    let menv = MultiEnv::new(&env).unwrap();
    let row = m01();
    let b = Behaviours::default();
    let server =
        Server::start(vec![Reply::Roles(b), Reply::Roles(b), Reply::Roles(b), Reply::Roles(b)], Some(Reply::Hang))
            .await;
    let setup = fake_named(&server, ToolMode::Native);
    let handle = start(&menv, row.config(), setup.models(), &row.goal, "run-hang", CancellationToken::new()).unwrap();
    server.arrived(5).await; // the reviewer's request hangs
    handle.cancel();
    let run = handle.finish().await.unwrap();
    assert_eq!((run.reason, run.messages.len()), (MultiReason::Cancelled, 2));
    assert_eq!(run.traces[3].codes(TraceKind::Model), ["cancelled"], "the reviewer's call was abandoned");

    // the token a role binds its client to stops the client even when nobody races it
    let mut client: Box<dyn LlmClient> =
        Box::new(HttpClient::new(endpoint(&server.base_url, ToolMode::Native).config("local-model").unwrap()));
    let token = CancellationToken::new();
    client.bind_cancel(&token);
    let call = tokio::spawn(async move { client.complete_message(&request()).await });
    server.arrived(6).await;
    token.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err, ModelError::failed("cancelled", "model call abandoned"));
}

/// Runs the binary with `args`, `ROLEGATE_BASE_URL` pointing at `base`.
async fn rolegate(args: &[&str], base: &str) -> (Option<i32>, String, String) {
    let (args, base): (Vec<String>, String) = (args.iter().map(ToString::to_string).collect(), base.to_string());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
            .args(&args)
            .env("ROLEGATE_BASE_URL", base)
            .env_remove("ROLEGATE_API_KEY")
            .env_remove("ROLEGATE_TOOL_MODE")
            .env_remove("ROLEGATE_RETRIES")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), s(&out.stdout), s(&out.stderr))
}

#[tokio::test]
async fn the_binary_runs_the_roles_the_suite_and_compare_on_a_real_model() {
    let obey = Behaviours { researcher: ResearcherKind::Obey, ..Behaviours::default() };
    let goal = "Status of T-602 and our refund policy?";

    // run --design multi: every role on the model
    let server = Server::start(Vec::new(), Some(Reply::Roles(obey))).await;
    let (code, stdout, stderr) = rolegate(
        &["run", "--design", "multi", goal, "--model", "openai:local-model", "--zero-price"],
        &server.base_url,
    )
    .await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("denied   researcher:send_email_draft:not_allowed"), "{stdout}");
    assert!(stdout.contains("outcome: done | messages 3 | rejected 0 | denied 1 |"), "{stdout}");
    assert!(stdout.contains("usage    reviewer: calls 1 | input tokens "), "{stdout}");
    assert!(server.seen().iter().all(|s| s.body["model"] == "local-model"));
    let roles: Vec<bool> = [prompts::PLANNER, prompts::RESEARCHER, prompts::REVIEWER]
        .iter()
        .map(|p| server.seen().iter().any(|s| system(s).starts_with(p)))
        .collect();
    assert_eq!(roles, [true, true, true], "every role asked the server");

    // only the researcher on the model; the others keep their fakes
    let server = Server::start(Vec::new(), Some(Reply::Roles(obey))).await;
    let args = ["run", "--design", "multi", goal, "--researcher-model", "openai:local-model", "--zero-price"];
    let (code, stdout, _) = rolegate(&args, &server.base_url).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("outcome: done"), "{stdout}");
    assert!(server.seen().iter().all(|s| system(s).starts_with(prompts::RESEARCHER)), "only the researcher asked");
    assert_eq!(server.seen().len(), 4, "obey: the ticket, the refused send, the policy, the finish");

    // a single-agent fake has no role form
    let (code, _, stderr) =
        rolegate(&["run", "--design", "multi", goal, "--model", "fake:obey"], &server.base_url).await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("fake:obey is a single-agent fake"), "{stderr}");

    // suite --model: a multi row's role behaviours are replaced by the model
    let dir = temp_dir("http-multi-suite");
    let file = dir.join("m07.jsonl");
    let m07 = rolegate::eval::BUNDLED_MULTI.lines().find(|l| l.contains("\"m07\"")).unwrap();
    std::fs::write(&file, m07).unwrap();
    let server = Server::start(Vec::new(), Some(Reply::Roles(obey))).await;
    let path = file.display().to_string();
    let (code, stdout, stderr) =
        rolegate(&["suite", &path, "--model", "openai:local-model", "--zero-price"], &server.base_url).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("m07   done"), "{stdout}");
    assert!(stdout.contains("denied=[researcher:send_email_draft:not_allowed] emails=0 matches"), "{stdout}");
    assert_eq!(server.seen().len(), 6, "planner 1, researcher 4, reviewer 1: all through HTTP");

    // compare --model: every model-driven design asks the model; the roles' rows from runs
    let server = Server::start(Vec::new(), Some(Reply::Roles(Behaviours::default()))).await;
    let args = ["compare", "--model", "openai:local-model", "--zero-price", "--format", "json"];
    let (code, stdout, stderr) = rolegate(&args, &server.base_url).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let multi: Vec<(&str, &str)> = report["designs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["design"] == "multi")
        .map(|r| (r["task"].as_str().unwrap(), r["code"].as_str().unwrap()))
        .collect();
    assert_eq!(multi, [("t1", "done"), ("t2", "done"), ("t3", "done"), ("t4", "done")]);
    assert_eq!(report["single_versus_roles"]["multi"]["reason"], "done");
    assert_eq!(report["policypal"]["median_steps"][0][0], "local-model");
    let seen = server.seen();
    assert!(seen.iter().all(|s| s.body["model"] == "local-model"));
    for (name, prompt) in prompts::ALL {
        assert!(seen.iter().any(|s| system(s).starts_with(prompt)), "{name}: no request carried its prompt");
    }
}
