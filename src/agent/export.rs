//! Structured trace export: a `tracing` layer that turns every decision event the crate
//! emits ([`Trace::add`](super::Trace::add) sends one per line, target
//! [`TRACE_TARGET`]) into one JSON line ([`TraceRecord`]) of a file.
//!
//! The layer does not trust what it receives: every string field is redacted again with
//! the rules memory uses ([`redact`]) and clipped, whoever emitted the event. Timing comes
//! from an injected [`Clock`](crate::cost::Clock) and is written only to the export, so
//! what a command prints stays the same byte for byte with or without it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::cost::SharedClock;
use crate::security::{clip, redact};

/// The `tracing` target of decision events.
pub const TRACE_TARGET: &str = "rolegate::trace";

/// Most characters of an exported string field (after redaction) other than the detail
/// and the arguments.
pub const EXPORT_FIELD_CHARS: usize = 200;

/// Most characters of an exported detail or argument list (after redaction): the export
/// keeps a decision's whole detail (the printed trace clips it at 60); this bound only
/// stops a runaway text from filling the file.
pub const EXPORT_DETAIL_CHARS: usize = 16 * 1024;

/// Errors of the trace export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceExportError {
    /// The file could not be created or written.
    #[error("trace export: {0}")]
    Io(#[from] std::io::Error),
    /// Another global `tracing` subscriber is already installed in this process.
    #[error("trace export: a tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// One line of a trace file: one decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRecord {
    /// 1, 2, … in the order the decisions were made, over the whole file.
    pub seq: u64,
    /// The run the decision belongs to.
    pub run_id: String,
    /// The role that made it, for multi-agent runs.
    pub role: Option<String>,
    /// The step.
    pub step: u64,
    /// The kind (`model`, `check`, `tool`, `memory`, `human`, `stop`, `message`, `plan`).
    pub kind: String,
    /// The code (`ok` or a named rejection or reason).
    pub code: String,
    /// The whole detail, redacted again by the exporter (not clipped like the printed
    /// trace).
    pub detail: String,
    /// A tool line's arguments as JSON, redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
    /// Microseconds on the export's clock since the export started.
    pub elapsed_us: u64,
}

/// Where lines go; shared by the layer and the handle.
struct Sink {
    /// The writer; owned here and dropped with the last handle or layer.
    out: Box<dyn Write + Send>,
    /// Lines written so far.
    lines: u64,
    /// The first write error; later lines are dropped.
    error: Option<std::io::Error>,
}

/// The handle on an export: says how many lines were written and flushes the file.
#[derive(Clone)]
pub struct TraceExport {
    sink: Arc<Mutex<Sink>>,
}

impl fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceExport").finish_non_exhaustive()
    }
}

/// The `tracing` layer that writes [`TraceRecord`] lines.
pub struct JsonTraceLayer {
    sink: Arc<Mutex<Sink>>,
    clock: SharedClock,
    start: std::time::Duration,
}

impl fmt::Debug for JsonTraceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonTraceLayer").finish_non_exhaustive()
    }
}

impl TraceExport {
    /// An export writing to `out`, timed by `clock`, and the layer to install.
    pub fn new(out: impl Write + Send + 'static, clock: SharedClock) -> (Self, JsonTraceLayer) {
        let sink = Arc::new(Mutex::new(Sink { out: Box::new(out), lines: 0, error: None }));
        let start = clock.now();
        (Self { sink: sink.clone() }, JsonTraceLayer { sink, clock, start })
    }

    /// Creates (or truncates) `path` and installs the export as this process's global
    /// `tracing` subscriber, so decisions made on any thread are written.
    ///
    /// # Errors
    /// [`TraceExportError::Io`] when the file cannot be created;
    /// [`TraceExportError::AlreadyInstalled`] when a global subscriber exists.
    pub fn install_file(path: &Path, clock: SharedClock) -> Result<Self, TraceExportError> {
        let file = std::fs::File::create(path)?;
        let (export, layer) = Self::new(std::io::BufWriter::new(file), clock);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::set_global_default(subscriber).map_err(|_| TraceExportError::AlreadyInstalled)?;
        Ok(export)
    }

    /// Flushes the output and returns the number of lines written.
    ///
    /// # Errors
    /// The first write error, if any line could not be written.
    pub fn finish(&self) -> Result<u64, TraceExportError> {
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = sink.error.take() {
            return Err(e.into());
        }
        sink.out.flush()?;
        Ok(sink.lines)
    }
}

/// Collects the fields of one decision event.
#[derive(Default)]
struct Fields {
    run_id: String,
    role: String,
    step: u64,
    kind: String,
    code: String,
    detail: String,
    args: String,
}

impl Fields {
    fn set(&mut self, field: &Field, value: String) {
        match field.name() {
            "run" => self.run_id = value,
            "role" => self.role = value,
            "kind" => self.kind = value,
            "code" => self.code = value,
            "detail" => self.detail = value,
            "args" => self.args = value,
            "step" => self.step = value.parse().unwrap_or(0),
            _ => {}
        }
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "step" {
            self.step = value;
        } else {
            self.set(field, value.to_string());
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "step" {
            self.step = u64::try_from(value).unwrap_or(0);
        } else {
            self.set(field, value.to_string());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field, format!("{value:?}"));
    }
}

/// Redacts, then clips: an exported string never holds what memory would refuse.
fn clean(text: &str) -> String {
    clean_to(text, EXPORT_FIELD_CHARS)
}

/// Redacts, then clips to `chars`.
fn clean_to(text: &str, chars: usize) -> String {
    let red = redact(text);
    clip(&red, chars).to_string()
}

impl JsonTraceLayer {
    fn wanted(metadata: &Metadata<'_>) -> bool {
        metadata.target() == TRACE_TARGET && metadata.is_event()
    }
}

impl<S: Subscriber> Layer<S> for JsonTraceLayer {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if Self::wanted(metadata) { Interest::always() } else { Interest::never() }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        Self::wanted(metadata)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !Self::wanted(event.metadata()) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let elapsed = self.clock.now().saturating_sub(self.start);
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        if sink.error.is_some() {
            return;
        }
        let role = clean(&fields.role);
        let record = TraceRecord {
            seq: sink.lines + 1,
            run_id: clean(&fields.run_id),
            role: (!role.is_empty()).then_some(role),
            step: fields.step,
            kind: clean(&fields.kind),
            code: clean(&fields.code),
            detail: clean_to(&fields.detail, EXPORT_DETAIL_CHARS),
            args: (!fields.args.is_empty()).then(|| clean_to(&fields.args, EXPORT_DETAIL_CHARS)),
            elapsed_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        };
        let line = match serde_json::to_string(&record) {
            Ok(l) => l,
            Err(e) => {
                sink.error = Some(std::io::Error::other(e));
                return;
            }
        };
        match writeln!(sink.out, "{line}") {
            Ok(()) => sink.lines += 1,
            Err(e) => sink.error = Some(e),
        }
    }
}
