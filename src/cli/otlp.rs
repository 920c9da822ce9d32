//! `--otlp URL` and the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_SERVICE_NAME`: the library's spans
//! (`rolegate::spans`, with the decision lines as their events) exported over OTLP/HTTP
//! with protobuf bodies, through `tracing-opentelemetry` and `opentelemetry-otlp`.
//!
//! Every string that leaves (span names, attribute and event values, status texts) passes
//! through the redactor first, whoever put it there. Export runs on the SDK's own thread in
//! batches; the command flushes it on every exit, each export bounded by
//! [`EXPORT_TIMEOUT`] and the whole flush by [`SHUTDOWN_TIMEOUT`]. A collector that cannot
//! be reached costs a warning on stderr, never the command's exit code.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::Metadata;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, Filtered};

/// Most time one export request may take (connect, send, answer): the OTLP default.
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most time the flush at exit may take, whatever the collector does.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);
/// The service name when `OTEL_SERVICE_NAME` is not set.
pub(crate) const SERVICE_NAME: &str = "rolegate";

/// The traces URL to export to: `--otlp URL` (a base URL; `/v1/traces` is added unless the
/// URL already ends with it), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else
/// `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/traces`; `None` when none is given (no export).
pub(crate) fn endpoint(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let base = |url: &str| {
        let url = url.trim_end_matches('/');
        if url.ends_with("/v1/traces") { url.to_string() } else { format!("{url}/v1/traces") }
    };
    if let Some(url) = flag.filter(|u| !u.is_empty()) {
        return Some(base(url));
    }
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|u| base(&u)))
}

/// The first export error, kept for the warning at exit.
type Problem = Arc<Mutex<Option<String>>>;

/// The OTLP exporter behind the redactor: every string is redacted before it is encoded,
/// and the first failed export is remembered.
#[derive(Debug)]
struct Redacting<E> {
    inner: E,
    problem: Problem,
}

fn clean(text: &str) -> String {
    rolegate::security::redact(text).into_owned()
}

fn clean_value(value: &mut Value) {
    match value {
        Value::String(s) => *s = StringValue::from(clean(s.as_str())),
        Value::Array(Array::String(items)) => {
            for s in items.iter_mut() {
                *s = StringValue::from(clean(s.as_str()));
            }
        }
        _ => {}
    }
}

fn clean_attributes(attributes: &mut [KeyValue]) {
    for kv in attributes {
        clean_value(&mut kv.value);
    }
}

/// Redacts every string of `span`; `gen_ai.response.finish_reasons` becomes the string
/// array the conventions name (a `tracing` field can hold only one string).
fn clean_span(span: &mut SpanData) {
    span.name = clean(&span.name).into();
    for kv in &mut span.attributes {
        if kv.key.as_str() == "gen_ai.response.finish_reasons"
            && let Value::String(s) = &kv.value
        {
            kv.value = Value::Array(Array::String(vec![StringValue::from(s.as_str().to_string())]));
        }
    }
    clean_attributes(&mut span.attributes);
    for event in &mut span.events.events {
        event.name = clean(&event.name).into();
        clean_attributes(&mut event.attributes);
    }
    for link in &mut span.links.links {
        clean_attributes(&mut link.attributes);
    }
    if let opentelemetry::trace::Status::Error { description } = &mut span.status {
        *description = clean(description).into();
    }
}

impl<E: SpanExporter> SpanExporter for Redacting<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            clean_span(span);
        }
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            let mut problem = self.problem.lock().unwrap_or_else(PoisonError::into_inner);
            problem.get_or_insert_with(|| e.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// An installed export: flush it before the process exits.
pub(crate) struct Otlp {
    provider: SdkTracerProvider,
    endpoint: String,
    problem: Problem,
}

/// What the OTel layer sees: the crate's spans and its decision lines (as span events);
/// nothing else (not the HTTP clients' own events, not the exporter's).
fn wanted(metadata: &Metadata<'_>) -> bool {
    (metadata.is_span() && metadata.target() == rolegate::spans::SPAN_TARGET)
        || (metadata.is_event() && metadata.target() == rolegate::agent::TRACE_TARGET)
}

/// The `tracing` layer that exports to the collector, filtered to [`wanted`].
pub(crate) type OtlpLayer<S> = Filtered<
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    FilterFn<fn(&Metadata<'_>) -> bool>,
    S,
>;

/// Most bytes of a collector's reply that are read (an OTLP reply is a few bytes; the rest
/// is never read, and the export fails by name).
pub(crate) const MAX_REPLY_BYTES: u64 = 64 * 1024;

/// The exporter's HTTP client: reqwest's blocking one, with the whole exchange bounded by
/// [`EXPORT_TIMEOUT`] and the reply read up to [`MAX_REPLY_BYTES`], so that a collector that
/// answers with an endless body, or stalls, can neither hold a command past its bound nor
/// exhaust its memory.
#[derive(Debug)]
struct Bounded(reqwest::blocking::Client);

impl Bounded {
    fn new() -> Result<Self, String> {
        // the blocking client runs its own runtime: built on a thread of its own, outside
        // the command's tokio runtime
        let built = std::thread::spawn(|| reqwest::blocking::Client::builder().timeout(EXPORT_TIMEOUT).build());
        match built.join() {
            Ok(Ok(client)) => Ok(Self(client)),
            Ok(Err(e)) => Err(format!("--otlp: the HTTP client cannot be built: {e}")),
            Err(_) => Err("--otlp: the HTTP client cannot be built".into()),
        }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Bounded {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        use std::io::Read;
        let request: reqwest::blocking::Request = request.try_into()?;
        let mut response = self.0.execute(request)?.error_for_status()?;
        let headers = std::mem::take(response.headers_mut());
        let status = response.status();
        let mut body = Vec::new();
        response.by_ref().take(MAX_REPLY_BYTES + 1).read_to_end(&mut body)?;
        if body.len() as u64 > MAX_REPLY_BYTES {
            return Err(format!("the collector's reply is longer than {MAX_REPLY_BYTES} bytes").into());
        }
        let mut reply = http::Response::builder().status(status).body(bytes::Bytes::from(body))?;
        *reply.headers_mut() = headers;
        Ok(reply)
    }
}

impl Otlp {
    /// Builds the exporter for `endpoint` and the layer that feeds it. Nothing is sent
    /// before the first batch of spans ends.
    ///
    /// # Errors
    /// The exporter cannot be built (a URL that is not one).
    pub(crate) fn start<S>(endpoint: &str, service: Option<String>) -> Result<(Self, OtlpLayer<S>), String>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Bounded::new()?)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("--otlp {endpoint}: {e}"))?;
        let problem = Problem::default();
        let exporter = Redacting { inner: exporter, problem: problem.clone() };
        let service = service.filter(|s| !s.trim().is_empty()).unwrap_or_else(|| SERVICE_NAME.to_string());
        let resource = Resource::builder_empty()
            .with_service_name(clean(&service))
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("rolegate");
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(FilterFn::new(wanted as fn(&Metadata<'_>) -> bool));
        Ok((Self { provider, endpoint: endpoint.to_string(), problem }, layer))
    }

    /// Sends what is left and stops the exporter, within [`SHUTDOWN_TIMEOUT`]; says on
    /// stderr when spans could not be delivered. Never fails the command.
    pub(crate) fn finish(self) {
        // shutting down exports what is still queued, then stops the exporter's thread
        let shut = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        let problem = self.problem.lock().unwrap_or_else(PoisonError::into_inner).take();
        let trouble = problem.or_else(|| shut.err().map(|e| e.to_string()));
        if let Some(why) = trouble {
            eprintln!("rolegate: warning: spans not exported to {}: {}", self.endpoint, short(&why));
        }
    }
}

/// Most characters of an export error in the warning.
const WHY_CHARS: usize = 200;

/// The export error in a few words: the common causes by name, anything else redacted and
/// clipped.
fn short(why: &str) -> String {
    let has = |needle: &str| why.to_ascii_lowercase().contains(needle);
    if has("connection refused") || has("connectionrefused") {
        return "connection refused".to_string();
    }
    if has("timed out") || has("timedout") || has("timeout") {
        return format!("no answer within {} s", EXPORT_TIMEOUT.as_secs());
    }
    rolegate::security::hide_secrets(&clean(why)).chars().take(WHY_CHARS).collect()
}

/// What the `--trace-json` layer sees when it shares the subscriber with the export.
fn json_wanted(metadata: &Metadata<'_>) -> bool {
    metadata.is_event() && metadata.target() == rolegate::agent::TRACE_TARGET
}

/// Installs the export to `endpoint` as this process's `tracing` subscriber, beside the
/// `--trace-json` file when one is asked for (each layer behind its own filter, so neither
/// hides the other's callsites).
///
/// # Errors
/// The exporter cannot be built, the file cannot be created, or a subscriber exists.
pub(crate) fn install(
    endpoint: &str,
    trace_json: Option<&std::path::Path>,
) -> Result<(Otlp, Option<rolegate::agent::TraceExport>), String> {
    use tracing_subscriber::layer::SubscriberExt;
    let (export, json) = match trace_json {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| format!("{}: trace export: {e}", path.display()))?;
            let clock = std::sync::Arc::new(rolegate::cost::TokioClock::new());
            let (export, layer) = rolegate::agent::TraceExport::new(std::io::BufWriter::new(file), clock);
            (Some(export), Some(layer.with_filter(FilterFn::new(json_wanted as fn(&Metadata<'_>) -> bool))))
        }
        None => (None, None),
    };
    let service = std::env::var("OTEL_SERVICE_NAME").ok();
    let base = tracing_subscriber::registry().with(json);
    let (otlp, layer) = Otlp::start(endpoint, service)?;
    tracing::subscriber::set_global_default(base.with(layer))
        .map_err(|_| "--otlp: a tracing subscriber is already installed".to_string())?;
    Ok((otlp, export))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_follows_the_flag_then_the_standard_variables() {
        let none = |_: &str| None;
        assert_eq!(endpoint(None, none), None);
        assert_eq!(endpoint(Some("http://127.0.0.1:4318"), none).as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(endpoint(Some("http://h:1/v1/traces/"), none).as_deref(), Some("http://h:1/v1/traces"));
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://base:4318/".to_string()),
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://traces:9/custom".to_string()),
            _ => None,
        };
        assert_eq!(endpoint(None, env).as_deref(), Some("http://traces:9/custom"));
        assert_eq!(endpoint(Some("http://flag:1"), env).as_deref(), Some("http://flag:1/v1/traces"));
        let base_only = |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://base:4318/".to_string());
        assert_eq!(endpoint(None, base_only).as_deref(), Some("http://base:4318/v1/traces"));
    }

    #[test]
    fn an_export_error_is_said_in_a_few_words() {
        let refused = r#"Operation failed: reqwest::Error { kind: Request, source: ConnectError("tcp connect error", Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }) }"#;
        assert_eq!(short(refused), "connection refused");
        assert_eq!(
            short("Operation failed: reqwest::Error { kind: Request, source: TimedOut }"),
            "no answer within 10 s"
        );
        let other =
            short(&format!("HTTP export failed. Status Code: 404, Response: {} kwame@gmail.com", "x".repeat(300)));
        assert!(other.starts_with("HTTP export failed. Status Code: 404") && !other.contains('@'), "{other}");
        assert!(other.chars().count() <= WHY_CHARS);
    }

    #[test]
    fn every_string_of_a_span_is_redacted_and_finish_reasons_become_an_array() {
        let mut span = SpanData {
            span_context: opentelemetry::trace::SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: opentelemetry::trace::SpanKind::Internal,
            name: "execute_tool mail eve@evil.example".into(),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes: vec![
                KeyValue::new("detail", "send to eve@evil.example now"),
                KeyValue::new("gen_ai.response.finish_reasons", "stop"),
                KeyValue::new("gen_ai.usage.input_tokens", 12_i64),
            ],
            dropped_attributes_count: 0,
            events: opentelemetry_sdk::trace::SpanEvents::default(),
            links: opentelemetry_sdk::trace::SpanLinks::default(),
            status: opentelemetry::trace::Status::error("to eve@evil.example"),
            instrumentation_scope: opentelemetry::InstrumentationScope::builder("t").build(),
        };
        span.events.events.push(opentelemetry::trace::Event::new(
            "mail eve@evil.example",
            std::time::SystemTime::UNIX_EPOCH,
            vec![KeyValue::new("args", r#"{"to":"eve@evil.example"}"#)],
            0,
        ));
        clean_span(&mut span);
        let text = format!("{span:?}");
        assert!(!text.contains("eve@evil.example"), "{text}");
        assert!(text.contains("send to"), "the rest of the text stays: {text}");
        let reasons = span.attributes.iter().find(|kv| kv.key.as_str() == "gen_ai.response.finish_reasons");
        assert_eq!(reasons.map(|kv| kv.value.clone()), Some(Value::Array(Array::String(vec!["stop".into()]))));
    }
}
