//! The trace: one redacted line per decision (step, kind, code, clipped detail). The same
//! inputs give the same lines, byte for byte. Every line is also a `tracing` event.

use crate::codes::codes;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

use crate::security::{clip, redact, redact_leaves_constant};

/// Most characters of a line's detail.
pub(super) const DETAIL_CHARS: usize = 60;

/// Most characters of a tool line's arguments.
pub(crate) const ARGS_CHARS: usize = 240;

codes! {
    /// What a trace line is about.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum TraceKind {
        /// A model call and the parse of its proposal.
        Model = "model",
        /// The loop's check of a proposal.
        Check = "check",
        /// A gate decision.
        Tool = "tool",
        /// A memory write.
        Memory = "memory",
        /// A human decision.
        Human = "human",
        /// The end of a run.
        Stop = "stop",
        /// A message between roles (accepted or rejected by the coordinator).
        Message = "message",
        /// A plan check.
        Plan = "plan",
    }
}

/// One decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    pub step: u32,
    pub kind: TraceKind,
    /// The code (`ok` or a named rejection).
    pub code: Cow<'static, str>,
    /// Redacted, clipped detail (up to 24 bytes kept inline, without an allocation).
    pub(crate) detail: CompactString,
    /// For a tool line: the call's arguments as JSON, redacted and clipped to
    /// [`ARGS_CHARS`] (what a report shows; the printed line leaves them out). Up to 24
    /// bytes are kept inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) args: Option<CompactString>,
}

impl fmt::Display for TraceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = format!("{:>2} {:<6} {:<18} {}", self.step, self.kind, self.code, self.detail);
        f.write_str(line.trim_end())
    }
}

/// The decisions of one run, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The run the lines belong to (up to 24 bytes kept inline, as the role).
    pub(crate) run_id: CompactString,
    /// The role that made them, for multi-agent runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<CompactString>,
    pub lines: Vec<TraceLine>,
}

/// Largest count a known detail may hold ([`Trace::add_counted`]): five digits, too few
/// for any number the redactor hides (a phone number has nine or more, a card sixteen).
const KNOWN_COUNT_MAX: usize = 99_999;

/// `pieces` joined: written on the stack and copied once into the detail (inline up to 24
/// bytes), rather than pushed piece by piece.
fn joined<'a>(pieces: impl IntoIterator<Item = &'a str> + Clone) -> CompactString {
    let mut buf = [0u8; 64];
    let mut len = 0;
    for piece in pieces.clone() {
        let Some(to) = buf.get_mut(len..len + piece.len()) else {
            return pieces.into_iter().collect();
        };
        to.copy_from_slice(piece.as_bytes());
        len += piece.len();
    }
    // whole `str`s joined are a `str`
    std::str::from_utf8(&buf[..len]).map_or_else(|_| pieces.into_iter().collect(), CompactString::from)
}

/// The redacted, clipped compact JSON of a tool call's arguments.
fn args_line(args: &serde_json::Value) -> CompactString {
    let text = serde_json::to_string(args).unwrap_or_else(|_| args.to_string());
    CompactString::from(clip(&redact(&text), ARGS_CHARS))
}

impl TraceLine {
    /// The redacted, clipped detail.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// For a tool line: the call's arguments as redacted, clipped JSON.
    pub fn args(&self) -> Option<&str> {
        self.args.as_deref()
    }
}

impl Trace {
    /// The run the lines belong to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The role that made them, for multi-agent runs.
    pub fn role(&self) -> Option<&str> {
        self.role.as_deref()
    }

    /// An empty trace for `run_id`.
    pub fn new(run_id: &str) -> Self {
        Self { run_id: run_id.into(), role: None, lines: Vec::new() }
    }

    /// Adds a line; `detail` is redacted, then clipped. The `tracing` event carries the
    /// whole redacted detail (the `--trace-json` export keeps it); only the stored line is
    /// clipped, so a run's trace takes no more memory than before.
    pub fn add(&mut self, step: u32, kind: TraceKind, code: impl Into<Cow<'static, str>>, detail: &str) {
        self.push(step, kind, code.into(), detail, None);
    }

    /// Adds a tool line: `name` as the detail (redacted in full), and the call's arguments
    /// (redacted, then clipped to [`ARGS_CHARS`]) kept beside it for a report.
    pub fn add_tool(&mut self, step: u32, code: impl Into<Cow<'static, str>>, name: &str, args: &serde_json::Value) {
        self.add_gate_tool(step, code, name, None, args);
    }

    /// [`Trace::add_tool`] of a call through a gate: `known` is `name` as the gate's own
    /// constant when the gate serves it (its environment's tool or an added one,
    /// [`crate::gate::ToolGate::tool_name`]), the only case the loop and the roles meet once
    /// a call got through; any other name is redacted in full.
    pub(crate) fn add_gate_tool(
        &mut self,
        step: u32,
        code: impl Into<Cow<'static, str>>,
        name: &str,
        known: Option<&'static str>,
        args: &serde_json::Value,
    ) {
        let args = args_line(args);
        match known {
            Some(known) => {
                self.push_known(step, TraceKind::Tool, code.into(), CompactString::const_new(known), Some(args))
            }
            None => self.push(step, TraceKind::Tool, code.into(), name, Some(args)),
        }
    }

    /// Adds a line whose detail is the program's own constants joined (`status=done`,
    /// `remember`, an empty detail): the pieces are `&'static str`, so no untrusted text can
    /// be one. The stored and emitted line is the one [`Trace::add`] makes of the joined
    /// text; such a text can only change by a registered secret, so only the registry is
    /// asked ([`redact_leaves_constant`]) and the patterns are not searched.
    pub(crate) fn add_known(
        &mut self,
        step: u32,
        kind: TraceKind,
        code: impl Into<Cow<'static, str>>,
        pieces: &[&'static str],
    ) {
        let text = match pieces {
            [] => CompactString::const_new(""),
            [one] => CompactString::const_new(one),
            _ => joined(pieces.iter().copied()),
        };
        self.push_known(step, kind, code.into(), text, None);
    }

    /// Adds a line whose detail is `head`, a count and the `tail` pieces joined
    /// (`m3 planner->coordinator plan`): a known detail ([`Trace::add_known`]) while the
    /// count has at most five digits, a fully redacted one past that.
    pub(crate) fn add_counted(
        &mut self,
        step: u32,
        kind: TraceKind,
        code: impl Into<Cow<'static, str>>,
        head: &'static str,
        count: usize,
        tail: &[&'static str],
    ) {
        let mut digits = itoa::Buffer::new();
        let text = joined([head, digits.format(count)].into_iter().chain(tail.iter().copied()));
        if count <= KNOWN_COUNT_MAX {
            self.push_known(step, kind, code.into(), text, None);
        } else {
            self.push(step, kind, code.into(), &text, None);
        }
    }

    /// Adds the loop's check line of a proposal: `ACTION TOOL` (`call get_ticket`,
    /// `finish ` for a finish, whose tool is empty). A known detail, the program's own
    /// constants joined, for a finish and for a tool the gate serves (`known`: its name as
    /// the gate's constant, [`crate::gate::ToolGate::tool_name`]); a tool name the model made
    /// up is redacted in full.
    pub(crate) fn add_check(
        &mut self,
        step: u32,
        code: impl Into<Cow<'static, str>>,
        action: &'static str,
        tool: &str,
        known: Option<&'static str>,
    ) {
        let line = joined([action, " ", tool]);
        if known.is_some_and(|k| k == tool) || (action == "finish" && tool.is_empty()) {
            self.push_known(step, TraceKind::Check, code.into(), line, None);
        } else {
            self.push(step, TraceKind::Check, code.into(), &line, None);
        }
    }

    /// Adds a line whose detail `text` the program wrote from its own constants: as
    /// [`Trace::push`] does, without the pattern search (`text` moves into the line when it
    /// needs no clipping).
    fn push_known(
        &mut self,
        step: u32,
        kind: TraceKind,
        code: Cow<'static, str>,
        mut text: CompactString,
        args: Option<CompactString>,
    ) {
        if !redact_leaves_constant(&text) {
            return self.push(step, kind, code, &text, args);
        }
        self.emit(step, kind, &code, &text, args.as_deref());
        let kept = clip(&text, DETAIL_CHARS).len();
        text.truncate(kept);
        self.lines.push(TraceLine { step, kind, code, detail: text, args });
    }

    /// The `tracing` event of a line, with its whole redacted detail.
    fn emit(&self, step: u32, kind: TraceKind, code: &str, red: &str, args: Option<&str>) {
        tracing::info!(
            target: "rolegate::trace",
            run = %self.run_id,
            role = self.role.as_deref().unwrap_or(""),
            step,
            kind = kind.as_str(),
            code = %code,
            detail = %red,
            args = args.unwrap_or(""),
            "decision"
        );
    }

    fn push(&mut self, step: u32, kind: TraceKind, code: Cow<'static, str>, detail: &str, args: Option<CompactString>) {
        let red = redact(detail);
        self.emit(step, kind, &code, &red, args.as_deref());
        let detail = CompactString::from(clip(&red, DETAIL_CHARS));
        self.lines.push(TraceLine { step, kind, code, detail, args });
    }

    /// The printable lines.
    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().map(ToString::to_string).collect()
    }

    /// The codes of one kind, in order.
    pub fn codes(&self, kind: TraceKind) -> Vec<&str> {
        self.lines.iter().filter(|l| l.kind == kind).map(|l| l.code.as_ref()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_redacted_clipped_and_aligned() {
        let mut t = Trace::new("r1");
        t.add(
            1,
            TraceKind::Model,
            "ok",
            r#"{"action": "call", "tool": "send_email_draft", "arguments": {"to": "kwame@gmail.com"}}"#,
        );
        t.add(1, TraceKind::Memory, "ok", "");
        t.add(3, TraceKind::Stop, "done", "status=done");
        let lines = t.lines();
        assert_eq!(lines[1], " 1 memory ok");
        assert_eq!(lines[2], " 3 stop   done               status=done");
        assert!(!lines[0].contains("gmail"));
        assert_eq!(t.lines[0].detail.chars().count(), DETAIL_CHARS);
        assert_eq!(t.codes(TraceKind::Model), ["ok"]);
    }

    #[test]
    fn a_tool_line_keeps_the_compact_redacted_arguments() {
        let mut t = Trace::new("r1");
        let args = serde_json::json!({"to": "kwame@gmail.com", "subject": "Ré: \"T-601\"", "n": 2});
        t.add_tool(2, "ok", "send_email_draft", &args);
        let expected = clip(&redact(&args.to_string()), ARGS_CHARS).to_string();
        assert_eq!(t.lines[0].args.as_deref(), Some(expected.as_str()));
        assert!(!expected.contains("gmail"), "{expected}");
        assert_eq!(t.lines[0].detail, "send_email_draft");
    }

    #[test]
    fn a_tool_line_keeps_its_arguments_as_redacted_clipped_compact_json() {
        let long = "x".repeat(8192);
        let cases = [
            serde_json::json!({"ticket_id": "T-601"}),
            serde_json::json!({"to": "kwame@gmail.com", "body": "é \"q\" \n\u{1F600}", "n": [1, 2.5, null, true]}),
            serde_json::json!({"k": long}),
            serde_json::json!({}),
            serde_json::json!({"api_key": "sk-test-4f9a2c71e0b84d5f9a3c", "nested": {"phone": "+44 20 7946 0958"}}),
            serde_json::json!({"after_large": "short again"}),
        ];
        let mut t = Trace::new("r1");
        for (i, args) in cases.iter().enumerate() {
            t.add_tool(1, "ok", "get_ticket", args);
            assert_eq!(t.lines[i].args.as_deref(), Some(args_line(args).as_str()), "{args}");
        }
        assert_eq!(t.lines[0].args.as_deref(), Some(r#"{"ticket_id":"T-601"}"#));
        assert_eq!(t.lines[2].args.as_deref().map(|a| a.chars().count()), Some(ARGS_CHARS), "clipped");
        assert!(t.lines[4].args.as_deref().is_some_and(|a| !a.contains("sk-test-4f9a")), "redacted");
    }

    /// Every detail the program writes through a known path ([`Trace::add_known`],
    /// [`Trace::add_counted`], [`Trace::add_check`] and [`Trace::add_tool`] with a built-in
    /// name), as the callers build them: tool names, `ACTION TOOL` check lines, memory and
    /// stop lines, a role's own stop, the coordinator's message lines and its empty stop,
    /// an abandoned model call, a call over the cost budget.
    fn known_details() -> Vec<String> {
        use crate::agent::{Proposal, Status, StopReason};
        use crate::multi::{Kind, Role};
        let mut out: Vec<String> =
            ["", "remember", "model call abandoned", "the worst case of the call is over budget", "nothing ran"]
                .map(String::from)
                .into();
        let mut proposals = vec![Proposal::Finish { answer: "a".into(), sources: vec!["o1".into()] }];
        // a gate's tool names: the help desk's here
        for tool in crate::tools::TOOL_NAMES {
            out.push(tool.to_string());
            proposals.push(Proposal::Call { tool: tool.to_string(), arguments: serde_json::json!({}) });
        }
        // the loop's check line (`call TOOL`, `finish `) and a role's refused call (`call TOOL`)
        out.extend(proposals.iter().map(|p| format!("{} {}", p.action(), p.tool())));
        let statuses = [
            Status::Running,
            Status::AwaitingApproval { pending_id: "pa-1".into() },
            Status::Done { answer: "a".into(), sources: vec!["o1".into()] },
            Status::Stopped { reason: StopReason::Stuck },
        ];
        out.extend(statuses.iter().map(|s| format!("status={}", s.name())));
        for role in Role::ALL {
            out.extend(StopReason::ALL.iter().map(|r| format!("{}: {}", role.as_str(), r.as_str())));
        }
        for (sender, recipient, kind) in
            Role::ALL.iter().flat_map(|a| Role::ALL.iter().flat_map(move |b| Kind::ALL.iter().map(move |k| (a, b, k))))
        {
            for n in [0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10_000, 12_345, 99_999] {
                out.push(format!("m{n} {}->{} {}", sender.as_str(), recipient.as_str(), kind.as_str()));
            }
        }
        out
    }

    #[test]
    fn every_known_detail_the_program_writes_is_one_redact_leaves_alone() {
        for detail in known_details() {
            assert!(crate::security::only_registered_can_change(&detail), "{detail:?}");
            assert!(matches!(redact(&detail), Cow::Borrowed(d) if d == detail), "{detail:?}");
        }
        // every count a message line may hold as a known detail, in the longest line
        for n in 0..=KNOWN_COUNT_MAX {
            let detail = format!("m{n} coordinator->researcher finding");
            assert!(crate::security::only_registered_can_change(&detail), "{detail:?}");
        }
        // past it the count could be a phone number: those lines take the full path
        assert_ne!(redact("m1234567890 planner->researcher brief"), "m1234567890 planner->researcher brief");
    }

    /// The `detail` and `args` fields of every `rolegate::trace` event.
    #[derive(Clone, Default)]
    struct Emitted(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Emitted {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            struct Fields(String, String);
            impl tracing::field::Visit for Fields {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                    match field.name() {
                        "detail" => self.0 = format!("{value:?}"),
                        "args" => self.1 = format!("{value:?}"),
                        _ => {}
                    }
                }
                fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                    match field.name() {
                        "detail" => self.0 = value.to_string(),
                        "args" => self.1 = value.to_string(),
                        _ => {}
                    }
                }
            }
            if event.metadata().target() == "rolegate::trace" {
                let mut fields = Fields(String::new(), String::new());
                event.record(&mut fields);
                self.0.lock().unwrap().push((fields.0, fields.1));
            }
        }
    }

    /// Runs `add` on a fresh trace and returns its lines and emitted events.
    fn traced(add: impl FnOnce(&mut Trace)) -> (Vec<TraceLine>, Vec<(String, String)>) {
        use tracing_subscriber::layer::SubscriberExt;
        let emitted = Emitted::default();
        let subscriber = tracing_subscriber::registry().with(emitted.clone());
        let mut t = Trace::new("r1");
        tracing::subscriber::with_default(subscriber, || add(&mut t));
        let events = emitted.0.lock().unwrap().clone();
        (t.lines, events)
    }

    /// A way to add a line, and the text of its detail.
    type Case = (Box<dyn Fn(&mut Trace)>, String);

    /// A registered secret inside a known text (only this test writes it).
    const KNOWN_SECRET: &str = "zq-plain-unit-words-5";

    #[test]
    fn known_lines_are_the_lines_add_makes_of_the_same_text() {
        use crate::agent::StopReason;
        use crate::multi::{Kind, Role};
        assert!(crate::security::register_secret(KNOWN_SECRET));
        let args = serde_json::json!({"ticket_id": "T-601", "to": "kwame@gmail.com"});
        let mut made_up = vec!["", "get_tickets", "GET_TICKET", "kwame@gmail.com", "call +44 20 7946 0958"];
        made_up.extend(["ｇｅｔ_ｔｉｃｋｅｔ", "get\u{200B}_ticket", crate::security::SIMULATED_SECRET, KNOWN_SECRET]);
        // a gate's tool names (the help desk's here), as its `tool_name` gives them, and names
        // no gate serves
        let served = |name: &str| crate::tools::TOOL_NAMES.iter().copied().find(|n| *n == name);
        let mut names: Vec<&str> = crate::tools::TOOL_NAMES.to_vec();
        names.extend(&made_up);
        let mut cases: Vec<Case> = Vec::new();
        for name in names.iter().copied() {
            let (a, b) = (args.clone(), args.clone());
            let known = served(name);
            cases.push((Box::new(move |t: &mut Trace| t.add_tool(2, "ok", name, &a)), format!("tool {name}")));
            cases.push((
                Box::new(move |t: &mut Trace| t.add_gate_tool(2, "ok", name, known, &b)),
                format!("tool {name}"),
            ));
            for action in ["call", "finish"] {
                cases.push((
                    Box::new(move |t: &mut Trace| t.add_check(2, "ok", action, name, known)),
                    format!("{action} {name}"),
                ));
                // a known name that is not the tool's is no licence to skip the redactor
                cases.push((
                    Box::new(move |t: &mut Trace| t.add_check(2, "ok", action, name, Some("get_ticket"))),
                    format!("{action} {name}"),
                ));
            }
        }
        for status in ["running", "awaiting_approval", "done", "stopped"] {
            cases.push((
                Box::new(move |t: &mut Trace| t.add_known(3, TraceKind::Stop, "done", &["status=", status])),
                format!("status={status}"),
            ));
        }
        for pieces in [&[][..], &["remember"], &[KNOWN_SECRET], &["key ", KNOWN_SECRET, " end"]] {
            cases.push((
                Box::new(move |t: &mut Trace| t.add_known(1, TraceKind::Memory, "ok", pieces)),
                pieces.concat(),
            ));
        }
        for (role, reason) in Role::ALL.iter().zip(StopReason::ALL.iter().cycle()) {
            cases.push((
                Box::new(move |t: &mut Trace| {
                    t.add_known(4, TraceKind::Stop, "role_stopped", &[role.as_str(), ": ", reason.as_str()])
                }),
                format!("{role}: {reason}"),
            ));
        }
        for (n, kind) in [1, 99_999, 100_000, 1_234_567_890, usize::MAX].into_iter().zip(Kind::ALL.iter().cycle()) {
            let tail = [" ", "researcher", "->", "reviewer", " ", kind.as_str()];
            cases.push((
                Box::new(move |t: &mut Trace| t.add_counted(1, TraceKind::Message, "ok", "m", n, &tail)),
                format!("m{n}{}", tail.concat()),
            ));
        }
        let long: &'static str = "a constant longer than the sixty characters a line keeps, with ünïcödé";
        cases.push((
            Box::new(move |t: &mut Trace| t.add_known(1, TraceKind::Plan, "ok", &[long, long])),
            [long, long].concat(),
        ));
        for (add, text) in &cases {
            let (lines, events) = traced(|t| add(t));
            let kind = lines[0].kind;
            let (code, args_json) = (lines[0].code.clone(), lines[0].args.clone());
            let (reference, reference_events) = traced(|t| {
                let detail = text.strip_prefix("tool ").filter(|_| kind == TraceKind::Tool).unwrap_or(text);
                t.push(lines[0].step, kind, code, detail, args_json.clone());
            });
            assert_eq!(serde_json::to_string(&lines).unwrap(), serde_json::to_string(&reference).unwrap(), "{text:?}");
            assert_eq!(events, reference_events, "{text:?}");
            assert_eq!(events.len(), 1, "{text:?}");
            if kind == TraceKind::Tool {
                let expected = args_line(&args);
                assert_eq!(lines[0].args.as_deref(), Some(expected.as_str()));
            }
        }
        // the registered secret is hidden on the known path too
        let (lines, _) = traced(|t| t.add_known(1, TraceKind::Memory, "ok", &["key ", KNOWN_SECRET, " end"]));
        assert_eq!(lines[0].detail, "key [secret] end");
        let (lines, _) = traced(|t| t.add_tool(1, "ok", "kwame@gmail.com", &args));
        assert_eq!(lines[0].detail, "[email]");
    }

    /// The form of a trace line before details became [`CompactString`]s.
    #[derive(Serialize)]
    struct StringLine<'a> {
        step: u32,
        kind: TraceKind,
        code: &'a str,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        args: Option<String>,
    }

    #[test]
    fn inline_details_serialise_and_read_back_as_the_string_ones() {
        let corpus = [
            "",
            "remember",
            "call get_ticket",
            "exactly twenty-four byte",
            "exactly twenty-five bytes",
            "é \"quoted\" \\ back\nslash \u{1F600}",
            "\u{0}\u{1f} control and tab\t",
            "ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé",
            "kwame@gmail.com wrote {\"to\": \"x\"}",
        ];
        let mut t = Trace::new("r1");
        for (i, text) in corpus.iter().enumerate() {
            t.add(1, TraceKind::Check, "ok", text);
            t.add_tool(2, "ok", text, &serde_json::json!({ "k": text }));
            for line in &t.lines[2 * i..] {
                let old = StringLine {
                    step: line.step,
                    kind: line.kind,
                    code: &line.code,
                    detail: clip(&redact(text), DETAIL_CHARS).to_string(),
                    args: line.args.as_deref().map(str::to_string),
                };
                let json = serde_json::to_string(line).unwrap();
                assert_eq!(json, serde_json::to_string(&old).unwrap(), "{text:?}");
                let back: TraceLine = serde_json::from_str(&json).unwrap();
                assert_eq!(&back, line);
            }
            let expected = args_line(&serde_json::json!({ "k": text }));
            assert_eq!(t.lines[2 * i + 1].args.as_deref(), Some(expected.as_str()));
        }
        let unknown = r#"{"step":1,"kind":"check","code":"ok","detail":"x","extra":1}"#;
        assert!(serde_json::from_str::<TraceLine>(unknown).is_err(), "unknown fields are still rejected");
    }
}
