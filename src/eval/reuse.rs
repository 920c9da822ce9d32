//! Reuse in row files: what a row may take from shared files instead of repeating it, and
//! a row crossed with several defense configurations.
//!
//! - `world_file`: a JSON file with the records of a row's `world` (`users`, `tickets`,
//!   `documents`), in place of the inline block.
//! - `attack.attacks_file`: an attacks file (the catalog's format, `transforms` lists
//!   included; the file `suite --matrix --attacks` reads) in which `attack.payload` (an id)
//!   is looked up, in place of the bundled catalog or a payload written out.
//! - `defenses` as a list: one run per entry, each with the id `ROW@LABEL` (the label is
//!   the entry's `name`, or its settings such as `filter=off,scopes=wide`, or `defaults`),
//!   the entry's settings as the row's defenses and the entry's `expect` (or the row's)
//!   as its expectation.
//!
//! Paths are relative to the rows file's folder; each file is read and checked once per
//! table, however many rows name it. Every problem is a [`ScenarioError::Row`] naming the
//! row's file, line and field (`world_file`, `attack.attacks_file`, `attack.payload`,
//! `defenses[1].filter`). A row using none of this is read exactly as before.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::rows::WorldPatch;
use crate::lab::{Attack, ScenarioError, parse_catalog};

/// Most bytes of a shared file a row names.
pub const MAX_SHARED_FILE_BYTES: u64 = 16 << 20;

/// The order of a derived label's settings.
const DEFENSE_KEYS: [&str; 4] = ["filter", "scopes", "loop_check", "approval"];

/// The shared files of one table: where relative paths start, and each file read once.
#[derive(Debug)]
pub struct RowFiles {
    dir: Option<PathBuf>,
    worlds: HashMap<PathBuf, Result<Value, String>>,
    catalogs: HashMap<PathBuf, Result<Arc<[Attack]>, String>>,
}

impl RowFiles {
    /// Files relative to `dir` (the rows file's folder).
    pub fn in_dir(dir: &Path) -> Self {
        Self { dir: Some(dir.to_path_buf()), worlds: HashMap::new(), catalogs: HashMap::new() }
    }

    /// No folder: a table given as text (a row naming a file is refused).
    pub fn none() -> Self {
        Self { dir: None, worlds: HashMap::new(), catalogs: HashMap::new() }
    }

    fn resolve(&self, name: &str) -> Result<PathBuf, String> {
        let dir = self.dir.as_ref().ok_or("this table was not read from a file, so it names no other file")?;
        if name.trim().is_empty() {
            return Err("must be a path".into());
        }
        Ok(dir.join(name))
    }

    fn world(&mut self, name: &str) -> Result<Value, String> {
        let path = self.resolve(name)?;
        self.worlds
            .entry(path.clone())
            .or_insert_with(|| {
                let text = read_shared(&path)?;
                let de = &mut serde_json::Deserializer::from_str(&text);
                let patch: WorldPatch = serde_path_to_error::deserialize(de).map_err(|e| {
                    let at = e.path().to_string();
                    let inner = e.into_inner();
                    let syntax = matches!(
                        inner.classify(),
                        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                    );
                    let mut message = inner.to_string();
                    if let Some(i) = message.rfind(" at line ") {
                        message.truncate(i);
                    }
                    match at.as_str() {
                        _ if syntax => format!("{}: not valid JSON: {message}", path.display()),
                        "" | "." | "?" => format!("{}: {message}", path.display()),
                        _ => format!("{}: `{at}`: {message}", path.display()),
                    }
                })?;
                serde_json::to_value(patch).map_err(|e| e.to_string())
            })
            .clone()
    }

    fn catalog(&mut self, name: &str) -> Result<Arc<[Attack]>, String> {
        let path = self.resolve(name)?;
        self.catalogs
            .entry(path.clone())
            .or_insert_with(|| {
                let text = read_shared(&path)?;
                parse_catalog(&text, &path.display().to_string()).map(Arc::from).map_err(|e| e.to_string())
            })
            .clone()
    }
}

/// A shared file's text: a regular file of at most [`MAX_SHARED_FILE_BYTES`].
fn read_shared(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_SHARED_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_SHARED_FILE_BYTES {
        return Err(format!("{shown}: larger than {MAX_SHARED_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8 text"))
}

/// One row a line stands for once its shared files are read and its defense list crossed.
#[derive(Debug)]
pub(crate) struct Expanded {
    /// The row as the row parsers read it.
    pub text: String,
    /// The id it runs under, when derived (`m01@filter=off`).
    pub id: Option<String>,
    /// Field prefixes to rename in an error (`defenses` → `defenses[1]`).
    pub renames: Vec<(String, String)>,
}

impl Expanded {
    /// `e` with its field renamed as this row's were.
    pub(crate) fn rename(&self, e: ScenarioError) -> ScenarioError {
        match e {
            ScenarioError::Row { file, line, field, message } => {
                let field = self
                    .renames
                    .iter()
                    .find(|(from, _)| {
                        field == *from
                            || field.starts_with(&format!("{from}."))
                            || field.starts_with(&format!("{from}["))
                    })
                    .map_or(field.clone(), |(from, to)| format!("{to}{}", &field[from.len()..]));
                ScenarioError::Row { file, line, field, message }
            }
            other => other,
        }
    }
}

/// The rows one line stands for: the line itself when it uses none of the fields above,
/// else the line with its files read in and one row per entry of a `defenses` list.
///
/// # Errors
/// [`ScenarioError::Row`] naming the field of the first problem.
pub(crate) fn expand(
    text: &str,
    file: &str,
    line: usize,
    files: &mut RowFiles,
) -> Result<Vec<Expanded>, ScenarioError> {
    let err =
        |field: &str, message: String| ScenarioError::Row { file: file.into(), line, field: field.into(), message };
    let plain = || Ok(vec![Expanded { text: text.to_string(), id: None, renames: Vec::new() }]);
    if text.len() > crate::lab::MAX_ROW_BYTES {
        return plain();
    }
    let Ok(Value::Object(mut row)) = serde_json::from_str::<Value>(text) else {
        return plain();
    };
    let uses_files = row.contains_key("world_file")
        || row.get("attack").and_then(Value::as_object).is_some_and(|a| a.contains_key("attacks_file"));
    let crossed = row.get("defenses").is_some_and(Value::is_array);
    if !uses_files && !crossed {
        return plain();
    }
    let mut renames = Vec::new();
    if let Some(name) = row.remove("world_file") {
        let name = name.as_str().ok_or_else(|| err("world_file", "must be a path (a string)".into()))?;
        if row.contains_key("world") {
            return Err(err("world_file", "give `world` or `world_file`, not both".into()));
        }
        let world = files.world(name).map_err(|m| err("world_file", m))?;
        row.insert("world".into(), world);
        renames.push(("world".to_string(), "world_file".to_string()));
    }
    if let Some(Value::Object(attack)) = row.get_mut("attack")
        && let Some(name) = attack.remove("attacks_file")
    {
        let name = name.as_str().ok_or_else(|| err("attack.attacks_file", "must be a path (a string)".into()))?;
        let id = match attack.get("payload") {
            Some(Value::String(id)) => id.clone(),
            Some(_) => {
                let message = "give a payload written out or the id of one in `attacks_file`, not both".into();
                return Err(err("attack.attacks_file", message));
            }
            None => return Err(err("attack.payload", "the id of a payload in `attacks_file`".into())),
        };
        let catalog = files.catalog(name).map_err(|m| err("attack.attacks_file", m))?;
        let found = catalog
            .iter()
            .find(|a| a.id == id)
            .ok_or_else(|| err("attack.payload", format!("no attack {id:?} in {name}")))?;
        let value = serde_json::to_value(found).map_err(|e| err("attack.payload", e.to_string()))?;
        attack.insert("payload".into(), value);
    }
    let Some(Value::Array(list)) = row.get("defenses").cloned() else {
        return Ok(vec![Expanded { text: Value::Object(row).to_string(), id: None, renames }]);
    };
    let base = row.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    if list.is_empty() {
        return Err(err("defenses", "a list of configurations must hold at least one".into()));
    }
    let mut out: Vec<Expanded> = Vec::with_capacity(list.len());
    for (i, entry) in list.into_iter().enumerate() {
        let at = format!("defenses[{i}]");
        let Value::Object(mut settings) = entry else {
            return Err(err(&at, "each entry is an object of settings (and its own `expect`)".into()));
        };
        let expect = settings.remove("expect");
        let label = match settings.remove("name") {
            Some(Value::String(n))
                if !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_=,".contains(c)) =>
            {
                n
            }
            Some(_) => return Err(err(&format!("{at}.name"), "must be 1 or more of letters, digits, - _ = ,".into())),
            None => label_of(&settings),
        };
        let id = format!("{base}@{label}");
        if let Some(j) = out.iter().position(|e| e.id.as_deref() == Some(id.as_str())) {
            return Err(err(&at, format!("the same label {label:?} as defenses[{j}] (give one a `name`)")));
        }
        let mut one: Map<String, Value> = row.clone();
        one.insert("defenses".into(), Value::Object(settings));
        let mut names = renames.clone();
        names.push(("defenses".into(), at.clone()));
        if let Some(e) = expect {
            one.insert("expect".into(), e);
            names.push(("expect".into(), format!("{at}.expect")));
        }
        out.push(Expanded { text: Value::Object(one).to_string(), id: Some(id), renames: names });
    }
    Ok(out)
}

/// The run id of a row id: `run-` and the id in lowercase, `_` (and a derived id's `@`,
/// `=` and `,`) as `-`, at most 40 characters (what a run id may be).
pub(crate) fn run_id_of(id: &str) -> String {
    let mut run: String = format!("run-{id}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    run.truncate(40);
    run
}

/// `filter=off,scopes=wide` from a configuration's settings, in a fixed order; `defaults`
/// when it sets nothing.
fn label_of(settings: &Map<String, Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut keys: Vec<&String> = settings.keys().collect();
    keys.sort_by_key(|k| DEFENSE_KEYS.iter().position(|d| d == k).unwrap_or(DEFENSE_KEYS.len()));
    for k in keys {
        let v = settings.get(k).and_then(Value::as_str).unwrap_or("?");
        parts.push(format!("{k}={v}"));
    }
    if parts.is_empty() { "defaults".into() } else { parts.join(",") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_defense_list_becomes_one_row_per_entry_with_derived_ids() {
        let line = r#"{"id": "m01", "defenses": [{}, {"approval": "off", "filter": "off", "expect": {"x": 1}}, {"name": "open", "scopes": "wide"}], "expect": {"y": 2}}"#;
        let rows = expand(line, "f", 1, &mut RowFiles::none()).unwrap();
        let ids: Vec<_> = rows.iter().map(|r| r.id.clone().unwrap()).collect();
        assert_eq!(ids, ["m01@defaults", "m01@filter=off,approval=off", "m01@open"]);
        assert!(rows[1].text.contains(r#""expect":{"x":1}"#));
        assert!(rows[2].text.contains(r#""expect":{"y":2}"#));
        let e = rows[1].rename(ScenarioError::Row {
            file: "f".into(),
            line: 1,
            field: "defenses.filter".into(),
            message: "m".into(),
        });
        assert!(e.to_string().contains("field `defenses[1].filter`"), "{e}");
    }

    #[test]
    fn run_ids_stay_as_they_were_and_derived_ids_become_valid_run_ids() {
        assert_eq!(run_id_of("m01"), "run-m01");
        assert_eq!(run_id_of("S_1-x"), "run-s-1-x");
        assert_eq!(run_id_of("m01@filter=off,scopes=wide"), "run-m01-filter-off-scopes-wide");
        assert_eq!(run_id_of(&format!("{}@filter=off,scopes=wide,approval=off", "a".repeat(32))).len(), 40);
    }

    #[test]
    fn a_table_given_as_text_names_no_file() {
        let line = r#"{"id": "x", "world_file": "w.json"}"#;
        let e = expand(line, "rows.jsonl", 3, &mut RowFiles::none()).unwrap_err().to_string();
        assert!(e.starts_with("rows.jsonl:3: field `world_file`: "), "{e}");
    }
}
