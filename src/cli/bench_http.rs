//! `rolegate bench --http`: what the HTTP model client costs, against a chat-completions
//! server on loopback that this command starts itself (plain threads, one per connection,
//! HTTP/1.1 keep-alive):
//!
//! - overhead per model call: single-agent runs (two model calls each: `get_ticket`, then
//!   `finish`) against a server that answers at once, per call, minus a bare `reqwest`
//!   POST of the same size to the same server: what the client (request body, retries and
//!   limit bookkeeping, reply parsing) and the loop's checks add to a round trip;
//! - throughput with many connections: calls through clients sharing one
//!   `--max-connections` limit, against a server that takes a fixed time per answer,
//!   achieved against the ideal (connections ÷ answer time).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rolegate::agent::Env;
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::http::{ConnectionLimit, Endpoint};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message};

/// An answer calling `get_ticket`.
const CALL: &str = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_ticket","arguments":"{\"ticket_id\":\"T-601\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":400,"completion_tokens":20}}"#;
/// An answer calling `finish` on the first observation.
const FINISH: &str = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"finish","arguments":"{\"answer\":\"T-601 is open.\",\"sources\":[\"o1\"]}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":500,"completion_tokens":20}}"#;

/// A loopback server on its own threads: `get_ticket` first, `finish` once the request
/// holds the ticket's observation; each answer after `delay`.
fn serve(delay: Duration) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = connection(stream, delay);
            });
        }
    });
    Ok(format!("http://{addr}/v1"))
}

fn connection(stream: TcpStream, delay: Duration) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let seen = String::from_utf8_lossy(&body);
        let answer = if seen.contains("tool:get_ticket:o1") { FINISH } else { CALL };
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        )?;
        writer.flush()?;
    }
}

/// The figures.
struct Figures {
    runs: u32,
    us_per_call: f64,
    bare_us_per_call: f64,
    connections: usize,
    delay_ms: u64,
    calls: usize,
    achieved: f64,
}

impl Figures {
    fn ideal(&self) -> f64 {
        self.connections as f64 / (self.delay_ms as f64 / 1000.0)
    }
}

fn endpoint(base: &str, connections: usize) -> Result<Endpoint, String> {
    let mut ep = Endpoint::new(base).map_err(|e| e.to_string())?;
    ep.retry.max_retries = 0;
    ep.connections = ConnectionLimit::new(connections).map_err(|e| e.to_string())?;
    Ok(ep)
}

async fn measure(runs: u32, connections: usize, delay_ms: u64, per_connection: usize) -> Result<Figures, String> {
    let mut env = Env::bundled().map_err(|e| e.to_string())?;
    env.prices = Arc::new((*env.prices).clone().with_zero_price("bench-model"));
    let instant = serve(Duration::ZERO).map_err(|e| e.to_string())?;
    let cfg = endpoint(&instant, 1)?.config("bench-model").map_err(|e| e.to_string())?;

    // single-agent runs, two model calls each (warm up first: the pool's connection)
    let lab = LabConfig { decider: DeciderSpec::Http(cfg.clone()), ..LabConfig::default() };
    let mut calls = 0u64;
    let mut timed = Duration::ZERO;
    for i in 0..=runs {
        let mut built = lab.build(&env);
        let started = Instant::now();
        let run = built.agent.run("What is the status of T-601?", "run-1").await.map_err(|e| e.to_string())?;
        if run.reason() != rolegate::agent::StopReason::Done {
            return Err(format!("a bench run ended {}", run.reason()));
        }
        if i > 0 {
            timed += started.elapsed();
            calls += run.ledger().summary().calls;
        }
    }
    let us_per_call = timed.as_secs_f64() * 1e6 / calls.max(1) as f64;

    // the bare round trip: the same server, a body of the same size, no client around it
    let body = {
        let built = lab.build(&env);
        let state = rolegate::agent::AgentState::new("run-1", "kwame", "triage", "What is the status of T-601?")
            .map_err(|e| e.to_string())?;
        serde_json::to_vec(&built.agent.request(&state).messages).map_err(|e| e.to_string())?
    };
    let bare = reqwest::Client::builder().no_proxy().build().map_err(|e| e.to_string())?;
    let url = format!("{instant}/chat/completions");
    let mut bare_time = Duration::ZERO;
    for i in 0..=calls {
        let started = Instant::now();
        let resp = bare.post(&url).body(body.clone()).send().await.map_err(|e| e.to_string())?;
        let _ = resp.bytes().await.map_err(|e| e.to_string())?;
        if i > 0 {
            bare_time += started.elapsed();
        }
    }
    let bare_us_per_call = bare_time.as_secs_f64() * 1e6 / calls.max(1) as f64;

    // many connections against a slow server, through one shared limit
    let slow = serve(Duration::from_millis(delay_ms)).map_err(|e| e.to_string())?;
    let cfg = endpoint(&slow, connections)?.config("bench-model").map_err(|e| e.to_string())?;
    let request = LlmRequest {
        model: "bench-model".into(),
        messages: vec![Message::system("rules"), Message::user("<goal source=\"user-input\">T-601?</goal>")],
        tools: Vec::new(),
        max_tokens: 64,
    };
    // one round to open the connections, then the timed rounds
    let round = |n: usize| {
        let (cfg, request) = (cfg.clone(), request.clone());
        async move {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..connections {
                let (cfg, request) = (cfg.clone(), request.clone());
                set.spawn(async move {
                    let mut client = HttpClient::new(cfg);
                    let mut ok = 0usize;
                    for _ in 0..n {
                        ok += usize::from(client.complete(&request).await.is_ok());
                    }
                    ok
                });
            }
            let mut ok = 0;
            while let Some(r) = set.join_next().await {
                ok += r.unwrap_or(0);
            }
            ok
        }
    };
    round(1).await;
    let started = Instant::now();
    let ok = round(per_connection).await;
    let achieved = ok as f64 / started.elapsed().as_secs_f64();
    if ok != connections * per_connection {
        return Err(format!("{} of {} calls failed", connections * per_connection - ok, connections * per_connection));
    }
    Ok(Figures { runs, us_per_call, bare_us_per_call, connections, delay_ms, calls: ok, achieved })
}

/// Runs the HTTP bench and prints its figures; 2 when it could not run.
pub(crate) async fn run(runs: u32, connections: usize, delay_ms: u64, per_connection: usize) -> u8 {
    match measure(runs, connections, delay_ms, per_connection).await {
        Ok(f) => {
            super::out(&format!(
                "model call through the loop, instant loopback server: {:>8.1} us/call ({} runs, 2 calls each)",
                f.us_per_call, f.runs
            ));
            super::out(&format!(
                "bare reqwest POST of the same size, same server:      {:>8.1} us/call",
                f.bare_us_per_call
            ));
            super::out(&format!(
                "client and checks overhead:                           {:>8.1} us/call",
                f.us_per_call - f.bare_us_per_call
            ));
            super::out(&format!(
                "{} connections, server answering in {} ms: {:.0} calls/s achieved, {:.0} ideal ({:.1}%, {} calls)",
                f.connections,
                f.delay_ms,
                f.achieved,
                f.ideal(),
                100.0 * f.achieved / f.ideal(),
                f.calls
            ));
            super::EXIT_OK
        }
        Err(e) => {
            eprintln!("rolegate: bench --http: {e}");
            super::EXIT_USAGE
        }
    }
}
