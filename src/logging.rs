//! tracing setup: text or JSON lines on stderr.

use tracing_subscriber::EnvFilter;

use crate::cli::{LogArgs, LogFormat};

pub fn init(args: &LogArgs) -> Result<(), String> {
    let filter = EnvFilter::try_new(&args.log_level)
        .map_err(|e| format!("invalid --log-level {:?}: {e}", args.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}
