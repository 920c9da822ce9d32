//! The hot path's shared data (issue 18): a tool's schema is one value that every request
//! showing the tool shares, and what a model is shown of it is the same as before.

use rolegate::gate::GateOutcome;
use rolegate::tools::{Registry, TOOL_NAMES};
use serde_json::json;
use std::sync::Arc;

#[test]
fn every_request_shares_one_schema_per_tool_and_serialises_it_whole() {
    for name in TOOL_NAMES {
        let (a, b) = (Registry.spec(name).unwrap(), Registry.spec(name).unwrap());
        assert!(Arc::ptr_eq(&a.parameters, &b.parameters), "{name}: the schema was copied");
        let shown = serde_json::to_value(&a).unwrap();
        assert_eq!(shown["parameters"], *a.parameters, "{name}");
        assert_eq!(shown["parameters"]["type"], "object", "{name}");
        assert_eq!(shown["name"], name);
    }
}

#[test]
fn an_observation_is_the_compact_json_text_of_the_result() {
    let data =
        json!({"id": "T-601", "text": "ünïcode \"quoted\" <b>&</b>\n\u{1F600}", "n": [1, 2.5, -3], "none": null});
    let outcome = GateOutcome::Ok(data.clone().into());
    let (ok, text) = outcome.observation();
    assert!(ok);
    assert_eq!(text, data.to_string());
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), data);
}
