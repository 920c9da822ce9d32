//! Checkers: JSON Lines of envelopes, proposals or memory writes, each checked by the
//! library's own code (the coordinator's [`check_envelope`], [`parse_proposal`] with
//! [`Agent::check`](crate::agent::Agent::check), [`SessionMemory::write`]) and answered
//! with one verdict per line. A line that cannot be read gets its own `bad_line` verdict;
//! the next line is checked all the same.
//!
//! Input lines (blank lines and lines starting with `#` are skipped; unknown fields are a
//! bad line; `id` is optional and echoed back):
//! - envelope: `{sender, recipient, text, observations?, strict_claims?}`; `observations`
//!   are what the researcher read, `[{tool, text, ok?}]` (`ok` defaults to true), and
//!   `strict_claims` defaults to true. The code is `accept` or the coordinator's rejection.
//! - proposal: `{text, task?}`, checked in the standard context of `task` (default
//!   `triage`): step 1 of a run for kwame, `o1` a successful read of T-601 (already made,
//!   so asking again is `repeated_call`), `o2` a failed lookup. The code is `ok`, a parse
//!   error or the loop's check code.
//! - memory: `{key, text, source, about?}`, written to a fresh session memory of the
//!   checker's user (kwame unless told), so each verdict depends on its line alone. The
//!   code is `ok` or the write code.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::context::{Fixture, ProposalContext};
use crate::agent::parse_proposal;
use crate::cost::ManualClock;
use crate::gate::Observation;
use crate::lab::Lab;
use crate::memory::SessionMemory;
use crate::multi::{ClaimMode, IntakeRules, Role, check_envelope};

/// What a checker reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// Messages between roles, as the coordinator's intake checks them.
    Envelopes,
    /// Proposals, as the loop parses and checks them.
    Proposals,
    /// Memory writes, as session memory takes or refuses them.
    Memory,
}

/// The verdict on one input line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineVerdict {
    /// 1-based line number in the input.
    pub line: usize,
    /// The line's `id`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `accept` / `ok`, a rejection code, or `bad_line`.
    pub code: String,
    /// For an accepted envelope: its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// For a bad line: why it could not be checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LineVerdict {
    /// True for `accept` and `ok`.
    pub fn accepted(&self) -> bool {
        self.code == "accept" || self.code == "ok"
    }
}

/// The code of a line that could not be checked.
pub(crate) const BAD_LINE: &str = "bad_line";

/// The code of a line longer than [`MAX_LINE_BYTES`]: it is skipped unread (its bytes are
/// never held), and the next line is checked all the same.
pub(crate) const LINE_TOO_LONG: &str = "line_too_long";

/// The longest line a checker reads, in bytes without its newline (1 MiB).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Counts of a checked stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Verdicts given (blank and `#` lines have none).
    pub verdicts: usize,
    /// Verdicts that were not accepted.
    pub refused: usize,
}

/// Reads the next line of `input` into `buf` (without its newline), holding at most
/// `max` bytes: a longer line is consumed to its end and dropped. `None` at the end of
/// the input; `Some(true)` for a line that was too long.
fn next_line<R: std::io::BufRead>(input: &mut R, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Option<bool>> {
    buf.clear();
    let (mut any, mut too_long) = (false, false);
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(any.then_some(too_long));
        }
        any = true;
        let newline = chunk.iter().position(|b| *b == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        if !too_long {
            if buf.len() + part.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let used = newline.map_or(chunk.len(), |i| i + 1);
        input.consume(used);
        if newline.is_some() {
            return Ok(Some(too_long));
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeenLine {
    tool: String,
    text: String,
    #[serde(default = "yes")]
    ok: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeLine {
    #[serde(default)]
    id: Option<String>,
    sender: Role,
    recipient: Role,
    text: String,
    #[serde(default)]
    observations: Vec<SeenLine>,
    #[serde(default = "yes")]
    strict_claims: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposalLine {
    #[serde(default)]
    id: Option<String>,
    text: String,
    #[serde(default)]
    task: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryLine {
    #[serde(default)]
    id: Option<String>,
    key: String,
    text: String,
    source: String,
    #[serde(default)]
    about: Option<String>,
}

/// Checks lines of one kind. Built once per input; proposal contexts are made per task
/// on first use.
pub struct Checker {
    kind: CheckKind,
    user: String,
    fixture: Fixture,
    labs: BTreeMap<String, (Lab, ProposalContext)>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker").field("kind", &self.kind).field("user", &self.user).finish_non_exhaustive()
    }
}

fn read<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(format!("not JSON: {e}"));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." { "(line)".to_string() } else { path };
        format!("field `{field}`: {}", e.into_inner())
    })
}

impl Checker {
    /// A checker of `kind`; memory writes go to a memory owned by `user`.
    ///
    /// # Errors
    /// Only if the bundled data were broken (tests guard them).
    pub fn new(kind: CheckKind, user: &str) -> Result<Self, crate::agent::EnvError> {
        Ok(Self { kind, user: user.to_string(), fixture: Fixture::bundled()?, labs: BTreeMap::new() })
    }

    /// Checks every line of `input` (JSON Lines; blank lines and `#` lines skipped). A
    /// line that is not UTF-8, not JSON or not of the schema gets a `bad_line` verdict.
    pub fn check_all(&mut self, input: &[u8]) -> Vec<LineVerdict> {
        let mut out = Vec::new();
        // reading a byte slice cannot fail
        let _ = self.check_stream(input, MAX_LINE_BYTES, |v| {
            out.push(v.clone());
            true
        });
        out
    }

    /// Checks `input` as it comes: one line read, one verdict handed to `emit`, in
    /// constant memory (a line is held only up to `max_line` bytes; a longer one gets
    /// [`LINE_TOO_LONG`] without being kept). Stops early when `emit` returns false (a
    /// closed pipe).
    ///
    /// # Errors
    /// A read error of the input; the verdicts before it were emitted.
    pub fn check_stream<R: std::io::BufRead>(
        &mut self,
        mut input: R,
        max_line: usize,
        mut emit: impl FnMut(&LineVerdict) -> bool,
    ) -> std::io::Result<Tally> {
        let mut tally = Tally::default();
        let mut buf = Vec::new();
        let mut line = 0usize;
        while let Some(too_long) = next_line(&mut input, &mut buf, max_line)? {
            line += 1;
            let raw = buf.strip_suffix(b"\r").unwrap_or(&buf);
            let verdict = if too_long {
                LineVerdict {
                    line,
                    id: None,
                    code: LINE_TOO_LONG.into(),
                    kind: None,
                    error: Some(format!("longer than {max_line} bytes")),
                }
            } else {
                match std::str::from_utf8(raw) {
                    Err(e) => bad(line, format!("not UTF-8: {e}")),
                    Ok(t) if t.trim().is_empty() || t.trim().starts_with('#') => continue,
                    Ok(t) => self.check_line(line, t.trim()),
                }
            };
            tally.verdicts += 1;
            tally.refused += usize::from(!verdict.accepted());
            if !emit(&verdict) {
                break;
            }
        }
        Ok(tally)
    }

    /// Checks one line of text (`line` is its number, for the verdict).
    pub fn check_line(&mut self, line: usize, text: &str) -> LineVerdict {
        let verdict = match self.kind {
            CheckKind::Envelopes => read::<EnvelopeLine>(text).map(|l| envelope(line, l)),
            CheckKind::Proposals => read::<ProposalLine>(text).and_then(|l| self.proposal(line, l)),
            CheckKind::Memory => read::<MemoryLine>(text).map(|l| self.memory(line, l)),
        };
        verdict.unwrap_or_else(|e| bad(line, e))
    }

    fn proposal(&mut self, line: usize, l: ProposalLine) -> Result<LineVerdict, String> {
        let task = l.task.unwrap_or_else(|| "triage".to_string());
        if !self.fixture.env.policy.tasks.contains_key(&task) {
            return Err(format!("field `task`: no task {task:?} in the policy"));
        }
        if !self.labs.contains_key(&task) {
            let ctx = ProposalContext::standard(&task).map_err(|e| e.to_string())?;
            self.labs.insert(task.clone(), (self.fixture.lab(&task), ctx));
        }
        let code = match (parse_proposal(&l.text), self.labs.get(&task)) {
            (Err(e), _) => e.as_str(),
            (Ok(p), Some((lab, ctx))) => lab.agent.check(&p, &ctx.state, &ctx.seen).as_str(),
            (Ok(_), None) => return Err("no context for the task".into()),
        };
        Ok(LineVerdict { line, id: l.id, code: code.into(), kind: None, error: None })
    }

    fn memory(&self, line: usize, l: MemoryLine) -> LineVerdict {
        let clock = ManualClock::new();
        let mut memory = SessionMemory::new(&self.user, clock.shared(), Duration::from_secs(60));
        let code = memory.write(&l.key, &l.text, &l.source, l.about.as_deref());
        LineVerdict { line, id: l.id, code: code.as_str().into(), kind: None, error: None }
    }
}

fn bad(line: usize, error: String) -> LineVerdict {
    LineVerdict { line, id: None, code: BAD_LINE.into(), kind: None, error: Some(error) }
}

fn envelope(line: usize, l: EnvelopeLine) -> LineVerdict {
    let observations: Vec<Observation> = l
        .observations
        .into_iter()
        .enumerate()
        .map(|(i, o)| Observation::new(&format!("o{}", i + 1), 1, &o.tool, o.ok, o.text))
        .collect();
    let claims = if l.strict_claims { ClaimMode::Strict } else { ClaimMode::Free };
    let rules = IntakeRules { claims, ..IntakeRules::default() };
    let (code, kind) = match check_envelope(l.sender, l.recipient, &l.text, &observations, rules) {
        Ok(body) => ("accept".to_string(), Some(body.kind().as_str().to_string())),
        Err(code) => (code.as_str().to_string(), None),
    };
    LineVerdict { line, id: l.id, code, kind, error: None }
}
