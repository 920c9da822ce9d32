//! Interop with OpenAI-compatible servers, against a loopback server: the `finish` function
//! the client offers is accepted as the final answer by every design that is offered it
//! (the single agent, plan, PolicyPal, the three roles); `tool_choice` goes with every
//! request that offers functions and never with one that offers none; a reply cut at
//! `max_tokens` is `truncated` and a withheld one `refused_by_server`; the binary passes
//! `--max-tokens` (global and per role), `--temperature`, `--seed` and `--tool-choice`
//! through to the request body.
//!
//! Time: real (unpaused) tokio time, as in `http_runs.rs`; nothing waits on a timer.

use rolegate::agent::{StopReason, TraceKind};
use rolegate::design::{Design, DesignCode, DesignConfig, run_design};
use rolegate::eval::run_multi;
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::http::{Endpoint, HttpConfig, ToolChoice};
use rolegate::multi::{MultiEnv, MultiReason, RoleSetup};
use serde_json::{Value, json};

use crate::http_runs::http_env;
use crate::http_server::{Reply, Seen, Server, answer, tool_call};
use crate::util::m01;

/// A client configuration for `local-model` at `server` (priced in `http_env`).
fn cfg(server: &Server, choice: ToolChoice) -> HttpConfig {
    let mut ep = Endpoint::new(&server.base_url).unwrap();
    ep.retry.max_retries = 0;
    ep.tool_choice = choice;
    ep.config("local-model").unwrap()
}

/// Every request that offers functions says how to use them; one that offers none says
/// nothing about them.
fn tool_choice_goes_with_the_tools(seen: &[Seen], choice: &str) {
    for s in seen {
        match s.body.get("tools") {
            Some(tools) => {
                assert!(tools.as_array().is_some_and(|t| !t.is_empty()));
                assert_eq!(s.body["tool_choice"], choice, "{}", s.body);
            }
            None => assert!(s.body.get("tool_choice").is_none(), "{}", s.body),
        }
    }
}

fn finish(answer: &str, sources: &[&str]) -> Reply {
    tool_call("finish", json!({"answer": answer, "sources": sources}), Some((100, 10)))
}

#[tokio::test]
async fn a_finish_call_is_the_final_answer_in_every_design_that_is_offered_it() {
    let env = http_env();
    let goal = "What is the status of T-601?";
    for choice in [ToolChoice::Auto, ToolChoice::Required] {
        // the single agent (react)
        let server = Server::start(
            vec![
                tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((100, 10))),
                finish("T-601 is open.", &["o1"]),
            ],
            None,
        )
        .await;
        let design = DesignConfig { model: Some(cfg(&server, choice)), ..DesignConfig::default() };
        let out = run_design(Design::React, goal, &env, &design).await.unwrap();
        assert_eq!(out.code, DesignCode::Run(StopReason::Done), "react {choice:?}");
        assert_eq!(out.answer.as_deref(), Some("T-601 is open."));
        tool_choice_goes_with_the_tools(&server.seen(), choice.as_str());
        assert!(server.seen().iter().all(|s| s.body.get("tools").is_some()), "the loop offers its tools");

        // plan: the plan may come as a finish call's answer; the planner is offered no function
        let plan = json!({"steps": [{"tool": "get_ticket", "arguments": {"ticket_id": "T-601"}, "reason": "read it"}]});
        let server = Server::start(vec![finish(&plan.to_string(), &[])], None).await;
        let design = DesignConfig { model: Some(cfg(&server, choice)), ..DesignConfig::default() };
        let out = run_design(Design::Plan, goal, &env, &design).await.unwrap();
        assert_eq!(out.code, DesignCode::Run(StopReason::Done), "plan {choice:?}: {:?}", out.problems);
        assert_eq!(out.calls, ["get_ticket"]);
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].body.get("tools").is_none(), "a plan is text: no function is offered");
        tool_choice_goes_with_the_tools(&seen, choice.as_str());

        // PolicyPal: a lone finish call is the answer, not a tool
        let server = Server::start(
            vec![
                tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((100, 10))),
                finish("T-601 is open.", &["o1"]),
            ],
            None,
        )
        .await;
        let design = DesignConfig { model: Some(cfg(&server, choice)), ..DesignConfig::default() };
        let out = run_design(Design::PolicyPal, goal, &env, &design).await.unwrap();
        assert_eq!(out.code, DesignCode::Run(StopReason::Done), "policypal {choice:?}: {:?}", out.trace.lines());
        assert_eq!(out.answer.as_deref(), Some("T-601 is open."));
        assert_eq!(out.calls, ["get_ticket"], "finish never reached the gate");
        tool_choice_goes_with_the_tools(&server.seen(), choice.as_str());

        // the three roles: each hands over its message as a finish call
        let menv = MultiEnv::new(&env).unwrap();
        let (fake, _) = run_multi(&m01(), &menv).await.unwrap();
        let [brief, finding, verdict] = [0, 1, 2].map(|i| fake.messages[i].body.to_text());
        let server = Server::start(
            vec![
                finish(&brief, &[]),
                tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((100, 10))),
                tool_call("lookup_document", json!({"doc_id": "kc-returns-v3"}), Some((100, 10))),
                finish(&finding, &["o1", "o2"]),
                finish(&verdict, &[]),
            ],
            None,
        )
        .await;
        let design = DesignConfig { roles: RoleSetup::http(&cfg(&server, choice)), ..DesignConfig::default() };
        let out = run_design(Design::Multi, &m01().goal, &env, &design).await.unwrap();
        assert_eq!(out.code, DesignCode::Multi(MultiReason::Done), "multi {choice:?}: {:?}", out.problems);
        let run = out.multi.unwrap();
        assert_eq!(run.messages, fake.messages, "the same three envelopes as the fake row");
        let seen = server.seen();
        assert_eq!(seen.len(), 5);
        assert!(seen[0].body.get("tools").is_none(), "the planner holds no tool and is offered none");
        assert!(seen[1..].iter().all(|s| s.body.get("tools").is_some()));
        tool_choice_goes_with_the_tools(&seen, choice.as_str());
    }
}

#[tokio::test]
async fn policypal_refuses_a_finish_beside_other_calls_and_goes_on() {
    let env = http_env();
    let both = Reply::Json(answer(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_ticket", "arguments": "{\"ticket_id\":\"T-601\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "finish", "arguments": "{\"answer\":\"guess\",\"sources\":[\"o1\"]}"}}
        ]}),
        Some((100, 10)),
    ));
    let server = Server::start(
        vec![
            both,
            tool_call("get_ticket", json!({"ticket_id": "T-601"}), Some((100, 10))),
            finish("T-601 is open.", &["o2"]),
        ],
        None,
    )
    .await;
    let design = DesignConfig { model: Some(cfg(&server, ToolChoice::Auto)), ..DesignConfig::default() };
    let out = run_design(Design::PolicyPal, "What is the status of T-601?", &env, &design).await.unwrap();
    assert_eq!(out.code, DesignCode::Run(StopReason::Done));
    assert_eq!(out.trace.codes(TraceKind::Model)[0], "finish_with_calls", "{:?}", out.trace.lines());
    assert_eq!(out.calls, ["get_ticket"], "nothing of the refused reply ran");
    // the refusal reached the model as the answer to its calls
    let second = &server.seen()[1].body["messages"];
    assert!(second.to_string().contains("rejected: finish_with_calls"));
}

/// A reply with this `finish_reason`.
fn ending(reason: &str) -> Reply {
    let mut v =
        answer(json!({"role": "assistant", "content": "{\"action\":\"finish\",\"answer\":\"T-6"}), Some((100, 200)));
    v["choices"][0]["finish_reason"] = Value::String(reason.into());
    Reply::Json(v)
}

#[tokio::test]
async fn a_reply_cut_at_max_tokens_is_truncated_and_a_withheld_one_refused_by_server() {
    let env = http_env();
    for (reason, code) in [("length", "truncated"), ("content_filter", "refused_by_server")] {
        // the single agent
        let server = Server::start(vec![ending(reason)], Some(ending(reason))).await;
        let lab = LabConfig { decider: DeciderSpec::Http(cfg(&server, ToolChoice::Auto)), ..LabConfig::default() };
        let mut lab = lab.build(&env);
        let run = lab.agent.run("What is the status of T-601?", "run-1").await.unwrap();
        assert!(run.trace().codes(TraceKind::Model).contains(&code), "{reason}: {:?}", run.trace().lines());
        assert_ne!(run.reason(), StopReason::Done);
        assert!(!run.trace().codes(TraceKind::Model).contains(&"not_json"), "never read as a proposal");

        // PolicyPal and plan
        for design in [Design::PolicyPal, Design::Plan] {
            let server = Server::start(Vec::new(), Some(ending(reason))).await;
            let cfg = DesignConfig { model: Some(cfg(&server, ToolChoice::Auto)), ..DesignConfig::default() };
            let out = run_design(design, "What is the status of T-601?", &env, &cfg).await.unwrap();
            assert!(out.trace.codes(TraceKind::Model).contains(&code), "{design} {reason}: {:?}", out.trace.lines());
        }

        // a role
        let server = Server::start(Vec::new(), Some(ending(reason))).await;
        let design =
            DesignConfig { roles: RoleSetup::http(&cfg(&server, ToolChoice::Auto)), ..DesignConfig::default() };
        let out = run_design(Design::Multi, &m01().goal, &env, &design).await.unwrap();
        let run = out.multi.unwrap();
        let codes: Vec<&str> = run.traces.iter().flat_map(|t| t.codes(TraceKind::Model)).collect();
        assert!(codes.contains(&code), "multi {reason}: {codes:?}");
        assert_ne!(run.reason, MultiReason::Done);
    }
}

#[tokio::test]
async fn the_binary_passes_max_tokens_per_role_temperature_seed_and_tool_choice_to_the_server() {
    let server = Server::start(Vec::new(), Some(Reply::Roles(rolegate::multi::Behaviours::default()))).await;
    let base = server.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
            .args(["run", "--design", "multi", "Status of T-601 and our refund policy?"])
            .args(["--model", "openai:local-model", "--zero-price", "--base-url", &base])
            .args(["--max-tokens", "700", "--planner-max-tokens", "300", "--reviewer-max-tokens", "400"])
            .args(["--temperature", "0.2", "--seed", "42", "--tool-choice", "required"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let seen = server.seen();
    assert!(seen.len() >= 3);
    let system = |s: &Seen| s.body["messages"][0]["content"].as_str().unwrap().to_string();
    for s in &seen {
        let want = if system(s).starts_with(rolegate::model::prompts::PLANNER) {
            300
        } else if system(s).starts_with(rolegate::model::prompts::REVIEWER) {
            400
        } else {
            700
        };
        assert_eq!(s.body["max_tokens"], want, "{}", system(s));
        assert_eq!((&s.body["temperature"], &s.body["seed"]), (&json!(0.2), &json!(42)));
    }
    tool_choice_goes_with_the_tools(&seen, "required");

    // bad values are refused by name before anything is sent
    for bad in [
        ["--max-tokens", "0"],
        ["--temperature", "3"],
        ["--max-connections", "0"],
        ["--tool-choice", "sometimes"],
        ["--researcher-max-tokens", "9999999"],
    ] {
        let base = server.base_url.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
                .args(["run", "--design", "multi", "Check T-601."])
                .args(["--model", "openai:local-model", "--zero-price", "--base-url", &base])
                .args(bad)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(bad[0].trim_start_matches('-')), "{bad:?}");
    }
    assert_eq!(server.seen().len(), seen.len(), "nothing was sent");
}
