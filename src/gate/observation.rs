//! [`Observation`]: what a run saw, one per tool call or refused proposal. It sits with
//! the gate because a gate outcome is where it comes from; memory and the loop read it.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use crate::tools::{Environment, RecordFact, helpdesk_fact};

/// What came back from a tool or a check. Its text is untrusted data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// `o1`, `o2`, … in order.
    pub(crate) id: CompactString,
    /// The step it was made in.
    pub step: u32,
    /// The tool (or `rejected` for a refused proposal).
    pub(crate) tool: CompactString,
    /// True when the tool succeeded.
    pub ok: bool,
    /// Result text, clipped.
    pub text: String,
    /// The fact the run's environment read in the whole result when it came back (before
    /// the text was clipped); `None` when none was read then (a refusal, a failure, a result
    /// stating no fact, an observation made with [`Observation::new`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fact: Option<RecordFact>,
}

impl Observation {
    /// An observation: `id` (`o1`, …) made at `step` by `tool`, with its result text.
    pub fn new(id: &str, step: u32, tool: &str, ok: bool, text: String) -> Self {
        Self { id: id.into(), step, tool: tool.into(), ok, text, fact: None }
    }

    /// This observation with `fact`, what the environment read in the whole result.
    pub fn with_fact(mut self, fact: Option<RecordFact>) -> Self {
        self.fact = fact;
        self
    }

    /// `o1`, `o2`, … in order.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool (or `rejected` for a refused proposal).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The fact this observation states: the one read in the whole result when it came
    /// back, else the one `env` (the help desk when `None`) reads in its text. Claim support
    /// and memory ask here, so a result longer than its clipped text keeps its fact.
    pub(crate) fn fact_in(&self, env: Option<&dyn Environment>) -> Option<RecordFact> {
        match (&self.fact, env) {
            (Some(fact), _) => Some(fact.clone()),
            (None, Some(env)) => env.fact(&self.tool, &self.text),
            (None, None) => helpdesk_fact(&self.tool, &self.text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::FactKind;
    use crate::world::{World, WorldData};
    use std::sync::Arc;

    fn desk() -> World {
        World::new(Arc::new(WorldData::bundled().unwrap()))
    }

    #[test]
    fn a_kept_fact_is_the_one_read_whatever_the_text_says_and_without_one_the_text_is_read() {
        let text = r#"{"id":"T-601","owner":"kwame","status":"open"}"#.to_string();
        let desk = desk();
        let read = Observation::new("o1", 1, "get_ticket", true, text.clone());
        assert_eq!(read.fact_in(Some(&desk)).map(|f| f.text().to_string()).as_deref(), Some("T-601 status is open"));
        // the fact read in the whole result wins over whatever its clipped text states
        let kept = RecordFact::new("T-601", " status is ", "closed", FactKind::State, Some("ticket"));
        let clipped =
            Observation::new("o1", 1, "get_ticket", true, text[..20].to_string()).with_fact(Some(kept.clone()));
        assert_eq!(clipped.fact_in(Some(&desk)), Some(kept));
        assert_eq!(Observation::new("o1", 1, "get_ticket", true, text[..20].to_string()).fact_in(Some(&desk)), None);
    }

    #[test]
    fn an_observation_keeps_its_fact_through_its_json_and_one_written_before_facts_reads_without() {
        let kept = RecordFact::new("T-601", " status is ", "open", FactKind::State, Some("ticket"));
        let obs = Observation::new("o1", 1, "get_ticket", true, "{".into()).with_fact(Some(kept));
        let json = serde_json::to_string(&obs).unwrap();
        let back: Observation = serde_json::from_str(&json).unwrap();
        assert_eq!(back, obs);
        assert_eq!(back.fact.as_ref().and_then(RecordFact::memory_key).as_deref(), Some("ticket-t-601"));
        // without a fact, nothing is written for it: the form earlier checkpoints hold
        let plain = Observation::new("o2", 1, "get_ticket", true, "x".into());
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("fact"), "{json}");
        assert_eq!(serde_json::from_str::<Observation>(&json).unwrap(), plain);
        // a fact with a member it does not declare is refused, as every stored type is
        let odd = r#"{"id":"o1","step":1,"tool":"t","ok":true,"text":"x","fact":{"text":"a is b","record_len":1,"value_at":5,"kind":"state","kept_as":null,"extra":1}}"#;
        assert!(serde_json::from_str::<Observation>(odd).is_err());
    }
}
