use std::io::Read;
use std::process::ExitCode;

use rayshare::app::App;
use rayshare::cli::{
    CertsArgs, Cli, Command, DrainArgs, MutateArgs, Output, ServeArgs, StatusArgs, StatusOutput,
    Target,
};
use rayshare::config::Config;
use rayshare::http::certs;
use rayshare::http::server;
use rayshare::{drain, logging, offline, status};

// Admission allocates many small, short-lived JSON nodes per request, across threads:
// mimalloc serves them markedly cheaper than glibc's malloc (see README, Benchmarks).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Installed as `kubectl-rayshare` it is a kubectl plugin (`kubectl rayshare status`).
    let cli = Cli::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    match cli.command {
        Command::Serve(args) => {
            // Watches and reconcilers run on their own thread: a reconciler decoding a
            // page of 500 objects must not hold up admission requests queued behind it
            // on the same worker (the kernel preempts a thread; a task it cannot).
            let background = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("rayshare-background")
                .on_thread_start(lower_priority)
                .enable_all()
                .build()
                .expect("building the background runtime");
            let code = runtime.block_on(serve(*args, background.handle().clone()));
            background.shutdown_background();
            code
        }
        Command::Mutate(args) => runtime.block_on(mutate(args)),
        Command::Certs(args) => make_certs(args),
        Command::Status(args) => runtime.block_on(show_status(args)),
        Command::Drain(args) => runtime.block_on(run_drain(args)),
        Command::Check(args) => runtime.block_on(run_check(args)),
    }
}

/// Background threads yield the core to admission: SCHED_BATCH (no wakeup preemption)
/// at about nice 10. Lowering one's own priority needs no privilege.
fn lower_priority() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let low = ThreadPriority::Crossplatform(25u8.try_into().expect("within 0..=99"));
    let batch = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), low, batch) {
        // Logging starts later (in `serve`), which reports this.
        let _ = PRIORITY_ERROR.set(format!("{e:?}"));
    }
}

static PRIORITY_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("rayshare: {message}");
    ExitCode::from(code)
}

async fn serve(args: ServeArgs, background: tokio::runtime::Handle) -> ExitCode {
    let _log_guard = match logging::init(&args.log) {
        Ok(guard) => guard,
        Err(e) => return fail(e, 2),
    };
    if let Some(e) = PRIORITY_ERROR.get() {
        tracing::warn!(error = %e, "cannot lower the background threads' priority");
    }
    // Before App::build makes the metrics, which export it.
    rayshare::placeholder::note(args.image.as_deref());
    // The signal handler first: a SIGTERM during startup still drains.
    let shutdown = server::signal();
    let app = match App::build(args, background).await {
        Ok(app) => app,
        Err(e) => return fail(&e, e.exit_code()),
    };
    match app.run(shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e, 1),
    }
}

async fn mutate(args: MutateArgs) -> ExitCode {
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e, 2),
    };
    let mut text = String::new();
    let read = if args.file.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(&args.file).map(|t| text = t)
    };
    if let Err(e) = read {
        return fail(format!("cannot read {}: {e}", args.file.display()), 2);
    }
    match offline::run(&text, &args.namespace, &config).await {
        Ok(results) => {
            match args.output {
                Output::Yaml => print!("{}", offline::render_yaml(&results)),
                Output::Json => println!("{}", offline::render_json(&results)),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e, 1),
    }
}

async fn show_status(args: StatusArgs) -> ExitCode {
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e, 2),
    };
    let (client, scope) = match connect(args.target).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    match status::status(&client, &scope, config.reclaim.idle_ttl_seconds).await {
        Ok(found) => {
            match args.output {
                StatusOutput::Table => print!("{}", rayshare::domain::status::render_table(&found)),
                StatusOutput::Json => match serde_json::to_string_pretty(&found) {
                    Ok(text) => println!("{text}"),
                    Err(e) => return fail(e, 1),
                },
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("cannot list rayshare's objects: {e}"), 1),
    }
}

/// A client as kubectl makes one, and what to look at.
async fn connect(target: Target) -> Result<(kube::Client, status::Scope), ExitCode> {
    let client = status::client(target.kubeconfig.as_deref(), target.context.as_deref())
        .await
        .map_err(|e| fail(format!("cannot make a Kubernetes client: {e}"), 2))?;
    let scope = status::Scope {
        namespace: target.namespace,
        instance: target.instance,
    };
    Ok((client, scope))
}

async fn run_drain(args: DrainArgs) -> ExitCode {
    let (client, scope) = match connect(args.target).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let wait = std::time::Duration::from_secs(args.wait_seconds);
    match drain::run(&client, &scope, wait, args.force).await {
        Ok(drain::Outcome::Drained) => ExitCode::SUCCESS,
        Ok(drain::Outcome::StillBusy(busy)) => {
            for ((ns, name), jobs) in busy {
                eprintln!(
                    "still busy: raycluster {ns}/{name} runs {}",
                    jobs.join(", ")
                );
            }
            fail(
                "some shared clusters still run jobs: run drain again later, or with --force",
                3,
            )
        }
        Err(e) => fail(format!("cannot drain: {e}"), 1),
    }
}

async fn run_check(args: rayshare::cli::CheckArgs) -> ExitCode {
    let client = match status::client(args.kubeconfig.as_deref(), args.context.as_deref()).await {
        Ok(client) => client,
        Err(e) => return fail(format!("cannot make a Kubernetes client: {e}"), 2),
    };
    let report = rayshare::check::run(&client, &args).await;
    match args.output {
        StatusOutput::Table => print!("{}", rayshare::domain::check::render_table(&report)),
        StatusOutput::Json => match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(e, 1),
        },
    }
    ExitCode::from(report.exit_code())
}

fn make_certs(args: CertsArgs) -> ExitCode {
    let generated = match certs::generate(&args.hosts) {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot generate certificates: {e}"), 1),
    };
    if let Err(e) = certs::write(&args.out, &generated) {
        return fail(format!("cannot write to {}: {e}", args.out.display()), 1);
    }
    println!("wrote {}/{{ca.crt,tls.crt,tls.key}}", args.out.display());
    ExitCode::SUCCESS
}
