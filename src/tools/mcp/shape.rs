//! The arguments an MCP tool accepts, read from the JSON Schema its server declares, and the
//! check every proposed call passes before the gate sends it.
//!
//! A server's schema is untrusted input, so only a small, closed part of JSON Schema is
//! read: an object, its `properties` (each with a `type`, a list of types, an `anyOf` or
//! `oneOf` of typed schemas, an `enum`), and `required`. Whatever else a property says is
//! not checked here, and the property then takes any JSON value of bounded size. The check
//! is stricter than the schema in one way: a field the schema does not declare is refused
//! even where the schema would allow it (`additionalProperties`), as for every built-in tool.

use serde_json::{Map, Value};

/// Longest string in one argument, in characters.
pub(crate) const MAX_STRING_CHARS: usize = 4_000;
/// Most elements of one array argument.
pub(crate) const MAX_ARRAY_ITEMS: usize = 200;

/// A JSON type a property may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Null,
}

impl Kind {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            "null" => Self::Null,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
            Self::Null => "null",
        }
    }

    fn fits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Number => value.is_number(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value.is_array(),
            Self::Object => value.is_object(),
            Self::Null => value.is_null(),
        }
    }
}

/// One declared argument.
#[derive(Clone, Debug, PartialEq)]
struct Field {
    name: String,
    /// The types it may take; empty means any.
    kinds: Vec<Kind>,
    /// The values it may take, when the schema lists them.
    choices: Option<Vec<Value>>,
    required: bool,
}

/// The declared arguments of one tool.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shape {
    fields: Vec<Field>,
}

/// The types one property schema names (empty: any).
fn kinds_of(schema: &Map<String, Value>) -> Vec<Kind> {
    let mut kinds = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => kinds.extend(Kind::from_name(t)),
        Some(Value::Array(ts)) => kinds.extend(ts.iter().filter_map(Value::as_str).filter_map(Kind::from_name)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(key) {
            let of: Vec<Vec<Kind>> = options.iter().filter_map(Value::as_object).map(kinds_of).collect();
            // an option without a type takes anything, so the union does too
            if of.len() != options.len() || of.iter().any(Vec::is_empty) {
                return Vec::new();
            }
            kinds.extend(of.into_iter().flatten());
        }
    }
    kinds.dedup();
    kinds
}

impl Shape {
    /// Reads a tool's input schema.
    ///
    /// # Errors
    /// A message when the schema is not an object schema with an object of properties.
    pub(crate) fn from_schema(schema: &Map<String, Value>) -> Result<Self, String> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err("the input schema is not of type object".into());
        }
        let properties = match schema.get("properties") {
            None => return Ok(Self { fields: Vec::new() }),
            Some(Value::Object(p)) => p,
            Some(_) => return Err("the input schema's properties are not an object".into()),
        };
        let required: Vec<&str> = match schema.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err("the input schema's required is not a list".into()),
        };
        if let Some(missing) = required.iter().find(|r| !properties.contains_key(**r)) {
            return Err(format!("`{missing}` is required but not declared"));
        }
        let mut fields = Vec::with_capacity(properties.len());
        for (name, property) in properties {
            let Value::Object(property) = property else {
                return Err(format!("the schema of `{name}` is not an object"));
            };
            fields.push(Field {
                name: name.clone(),
                kinds: kinds_of(property),
                choices: property.get("enum").and_then(Value::as_array).cloned(),
                required: required.contains(&name.as_str()),
            });
        }
        Ok(Self { fields })
    }

    /// Checks a call's arguments: an object with only declared fields, every required one
    /// present, each of a declared type and, where listed, one of the listed values, and
    /// no string longer than [`MAX_STRING_CHARS`] or array longer than [`MAX_ARRAY_ITEMS`]
    /// anywhere inside.
    ///
    /// # Errors
    /// A message naming the first field that does not fit.
    pub(crate) fn check(&self, arguments: &Value) -> Result<Map<String, Value>, String> {
        let Value::Object(given) = arguments else { return Err("arguments must be an object".into()) };
        if let Some(extra) = given.keys().find(|k| !self.fields.iter().any(|f| &f.name == *k)) {
            return Err(format!("unknown field `{extra}`"));
        }
        for field in &self.fields {
            let Some(value) = given.get(&field.name) else {
                if field.required {
                    return Err(format!("`{}` is required", field.name));
                }
                continue;
            };
            if !field.kinds.is_empty() && !field.kinds.iter().any(|k| k.fits(value)) {
                let names: Vec<&str> = field.kinds.iter().map(|k| k.name()).collect();
                return Err(format!("`{}` must be {}", field.name, names.join(" or ")));
            }
            if field.choices.as_ref().is_some_and(|c| !c.contains(value)) {
                return Err(format!("`{}` is not one of the listed values", field.name));
            }
            bounded(value).map_err(|why| format!("`{}`: {why}", field.name))?;
        }
        Ok(given.clone())
    }
}

/// Refuses a value holding a string or an array past the bounds, at any depth.
fn bounded(value: &Value) -> Result<(), String> {
    match value {
        Value::String(s) if s.chars().count() > MAX_STRING_CHARS => {
            Err(format!("a string is longer than {MAX_STRING_CHARS} characters"))
        }
        Value::Array(items) if items.len() > MAX_ARRAY_ITEMS => {
            Err(format!("a list has more than {MAX_ARRAY_ITEMS} items"))
        }
        Value::Array(items) => items.iter().try_for_each(bounded),
        Value::Object(members) => members.values().try_for_each(bounded),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(schema: Value) -> Shape {
        Shape::from_schema(schema.as_object().unwrap()).unwrap()
    }

    #[test]
    fn declared_fields_are_typed_required_and_closed() {
        let s = shape(json!({
            "type": "object",
            "properties": {
                "note_id": {"type": "string"},
                "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "mode": {"type": "string", "enum": ["short", "long"]},
                "anything": {"description": "no type"}
            },
            "required": ["note_id"]
        }));
        assert!(s.check(&json!({"note_id": "n1"})).is_ok());
        assert!(s.check(&json!({"note_id": "n1", "count": null, "mode": "long", "anything": [1]})).is_ok());
        assert_eq!(s.check(&json!({})).unwrap_err(), "`note_id` is required");
        assert_eq!(s.check(&json!({"note_id": 7})).unwrap_err(), "`note_id` must be string");
        assert_eq!(s.check(&json!({"note_id": "n1", "count": 1.5})).unwrap_err(), "`count` must be integer or null");
        assert_eq!(
            s.check(&json!({"note_id": "n1", "mode": "loud"})).unwrap_err(),
            "`mode` is not one of the listed values"
        );
        assert_eq!(s.check(&json!({"note_id": "n1", "cc": "x"})).unwrap_err(), "unknown field `cc`");
        assert_eq!(s.check(&json!(["n1"])).unwrap_err(), "arguments must be an object");
    }

    #[test]
    fn sizes_are_bounded_at_any_depth() {
        let s = shape(json!({"type": "object", "properties": {"x": {}}}));
        let long = "a".repeat(MAX_STRING_CHARS + 1);
        assert!(s.check(&json!({"x": {"deep": [long]}})).unwrap_err().contains("longer than"));
        let many: Vec<u8> = vec![0; MAX_ARRAY_ITEMS + 1];
        assert!(s.check(&json!({"x": many})).unwrap_err().contains("more than"));
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_is_refused() {
        for bad in [
            json!({"type": "string"}),
            json!({"type": "object", "properties": []}),
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            json!({"type": "object", "properties": {"a": 3}}),
        ] {
            assert!(Shape::from_schema(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }
}
