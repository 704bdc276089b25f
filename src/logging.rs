//! tracing setup: text or JSON lines on stderr, written off the request path.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::cli::{LogArgs, LogFormat};

/// Lines the writer buffers before it drops new ones.
const BUFFERED_LINES: usize = 8192;

/// The process's log writer's count of dropped lines, once [`init`] has run.
static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Log lines dropped so far because the output could not keep up
/// (`rayshare_log_lines_dropped_total`).
pub fn dropped_lines() -> u64 {
    DROPPED.get().map_or(0, |c| c.dropped_lines() as u64)
}

/// A background thread does the writing: a slow or blocked output must not stall
/// admission requests. The buffer is bounded so a burst cannot grow memory; beyond it
/// lines are dropped (and counted), never requests delayed.
fn writer<W: Write + Send + 'static>(out: W, lines: usize) -> (NonBlocking, WorkerGuard) {
    tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(lines)
        .lossy(true)
        .finish(out)
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid --log-level {level:?}: {source}")]
    Level {
        level: String,
        source: tracing_subscriber::filter::ParseError,
    },
    /// A subscriber is installed already.
    #[error("{0}")]
    Install(Box<dyn std::error::Error + Send + Sync>),
}

/// Installs the subscriber. Keep the guard alive: dropping it flushes the log buffer.
pub fn init(args: &LogArgs) -> Result<WorkerGuard, LogError> {
    let filter = EnvFilter::try_new(&args.log_level).map_err(|source| LogError::Level {
        level: args.log_level.clone(),
        source,
    })?;
    let (writer, guard) = writer(std::io::stderr(), BUFFERED_LINES);
    let _ = DROPPED.set(writer.error_counter());
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
    result.map_err(LogError::Install)?;
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    /// An output that blocks every write until opened, as a stalled stderr pipe would.
    #[derive(Clone, Default)]
    struct Stalled(Arc<(Mutex<bool>, Condvar)>);

    impl Stalled {
        fn open(&self) {
            *self.0.0.lock().unwrap() = true;
            self.0.1.notify_all();
        }
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, changed) = &*self.0;
            let _open = changed
                .wait_while(open.lock().unwrap(), |open| !*open)
                .unwrap();
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_output_drops_and_counts_lines_instead_of_blocking() {
        let out = Stalled::default();
        let (mut writer, guard) = writer(out.clone(), 4);
        let started = Instant::now();
        for _ in 0..100 {
            writer.write_all(b"a line\n").unwrap();
        }
        // 100 writes returned while nothing could be written: none waited for the output.
        assert!(started.elapsed() < Duration::from_secs(5));
        let dropped = writer.error_counter().dropped_lines();
        // At most the buffer and the one line the worker is stuck on got through.
        assert!((95..=100).contains(&dropped), "{dropped} dropped");
        out.open();
        drop(guard);
    }
}
