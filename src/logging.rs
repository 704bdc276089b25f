//! tracing setup: text or JSON lines on stderr, written off the request path.

use std::io::IsTerminal;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

use crate::cli::{LogArgs, LogFormat};

/// Installs the subscriber. Keep the guard alive: dropping it flushes the log buffer.
pub fn init(args: &LogArgs) -> Result<WorkerGuard, String> {
    let filter = EnvFilter::try_new(&args.log_level)
        .map_err(|e| format!("invalid --log-level {:?}: {e}", args.log_level))?;
    // A background thread does the writing: a slow or blocked stderr must not stall
    // admission requests. The buffer is bounded (8k lines) so a burst cannot grow memory;
    // beyond it lines are dropped, never requests delayed.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(8192)
        .lossy(true)
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    result.map_err(|e| e.to_string())?;
    Ok(guard)
}
