//! Every call a server answered is counted and priced, whatever became of its answer: cut
//! off at `max_tokens` (`finish_reason: length`), withheld (`content_filter`) or
//! unreadable, in every design and every role; `role calls` then equals the roles' paid
//! calls. A role that stops a three-role run has its cause printed; every design's trace
//! ends with one `stop` line; the compare tables keep their columns under their headers.
//!
//! Time: real (unpaused) tokio time against loopback servers, as in `http_runs.rs`; no
//! retry happens and no timer is waited on.

use rolegate::agent::TraceKind;
use rolegate::cost::Summary;
use rolegate::design::{Design, DesignCode, DesignConfig, DesignOutcome, run_design};
use rolegate::eval::{DESIGN_ROW_HEADER, DesignRow, PAL_ROW_HEADER, PalRow};
use rolegate::model::http::{Endpoint, HttpConfig, ToolMode};
use rolegate::multi::{Behaviours, MultiReason, PlannerKind, Role, RoleSetup};
use rust_decimal::Decimal;
use serde_json::json;

use crate::http_runs::http_env;
use crate::http_server::{Reply, Server, answer, refused_base_url, text, tool_call};

const GOAL: &str = "Status of T-601 and our refund policy?";

/// A reply the server cut at `max_tokens`, with its usage.
fn cut(usage: (u64, u64)) -> Reply {
    let mut v = answer(json!({"role": "assistant", "content": "{\"action\":\"call\",\"tool\":\"get_"}), Some(usage));
    v["choices"][0]["finish_reason"] = json!("length");
    Reply::Json(v)
}

/// A reply the server withheld (`content_filter`), with its usage.
fn withheld(usage: (u64, u64)) -> Reply {
    let mut v = answer(json!({"role": "assistant", "content": ""}), Some(usage));
    v["choices"][0]["finish_reason"] = json!("content_filter");
    Reply::Json(v)
}

/// `local-model` at `server`, native tools, no retries.
fn config(server: &Server) -> HttpConfig {
    let mut ep = Endpoint::new(&server.base_url).unwrap();
    ep.tool_mode = ToolMode::Native;
    ep.retry.max_retries = 0;
    ep.config("local-model").unwrap()
}

/// Runs `design` on `GOAL` with every model (the design's, or every role's) at `server`.
async fn run_on(design: Design, server: &Server) -> DesignOutcome {
    let cfg = DesignConfig {
        model: Some(config(server)),
        roles: RoleSetup::http(&config(server)),
        ..DesignConfig::default()
    };
    run_design(design, GOAL, &http_env(), &cfg).await.unwrap()
}

fn paid(calls: u64, input: u64, output: u64) -> Summary {
    let price = http_env().prices.price("local-model").unwrap();
    let one = price.cost(input, output);
    Summary { calls, input_tokens: input * calls, output_tokens: output * calls, cost: one * Decimal::from(calls) }
}

#[tokio::test]
async fn every_design_counts_and_prices_the_calls_its_server_cut_off_or_withheld() {
    for design in [Design::React, Design::Plan, Design::PolicyPal, Design::Multi] {
        for reply in [cut((300, 16)), withheld((280, 4))] {
            let server = Server::start(Vec::new(), Some(reply.clone())).await;
            let out = run_on(design, &server).await;
            let asked = server.seen().len() as u64;
            assert!(asked >= 1, "{design}: the server was asked");
            let (input, output) = if matches!(reply, Reply::Json(ref v) if v["choices"][0]["finish_reason"] == "length")
            {
                (300, 16)
            } else {
                (280, 4)
            };
            assert!(!out.code.is_done(), "{design}: {:?}", out.code);
            assert_eq!(out.usage(), paid(asked, input, output), "{design} {:?}: every answered call is paid", out.code);
            if let Some(run) = &out.multi {
                let per_role: u64 = run.usage.values().map(|u| u.calls).sum();
                assert_eq!(u64::from(run.role_calls), per_role, "role calls are the roles' paid calls");
                assert_eq!(run.cost, out.credits, "the cost budget saw the spend");
            }
        }
    }
}

#[tokio::test]
async fn an_unreadable_answer_is_counted_and_a_page_that_is_no_answer_is_not() {
    // chat-completions JSON the client cannot read (no message): the server's usage
    let no_message =
        r#"{"choices":[{"index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":9}}"#;
    // a message whose content is neither text nor parts, and no usage: estimated
    let odd = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":7},"finish_reason":"stop"}]}"#;
    // a proxy's page: no model is known to have worked on it
    let page = "<html>502 Bad Gateway</html>";
    for (body, paid) in [(no_message, Some((250, 9))), (odd, None), (page, None)] {
        let server = Server::start(Vec::new(), Some(Reply::Raw(body))).await;
        let out = run_on(Design::React, &server).await;
        assert_eq!(out.code, DesignCode::Run(rolegate::agent::StopReason::ModelError), "{body}");
        assert_eq!(out.trace.codes(TraceKind::Model), ["malformed_json"], "{body}");
        match paid {
            Some((input, output)) => assert_eq!(out.usage(), self::paid(1, input, output), "{body}"),
            None if body == odd => {
                assert_eq!(out.model_calls, 1, "the server answered: one paid call");
                assert!(out.input_tokens > 0 && out.credits > Decimal::ZERO, "estimated: {:?}", out.usage());
            }
            None => assert_eq!(out.usage(), Summary::default(), "{body}"),
        }
    }
}

/// The m01 script up to the role that is cut off (the planner's brief, the researcher's
/// ticket read, its policy read and finish), then that role's call cut at `max_tokens`.
async fn cut_at(role: Role) -> rolegate::multi::MultiRun {
    let fake = run_design(Design::Multi, GOAL, &http_env(), &DesignConfig::default()).await.unwrap();
    let fake = fake.multi.unwrap();
    let [brief, finding] = [0, 1].map(|i| fake.messages[i].body.to_text());
    let script = match role {
        Role::Planner => vec![cut((400, 16))],
        Role::Researcher => vec![
            text(&brief, Some((310, 22))),
            tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((700, 21))),
            cut((400, 16)),
        ],
        _ => vec![
            text(&brief, Some((310, 22))),
            tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((700, 21))),
            tool_call("lookup_document", json!({"doc_id": "kc-returns-v3"}), Some((900, 24))),
            tool_call("finish", json!({"answer": finding, "sources": ["o1", "o2"]}), Some((1100, 60))),
            cut((400, 16)),
        ],
    };
    let asked = script.len();
    let server = Server::start(script, None).await;
    let out = run_on(Design::Multi, &server).await;
    assert_eq!(server.seen().len(), asked, "{role}: every scripted answer was asked for");
    *out.multi.unwrap()
}

#[tokio::test]
async fn a_role_cut_off_in_a_three_role_run_is_paid_and_role_calls_agree_with_the_roles_usage() {
    let price = http_env().prices.price("local-model").unwrap();
    for role in [Role::Planner, Role::Researcher, Role::Reviewer] {
        let run = cut_at(role).await;
        assert_eq!(run.reason, MultiReason::RoleStopped, "{role}");
        let u = &run.usage[&role];
        let before = match role {
            Role::Planner => (0, 0, 0),
            Role::Researcher => (1, 700, 21),
            _ => (0, 0, 0),
        };
        assert_eq!(
            (u.calls, u.input_tokens, u.output_tokens),
            (before.0 + 1, before.1 + 400, before.2 + 16),
            "{role}: the cut-off call is counted"
        );
        let per_role: u64 = run.usage.values().map(|u| u.calls).sum();
        assert_eq!(u64::from(run.role_calls), per_role, "{role}: role calls equal the roles' paid calls");
        let spent = run.usage.values().fold(Decimal::ZERO, |s, u| s + u.cost);
        assert_eq!(run.cost, spent, "{role}: the run's cost (its budget's view) is every role's");
        assert!(u.cost >= price.cost(400, 16), "{role}: priced");
    }
}

/// Runs the binary with `args` against `base`; (exit code, stdout, stderr).
async fn rolegate(args: &[&str], base: &str) -> (Option<i32>, String, String) {
    let (args, base): (Vec<String>, String) = (args.iter().map(ToString::to_string).collect(), base.to_string());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
            .args(&args)
            .args(["--base-url", &base, "--zero-price", "--retries", "0"])
            .env_remove("ROLEGATE_API_KEY")
            .env_remove("ROLEGATE_TOOL_MODE")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), s(&out.stdout), s(&out.stderr))
}

#[tokio::test]
async fn the_binary_prints_a_cut_off_calls_usage_and_the_cause_of_a_stopped_role() {
    // the reported case: one call cut at 16 tokens was `calls 0`
    let server = Server::start(Vec::new(), Some(cut((300, 16)))).await;
    let (code, stdout, _) = rolegate(&["run", "--model", "openai:m", "Status of T-601?"], &server.base_url).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("usage    agent: calls 1 | input tokens 300 | output tokens 16 | credits 0\n"), "{stdout}");

    // multi: the role, the code and its hint on stdout, not only in --trace-json
    let multi = ["run", "--design", "multi", "--model", "openai:m", GOAL];
    let server =
        Server::start(vec![text(r#"{"kind":"brief","question":"Status of T-601?"}"#, None)], Some(cut((300, 16))))
            .await;
    let (code, stdout, _) = rolegate(&multi, &server.base_url).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("stop     role_stopped researcher: model_error\n"), "{stdout}");
    assert!(
        stdout.contains(
            "stopped role: researcher model_error (truncated: the server stopped the reply at max_tokens \
             (finish_reason length): raise --max-tokens)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("usage    researcher: calls 1 | input tokens 300 | output tokens 16 | credits 0\n"),
        "{stdout}"
    );

    let server = Server::start(Vec::new(), Some(Reply::Status(503, "overloaded", None))).await;
    let (_, stdout, _) = rolegate(&multi, &server.base_url).await;
    assert!(stdout.contains("stopped role: planner model_error (server_error: HTTP 503: overloaded"), "{stdout}");

    let (_, stdout, _) = rolegate(&multi, &refused_base_url().await).await;
    assert!(stdout.contains("stopped role: planner model_error (connection_refused: "), "{stdout}");
}

/// The last line of a design's trace is its one `stop` line.
fn ends_with_one_stop(design: Design, out: &DesignOutcome) {
    let lines = &out.trace.lines;
    assert_eq!(
        lines.last().map(|l| l.kind),
        Some(TraceKind::Stop),
        "{design} {:?}: {:#?}",
        out.code,
        out.trace.lines()
    );
    assert_eq!(lines.iter().filter(|l| l.kind == TraceKind::Stop).count(), 1, "{design}: {:#?}", out.trace.lines());
}

#[tokio::test]
async fn every_designs_trace_ends_with_one_stop_line_when_it_succeeds_and_when_it_fails() {
    let env = http_env();
    for design in [Design::Fixed, Design::Plan, Design::React, Design::PolicyPal, Design::Multi] {
        let out = run_design(design, GOAL, &env, &DesignConfig::default()).await.unwrap();
        assert!(out.code.is_done() || design == Design::Fixed, "{design}: {:?}", out.code);
        ends_with_one_stop(design, &out);
    }
    // failures on fakes: no route, a plan refused (unreadable, then a step refused), a
    // loop that never finishes, a refused message
    let failing = [
        (Design::Fixed, "zzz", DesignConfig::default()),
        (Design::Plan, GOAL, DesignConfig { fake: "prose".into(), ..DesignConfig::default() }),
        (Design::Plan, GOAL, DesignConfig { fake: "bad_tool".into(), ..DesignConfig::default() }),
        (Design::React, GOAL, DesignConfig { fake: "garbage".into(), ..DesignConfig::default() }),
        (
            Design::Multi,
            GOAL,
            DesignConfig {
                roles: RoleSetup::fakes(Behaviours { planner: PlannerKind::Delegate, ..Behaviours::default() }),
                ..DesignConfig::default()
            },
        ),
    ];
    for (design, goal, cfg) in failing {
        let out = run_design(design, goal, &env, &cfg).await.unwrap();
        assert!(!out.code.is_done(), "{design}: {:?}", out.code);
        ends_with_one_stop(design, &out);
    }
    // failures of a model call, every model-driven design
    for design in [Design::Plan, Design::React, Design::PolicyPal, Design::Multi] {
        let server = Server::start(Vec::new(), Some(cut((300, 16)))).await;
        let out = run_on(design, &server).await;
        ends_with_one_stop(design, &out);
    }
}

/// The (start, end) offsets of the whitespace-separated fields of `line`.
fn fields(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (c == ' ', start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Every field of `row` sits in its header column: it starts where the column's name
/// starts (left-aligned) or ends where it ends (right-aligned).
fn aligned(header: &str, row: &str) {
    let (h, r) = (fields(header), fields(row));
    assert_eq!(h.len(), r.len(), "{header}\n{row}");
    for ((hs, he), (rs, re)) in h.into_iter().zip(r) {
        assert!(rs == hs || re == he, "a column out of place:\n{header}\n{row}");
    }
}

#[test]
fn the_compare_tables_keep_every_column_under_its_header_whatever_the_ending() {
    use rolegate::agent::StopReason;
    let mut codes: Vec<DesignCode> = vec![DesignCode::NoRoute, DesignCode::PlanRejected, DesignCode::OutOfScope];
    codes.extend(StopReason::ALL.iter().map(|r| DesignCode::Run(*r)));
    codes.extend(MultiReason::ALL.iter().map(|r| DesignCode::Multi(*r)));
    for code in codes {
        let row = DesignRow {
            task: "t1".into(),
            design: Design::Multi,
            code,
            model_calls: 12,
            input_tokens: 12_345,
            output_tokens: 678,
            credits: Decimal::ZERO,
            covered: false,
            answer_ok: true,
            wall_us: 1,
            calls: Vec::new(),
        };
        aligned(DESIGN_ROW_HEADER, &row.table_line());
        let pal = PalRow {
            task: "t1".into(),
            model: "parallel".into(),
            guard: true,
            code,
            model_calls: 3,
            input_tokens: 861,
            covered: true,
            calls: Vec::new(),
            reply: "gave_up",
        };
        aligned(PAL_ROW_HEADER, &pal.table_line());
    }
}
