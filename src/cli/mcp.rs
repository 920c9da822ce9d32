//! `rolegate mcp list`: the tools an MCP server offers, each with the digest a policy pins
//! it by and whatever makes it unusable, for a person to review before pinning.

use clap::Args;
use std::path::PathBuf;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::tools::mcp::{McpServer, McpServers};

/// Lists the tools of the servers in a servers file.
#[derive(Args, Debug)]
pub(crate) struct McpListArgs {
    /// The servers file (JSON: `{"servers": {"NAME": {"command": …, "args": […]}}}`).
    #[arg(long, value_name = "FILE")]
    servers: PathBuf,
    /// Only this server (default: every server in the file).
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// One JSON line per tool instead of the table.
    #[arg(long)]
    json: bool,
}

/// Starts (or reaches) each server, lists its tools and lets it go. Exit 0 when every tool is usable,
/// 1 when any has a problem, 2 for a bad file or a server that cannot be listed.
pub(crate) async fn list(args: &McpListArgs) -> u8 {
    let text = match std::fs::read_to_string(&args.servers) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rolegate: {}: {e}", args.servers.display());
            return EXIT_USAGE;
        }
    };
    let servers = match McpServers::from_json(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rolegate: {}: {e}", args.servers.display());
            return EXIT_USAGE;
        }
    };
    if let Some(name) = args.server.as_deref().filter(|n| !servers.servers.contains_key(*n)) {
        eprintln!("rolegate: no server {name:?} in {}", args.servers.display());
        return EXIT_USAGE;
    }
    let mut clean = true;
    for (name, spec) in servers.servers.iter().filter(|(n, _)| args.server.as_ref().is_none_or(|s| s == *n)) {
        let listed = match McpServer::inspect(name, spec).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("rolegate: {e} [{}]", e.code());
                return EXIT_USAGE;
            }
        };
        for tool in &listed {
            clean &= tool.problems.is_empty();
            let line = if args.json {
                serde_json::to_string(tool).unwrap_or_default()
            } else {
                let verdict = if tool.problems.is_empty() { "ok".to_string() } else { tool.problems.join(",") };
                format!("{:<40} {} {verdict}", tool.name, tool.digest)
            };
            if !out(&line) {
                return EXIT_OK;
            }
        }
    }
    if clean { EXIT_OK } else { EXIT_MISMATCH }
}
