//! The envelope rules for any text on any channel: the coordinator's parse, route and
//! claim checks ([`check_message`]), its intake ([`Intake`]) and the wire form of an
//! accepted body.
//!
//! What must hold, whatever the text:
//! - the verdict is one named code or an accepted body, and the same text on the same
//!   channel always gets the same verdict;
//! - the intake agrees with [`check_message`]: an accepted text becomes envelope `m1`
//!   whose sender is the channel (never the text) and whose recipient and kind are the
//!   route table's; a refused one is recorded as `(channel, code)`; one trace line each;
//! - an accepted body fits its schema and limits, holds no instruction-like string, and a
//!   finding cites only what the researcher read (with strict claims: every part of the
//!   claim is a fact rebuilt from a cited read);
//! - an accepted body re-serialises ([`Body::to_text`]) to a text that is accepted again,
//!   on the same channel, as the same body;
//! - a text is accepted on one channel only, and towards one recipient only;
//! - strict claims are stricter than free ones: what strict accepts, free accepts, and a
//!   free refusal is the strict refusal too.

use super::{Broken, Fixture, RUN_ID, USER, ensure, state_rule};
use crate::agent::{AgentState, TraceKind};
use crate::gate::Observation;
use crate::label::Label;
use crate::multi::envelope::{MAX_CLAIM_CHARS, MAX_NOTES_CHARS, MAX_QUESTION_CHARS, MAX_SOURCE_CHARS, MAX_SOURCES};
use crate::multi::routes::{next_hop, route_kind};
use crate::multi::{Body, ClaimMode, Evidence, Intake, RejectCode, Role, check_message, parse_message};
use crate::security::is_instruction_like;
use crate::tools::{Registry, ToolArgs};

/// Every channel a text can arrive on, in the order a fuzz input's first byte picks them.
/// The coordinator has no route of its own: whatever arrives on it is `no_route`.
pub const CHANNELS: [Role; 4] = [Role::Planner, Role::Researcher, Role::Reviewer, Role::Coordinator];

/// Splits a fuzz input into a channel and claim mode (the first byte: its low bits pick
/// from [`CHANNELS`], its high bit free claims) and the text (invalid UTF-8 is skipped).
/// The fuzz target and the replay of its seeds in `cargo test` both read inputs so.
pub fn envelope_input(data: &[u8]) -> Option<(Role, ClaimMode, &str)> {
    let (first, rest) = data.split_first()?;
    let channel = CHANNELS[usize::from(*first & 0x7f) % CHANNELS.len()];
    let claims = if first & 0x80 == 0 { ClaimMode::Strict } else { ClaimMode::Free };
    Some((channel, claims, std::str::from_utf8(rest).ok()?))
}

/// What the researcher read before an envelope is checked, the same for the fuzz target,
/// the envelope corpus and the tests: `o1` kwame's ticket T-601 (open), `o2` ticket T-602
/// (open, with the injected note), `o3` document `kc-returns-v3`, all read successfully,
/// and `o4` a failed read of lena's ticket T-603 (it looks missing). The texts are the
/// bundled tools' real results, recorded through the run state as the loop records them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeContext {
    /// The researcher's observations.
    pub observations: Vec<Observation>,
}

impl EnvelopeContext {
    /// The standard context over the fixture's world.
    ///
    /// # Errors
    /// Only if the state rules refused this fixed history (a bug).
    pub fn standard(fx: &Fixture) -> Result<Self, Broken> {
        let world = crate::world::World::new(fx.env.world.clone());
        let read = |args: ToolArgs| match Registry.execute(&world, USER, &args) {
            Ok(v) => (true, serde_json::to_string(&v).unwrap_or_default()),
            Err(f) => (false, format!("error {}: {}", f.code.as_str(), f.message)),
        };
        let ticket = |id: &str| ToolArgs::GetTicket(crate::tools::GetTicketArgs { ticket_id: id.into() });
        let doc = ToolArgs::LookupDocument(crate::tools::LookupDocumentArgs { doc_id: "kc-returns-v3".into() });
        let reads = [
            ("get_ticket", read(ticket("T-601"))),
            ("get_ticket", read(ticket("T-602"))),
            ("lookup_document", read(doc)),
            ("get_ticket", read(ticket("T-603"))),
        ];
        let rule = || state_rule("envelope_context");
        let mut state = AgentState::new(RUN_ID, USER, "researcher", "Status of T-601 and T-602?").map_err(rule())?;
        for (tool, (ok, text)) in reads {
            state = state.next_step().map_err(rule())?;
            state = state.observe(ok, tool, &text).map_err(rule())?.0;
        }
        Ok(Self { observations: state.observations().to_vec() })
    }
}

/// A text's verdict: the recipient and the accepted body, or the code it was refused with.
pub type EnvelopeVerdict = Result<(Role, Body), RejectCode>;

/// The code of a verdict as a corpus row names it: `ok` or the rejection code.
pub fn verdict_code(v: &EnvelopeVerdict) -> &'static str {
    match v {
        Ok(_) => "ok",
        Err(code) => code.as_str(),
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Checks the body of an accepted message against its schema, the filter and the evidence.
fn accepted_body_holds(body: &Body, evidence: &Evidence, claims: ClaimMode) -> Result<(), Broken> {
    let fits = match body {
        Body::Brief(b) => (1..=MAX_QUESTION_CHARS).contains(&chars(&b.question)) && !b.question.trim().is_empty(),
        Body::Finding(f) => {
            (1..=MAX_CLAIM_CHARS).contains(&chars(&f.claim))
                && !f.claim.trim().is_empty()
                && (1..=MAX_SOURCES).contains(&f.sources.len())
                && f.sources.iter().all(|s| (1..=MAX_SOURCE_CHARS).contains(&chars(s)) && !s.trim().is_empty())
        }
        Body::Verdict(v) => chars(&v.notes) <= MAX_NOTES_CHARS,
    };
    ensure(fits, "accepted_body_fits_its_schema", || format!("{body:?}"))?;
    let flagged: Vec<&str> = body.strings().filter(|s| is_instruction_like(s)).collect();
    ensure(flagged.is_empty(), "accepted_body_passes_the_filter", || format!("{flagged:?}"))?;
    if let Body::Finding(f) = body {
        let unknown: Vec<&String> = f.sources.iter().filter(|s| !evidence.knows(s)).collect();
        ensure(unknown.is_empty(), "accepted_finding_cites_only_reads", || format!("{unknown:?}"))?;
        if claims == ClaimMode::Strict {
            let rebuilt = |part: &str| {
                evidence.facts.iter().any(|fact| fact.text == part && f.sources.iter().any(|s| s == fact.source()))
            };
            let loose: Vec<&str> = f.claim.split(';').map(str::trim).filter(|p| !rebuilt(p)).collect();
            ensure(loose.is_empty(), "strict_claim_is_rebuilt_from_cited_reads", || format!("{loose:?}"))?;
        }
    }
    Ok(())
}

/// Checks `text` arriving on channel `sender` with the coordinator's checks, its intake and
/// the wire form, in context `ctx` and claim mode `claims`.
///
/// # Errors
/// [`Broken`] when any rule of the module documentation fails.
pub fn check_envelope(
    ctx: &EnvelopeContext,
    sender: Role,
    text: &str,
    claims: ClaimMode,
) -> Result<EnvelopeVerdict, Broken> {
    let obs = &ctx.observations;
    let got = check_message(sender, text, obs, claims);
    let again = check_message(sender, text, obs, claims);
    ensure(again == got, "envelope_verdict_is_deterministic", || format!("{got:?} then {again:?}"))?;

    // the intake: the same verdict, recorded under the channel, one trace line
    let mut intake = Intake::new(RUN_ID, claims);
    let taken = intake.accept_labelled(sender, text, obs, 1, 1, Label::UNTRUSTED);
    let lines: Vec<(TraceKind, &str)> = intake.trace.lines.iter().map(|l| (l.kind, l.code.as_ref())).collect();
    ensure(lines == [(TraceKind::Message, verdict_code(&got))], "intake_writes_one_line", || format!("{lines:?}"))?;
    match (&got, &taken) {
        (Ok((recipient, body)), Ok(env)) => {
            let stamped = env.id == "m1"
                && env.sender == sender
                && env.recipient == *recipient
                && env.kind == body.kind()
                && env.body == *body
                && intake.messages.len() == 1
                && intake.rejected.is_empty();
            ensure(stamped, "intake_stamps_the_channel_and_the_route", || format!("{env:?}"))?;
        }
        (Err(code), Err(taken)) => {
            let recorded = taken == code
                && intake.messages.is_empty()
                && intake.rejected.len() == 1
                && intake.rejected[0].sender == sender
                && intake.rejected[0].code == *code;
            ensure(recorded, "intake_records_the_refusal_under_the_channel", || format!("{:?}", intake.rejected))?;
        }
        _ => {
            return Err(Broken { rule: "intake_agrees_with_check_message", detail: format!("{got:?} vs {taken:?}") });
        }
    }

    let evidence = Evidence::from_observations(obs);
    match &got {
        Ok((recipient, body)) => {
            let routed = route_kind(sender, *recipient) == Some(body.kind());
            ensure(routed, "accepted_envelope_follows_a_route", || format!("{sender}->{recipient} {}", body.kind()))?;
            accepted_body_holds(body, &evidence, claims)?;
            let wire = body.to_text();
            let back = check_message(sender, &wire, obs, claims);
            ensure(back.as_ref() == Ok(&(*recipient, body.clone())), "accepted_envelope_round_trip", || {
                format!("{wire} gave {back:?}")
            })?;
            for other in CHANNELS.into_iter().filter(|c| *c != sender) {
                let elsewhere = check_message(other, text, obs, claims);
                ensure(elsewhere.is_err(), "accepted_on_one_channel_only", || format!("also from {other}"))?;
            }
            for to in CHANNELS.into_iter().filter(|r| r != recipient) {
                let wrong = parse_message(sender, to, text);
                ensure(wrong == Err(RejectCode::NoRoute), "accepted_towards_one_recipient_only", || {
                    format!("{sender}->{to}: {wrong:?}")
                })?;
            }
            if claims == ClaimMode::Strict {
                let free = check_message(sender, text, obs, ClaimMode::Free);
                ensure(free == got, "strict_is_stricter_than_free", || format!("free gave {free:?}"))?;
            }
        }
        Err(code) => {
            let parsed = next_hop(sender).map(|(to, _)| parse_message(sender, to, text));
            let consistent = match code {
                RejectCode::UnknownSource | RejectCode::UnsupportedClaim => {
                    matches!(parsed, Some(Ok(Body::Finding(_))))
                }
                RejectCode::NoRoute if parsed.is_none() => true,
                _ => parsed == Some(Err(*code)),
            };
            ensure(consistent, "refusal_code_comes_from_its_check", || {
                format!("{code} but the parse gave {parsed:?}")
            })?;
            ensure(
                *code != RejectCode::UnsupportedClaim || claims == ClaimMode::Strict,
                "free_claims_need_no_support",
                || text.chars().take(80).collect(),
            )?;
            if claims == ClaimMode::Free {
                let strict = check_message(sender, text, obs, ClaimMode::Strict);
                ensure(strict == got, "strict_is_stricter_than_free", || format!("strict gave {strict:?}"))?;
            }
        }
    }
    Ok(got)
}
