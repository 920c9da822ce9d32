//! Tools added to one gate at run time, beside the built-in [`Registry`]: the way to put a
//! faulty tool (one that panics or never answers) under the gate in a test, and the shape
//! a deployment's own read tool would take.
//!
//! An added tool gets no way around the rules the built-in tools live by:
//! - it is reached only through the gate that holds it ([`ToolSet`] is the gate's, and the
//!   tool's future is awaited by the gate under its per-call timeout);
//! - the policy must list it in the task (the allowlist) and give it `read` access; with
//!   any other access the gate refuses it as `not_allowed`, so an added tool never parks,
//!   never needs an approval and can never send anything;
//! - its arguments are typed like every built-in tool's: an object with exactly the
//!   declared fields, each a non-empty string of at most [`MAX_FIELD_CHARS`] characters;
//! - its name cannot be a built-in tool's, so it cannot replace one.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::mcp::{McpServer, McpTool};
use super::{ArgError, Environment, McpArgs, Output, ToolArgs, ToolFailure, ToolSpec, str_schema};
use crate::future::BoxFuture;
use std::borrow::Cow;

/// Longest value of one argument field of an added tool, in characters.
pub(super) const MAX_FIELD_CHARS: usize = 200;

/// A tool added to a gate. Its call returns a future, which the gate awaits under its
/// per-call timeout and with a panic caught.
pub trait Tool: Send + Sync + fmt::Debug {
    /// The name models call it by: `[a-z][a-z0-9_]{0,39}`, not a built-in tool's name.
    fn name(&self) -> &'static str;
    /// One line a model is shown.
    fn description(&self) -> &'static str;
    /// The argument fields, every one required, every one a string.
    fn fields(&self) -> &'static [&'static str];
    /// Starts the call for `caller` with checked arguments; the future owns what it needs.
    fn call(&self, caller: &str, args: &AddedArgs) -> BoxFuture<'static, Result<Value, ToolFailure>>;
}

/// The checked arguments of an added tool: its declared fields, each with its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedArgs {
    /// The tool's name.
    pub tool: String,
    /// Field → value; exactly the declared fields.
    pub fields: BTreeMap<String, String>,
}

impl AddedArgs {
    /// The arguments as the JSON object they were checked from.
    pub fn to_value(&self) -> Value {
        json!(self.fields)
    }
}

/// Why a tool could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddToolError {
    /// The name is a built-in tool's or another added tool's.
    #[error("a tool named {0:?} exists already")]
    Taken(String),
    /// The name or the fields do not have the allowed shape.
    #[error("tool {0:?}: the name must be [a-z][a-z0-9_]{{0,39}} and the fields distinct, non-empty names")]
    BadShape(String),
}

fn good_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    (1..=40).contains(&name.len())
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Every tool one gate can run: its environment's and the tools added to it. Cloning
/// shares the environment and the added tools.
#[derive(Clone, Debug)]
pub(crate) struct ToolSet {
    /// What the gate's own tools act on.
    env: Arc<dyn Environment>,
    /// Added tools by name.
    added: BTreeMap<&'static str, Arc<dyn Tool>>,
    /// Tools of MCP servers by name (`<server>__<tool>`).
    mcp: BTreeMap<String, McpTool>,
}

/// A validated call, started: its result now, or a future the gate must wait for.
pub(crate) enum Started<'w> {
    /// A built-in tool ran (synchronously, in memory).
    Done(Result<Output<'w>, ToolFailure>),
    /// An added tool answers later.
    Waiting(BoxFuture<'static, Result<Value, ToolFailure>>),
}

impl ToolSet {
    /// The tools of `env` only.
    pub(crate) fn new(env: Arc<dyn Environment>) -> Self {
        Self { env, added: BTreeMap::new(), mcp: BTreeMap::new() }
    }

    /// What the gate's own tools act on.
    pub(crate) fn env(&self) -> &dyn Environment {
        self.env.as_ref()
    }

    /// Adds `tool`.
    ///
    /// # Errors
    /// [`AddToolError::Taken`] for a name in use; [`AddToolError::BadShape`] for a bad name
    /// or bad fields.
    pub(crate) fn add(&mut self, tool: Arc<dyn Tool>) -> Result<(), AddToolError> {
        let name = tool.name();
        let fields = tool.fields();
        let distinct = fields.iter().enumerate().all(|(i, f)| !f.is_empty() && !fields[..i].contains(f));
        if !good_name(name) || !distinct {
            return Err(AddToolError::BadShape(name.to_string()));
        }
        if self.env.tool_names().contains(&name) || self.added.contains_key(name) {
            return Err(AddToolError::Taken(name.to_string()));
        }
        self.added.insert(name, tool);
        Ok(())
    }

    /// Adds the checked tools of an MCP server.
    ///
    /// # Errors
    /// [`AddToolError::Taken`] when a name is in use (nothing is added then).
    pub(crate) fn add_mcp(&mut self, server: &McpServer) -> Result<(), AddToolError> {
        if let Some(taken) = server.tools().iter().find(|t| self.has(t.name())) {
            return Err(AddToolError::Taken(taken.name().to_string()));
        }
        for tool in server.tools() {
            self.mcp.insert(tool.name().to_string(), tool.clone());
        }
        Ok(())
    }

    /// True when a tool of this name exists (the environment's, added or from an MCP
    /// server).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.env.tool_names().contains(&name) || self.added.contains_key(name) || self.mcp.contains_key(name)
    }

    /// True when `name` is a tool of an MCP server.
    pub(crate) fn is_mcp(&self, name: &str) -> bool {
        self.mcp.contains_key(name)
    }

    /// The name of the tool called `name` (the environment's or added) as this set holds
    /// it.
    pub(crate) fn name_of(&self, name: &str) -> Option<&'static str> {
        let own = self.env.tool_names().iter().copied().find(|n| *n == name);
        own.or_else(|| self.added.get_key_value(name).map(|(n, _)| *n))
    }

    /// True when `name` is an added tool.
    pub(crate) fn is_added(&self, name: &str) -> bool {
        self.added.contains_key(name)
    }

    /// The spec of a tool, if it exists.
    pub(crate) fn spec(&self, name: &str) -> Option<ToolSpec> {
        if let Some(spec) = self.env.spec(name) {
            return Some(spec);
        }
        if let Some(tool) = self.mcp.get(name) {
            return Some(ToolSpec {
                name: Cow::Owned(tool.name().to_string()),
                description: Cow::Owned(tool.description().to_string()),
                parameters: tool.schema().clone(),
            });
        }
        let tool = self.added.get(name)?;
        Some(ToolSpec {
            name: Cow::Borrowed(tool.name()),
            description: Cow::Borrowed(tool.description()),
            parameters: Arc::new(str_schema(tool.fields())),
        })
    }

    /// Checks a call's arguments: the environment's rules for its tools, or an added tool's declared
    /// string fields (exactly those, each 1 to [`MAX_FIELD_CHARS`] characters).
    ///
    /// # Errors
    /// [`ArgError::UnknownTool`] or [`ArgError::Invalid`].
    pub(crate) fn validate(&self, name: &str, arguments: &Value) -> Result<ToolArgs, ArgError> {
        if let Some(tool) = self.mcp.get(name) {
            let arguments = tool.check(arguments).map_err(ArgError::Invalid)?;
            return Ok(ToolArgs::Mcp(McpArgs { tool: name.to_string(), arguments }));
        }
        let Some(tool) = self.added.get(name) else { return self.env.validate(name, arguments) };
        let obj = arguments.as_object().ok_or_else(|| ArgError::Invalid("arguments must be an object".into()))?;
        let declared = tool.fields();
        if let Some(extra) = obj.keys().find(|k| !declared.contains(&k.as_str())) {
            return Err(ArgError::Invalid(format!("unknown field `{extra}`")));
        }
        let mut fields = BTreeMap::new();
        for f in declared {
            let value = obj
                .get(*f)
                .and_then(Value::as_str)
                .ok_or_else(|| ArgError::Invalid(format!("`{f}` must be a string")))?;
            if value.trim().is_empty() || value.chars().count() > MAX_FIELD_CHARS {
                return Err(ArgError::Invalid(format!("`{f}` must be 1 to {MAX_FIELD_CHARS} characters")));
            }
            fields.insert((*f).to_string(), value.to_string());
        }
        Ok(ToolArgs::Added(AddedArgs { tool: name.to_string(), fields }))
    }

    /// Runs a validated call of the environment's now; an added tool's call is started
    /// and answers through the gate only.
    pub(crate) fn start(&self, caller: &str, args: &ToolArgs) -> Started<'_> {
        match args {
            ToolArgs::Added(a) => match self.added.get(a.tool.as_str()) {
                Some(tool) => Started::Waiting(tool.call(caller, a)),
                None => Started::Done(self.env.run(caller, args)),
            },
            ToolArgs::Mcp(a) => match self.mcp.get(a.tool.as_str()) {
                Some(tool) => Started::Waiting(tool.call(a.arguments.clone())),
                None => Started::Done(self.env.run(caller, args)),
            },
            _ => Started::Done(self.env.run(caller, args)),
        }
    }
}
