//! How `rolegate run --design multi` prints a three-role run: its envelope log (every
//! accepted envelope, every refusal, every refused tool call), its outcome and each role's
//! usage. The run itself goes through the design dispatch (`design.rs`).

use rolegate::multi::MultiRun;

/// The log of a finished run, in the coordinator's order, then the outcome.
pub fn log(run: &MultiRun) -> Vec<String> {
    let mut lines = Vec::new();
    let mut accepted = run.messages.iter();
    if let Some(coordinator) = run.traces.first() {
        for l in &coordinator.lines {
            if l.code == "ok" && l.kind == rolegate::agent::TraceKind::Message {
                if let Some(env) = accepted.next() {
                    lines.push(format!("accepted {}", env.log_line()));
                    continue;
                }
            }
            lines.push(format!("{:<8} {} {}", l.kind.as_str(), l.code, l.detail).trim_end().to_string());
        }
    }
    for d in &run.denied {
        lines.push(format!("denied   {d}"));
    }
    let tools: Vec<String> = run.tools.iter().map(|(r, t)| format!("{r} [{}]", t.join(", "))).collect();
    lines.push(format!(
        "outcome: {} | messages {} | rejected {} | denied {} | role calls {} | rounds {} | tools {} | e-mails {}",
        run.reason,
        run.messages.len(),
        run.rejected.len(),
        run.denied.len(),
        run.role_calls,
        run.rounds,
        tools.join(", "),
        run.emails
    ));
    for (role, u) in &run.usage {
        lines.push(rolegate::design::usage_line(&role.to_string(), u));
    }
    if let Some(answer) = &run.answer {
        lines.push(rolegate::design::answer_line(answer));
    }
    if let Some(f) = &run.failed {
        lines.push(format!("failed role: {} ({})", f.role, f.detail));
    }
    lines
}
