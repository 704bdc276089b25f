use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use rayshare::cli::{CertsArgs, Cli, Command, MutateArgs, Output, ServeArgs};
use rayshare::config::Config;
use rayshare::health::Health;
use rayshare::http::admin;
use rayshare::http::api::{self, AppState};
use rayshare::http::server::{self, Drain, Listeners};
use rayshare::metrics::Metrics;
use rayshare::tls::{self, CertFiles, CertStore};
use rayshare::world::kube::KubeWorld;
use rayshare::{certs, logging, offline, reconcile};

// Admission allocates many small, short-lived JSON nodes per request, across threads:
// mimalloc serves them markedly cheaper than glibc's malloc (see README, Benchmarks).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
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

/// Two clients of one config: one for admission's calls, one (with its connections and
/// request queue on the background runtime) for watches and reconcilers.
async fn kube_clients(
    args: &ServeArgs,
    background: &tokio::runtime::Handle,
) -> anyhow::Result<(kube::Client, kube::Client)> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let admission = kube::Client::try_from(config.clone())?;
    let _on = background.enter();
    Ok((admission, kube::Client::try_from(config)?))
}

async fn serve(args: ServeArgs, background: tokio::runtime::Handle) -> ExitCode {
    let _log_guard = match logging::init(&args.log) {
        Ok(guard) => guard,
        Err(e) => return fail(e, 2),
    };
    if let Some(e) = PRIORITY_ERROR.get() {
        tracing::warn!(error = %e, "cannot lower the background threads' priority");
    }
    // Everything that can be wrong with the settings fails here, before listening.
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => Arc::new(c),
        Err(e) => return fail(e, 2),
    };
    let files = CertFiles {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
    };
    let certs = match CertStore::load(&files) {
        Ok(c) => c,
        Err(e) => return fail(format!("serving certificate: {e}"), 1),
    };
    let client_roots = match args.client_ca.as_deref().map(tls::client_roots).transpose() {
        Ok(r) => r,
        Err(e) => return fail(format!("client CA: {e}"), 1),
    };
    let tls_config = match tls::server_config(certs.clone(), client_roots) {
        Ok(c) => c,
        Err(e) => return fail(format!("TLS: {e}"), 1),
    };
    let (client, background_client) = match kube_clients(&args, &background).await {
        Ok(c) => c,
        Err(e) => return fail(format!("Kubernetes client: {e}"), 1),
    };
    let shutdown = server::signal();
    let listeners = match Listeners::bind(args.listen, args.admin_listen).await {
        Ok(l) => l,
        Err(e) => return fail(format!("cannot listen: {e}"), 1),
    };
    let health = Arc::new(Health::default());
    let metrics = Arc::new(Metrics::default());
    let identity = args
        .pod_name
        .clone()
        .unwrap_or_else(|| format!("rayshare-{}", std::process::id()));
    // Caches, reconcilers and certificate reloads are spawned onto the background runtime.
    let (world, tasks) = {
        let _on = background.enter();
        let (world, wakeups) =
            KubeWorld::start(client, background_client.clone(), &config, health.clone());
        let mut tasks = Vec::new();
        if let Some(w) = wakeups.clusters {
            let (c, m) = (config.clone(), metrics.clone());
            tasks.push(reconcile::provision::spawn(world.clone(), c, m, w));
        }
        if let Some(w) = wakeups.pods {
            let (c, m) = (config.clone(), metrics.clone());
            tasks.push(reconcile::group_provision::spawn(world.clone(), c, m, w));
        }
        tasks.extend(reconcile::spawn_all(
            background_client,
            config.clone(),
            metrics.clone(),
            reconcile::Election {
                namespace: args.pod_namespace.clone(),
                identity,
                lease: Duration::from_secs(args.leader_lease_seconds.max(3)),
            },
        ));
        tokio::spawn(certs.clone().watch(
            files,
            Duration::from_secs(args.cert_reload_seconds.max(1)),
            metrics.clone(),
        ));
        (world, tasks)
    };
    let state = Arc::new(AppState {
        config,
        world,
        metrics: metrics.clone(),
        max_body_bytes: args.max_body_bytes,
        body_timeout: Duration::from_millis(args.body_timeout_ms),
    });
    tracing::info!(listen = %args.listen, admin = %args.admin_listen, "rayshare serving");
    let result = server::serve(
        listeners,
        api::router(state),
        admin::router(health.clone(), metrics),
        tls_config,
        health,
        Drain {
            delay: Duration::from_secs(args.shutdown_delay_seconds),
            timeout: Duration::from_secs(args.drain_timeout_seconds),
        },
        async move {
            shutdown.await;
            // A draining replica must not keep deleting as leader; another takes over
            // when its lease runs out.
            for task in tasks {
                task.abort();
            }
        },
    )
    .await;
    match result {
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
