//! The whole server as a value: built from the parsed settings (everything that can be
//! wrong with them fails here, before listening), then run until a shutdown signal. The
//! binary's `serve` and in-process tests start it the same way.

use std::sync::Arc;
use std::time::Duration;

use crate::cli::ServeArgs;
use crate::config::Config;
use crate::health::Health;
use crate::http::admin;
use crate::http::api::{self, AppState, Limits};
use crate::http::server::{self, Drain, Listeners};
use crate::http::tls::{self, CertFiles, CertStore};
use crate::metrics::Metrics;
use crate::reconcile;
use crate::world::kube::KubeWorld;
use crate::world::kube::events::EventSink;

/// Why the server could not start; `exit_code` is what the binary exits with.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("serving certificate: {0}")]
    Certificate(#[source] tls::TlsError),
    #[error("client CA: {0}")]
    ClientCa(#[source] tls::TlsError),
    #[error("Kubernetes client: {0}")]
    Kube(#[source] anyhow::Error),
    #[error("cannot listen: {0}")]
    Listen(#[source] std::io::Error),
}

impl StartError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) => 2,
            _ => 1,
        }
    }
}

pub struct App {
    args: ServeArgs,
    config: Arc<Config>,
    certs: Arc<CertStore>,
    tls: Arc<rustls::ServerConfig>,
    clients: (kube::Client, kube::Client),
    listeners: Listeners,
    background: tokio::runtime::Handle,
}

impl App {
    /// Loads the config and certificates, makes the API clients and binds the ports.
    /// `background` runs the watches, provisioners and reconcilers.
    pub async fn build(
        args: ServeArgs,
        background: tokio::runtime::Handle,
    ) -> Result<Self, StartError> {
        let config = Arc::new(Config::load(args.config.as_deref())?);
        let files = CertFiles {
            cert: args.tls_cert.clone(),
            key: args.tls_key.clone(),
        };
        let certs = CertStore::load(&files).map_err(StartError::Certificate)?;
        let client_roots = args
            .client_ca
            .as_deref()
            .map(tls::client_roots)
            .transpose()
            .map_err(StartError::ClientCa)?;
        let tls = tls::server_config(certs.clone(), client_roots, &args.client_cn)
            .map_err(StartError::ClientCa)?;
        let clients = kube_clients(&args, &background)
            .await
            .map_err(StartError::Kube)?;
        let listeners = Listeners::bind(args.listen, args.admin_listen)
            .await
            .map_err(StartError::Listen)?;
        Ok(Self {
            args,
            config,
            certs,
            tls,
            clients,
            listeners,
            background,
        })
    }

    /// Serves until `shutdown` resolves, then drains (see `http::server::serve`).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> std::io::Result<()> {
        let Self {
            args,
            config,
            certs,
            tls,
            clients: (client, background_client),
            listeners,
            background,
        } = self;
        let health = Arc::new(Health::default());
        let metrics = Arc::new(Metrics::default());
        let identity = args
            .pod_name
            .clone()
            .unwrap_or_else(|| format!("rayshare-{}", std::process::id()));
        // Caches, provisioners, reconcilers and certificate reloads run in the background.
        let (world, tasks, controllers) = {
            let _on = background.enter();
            let events =
                EventSink::start(background_client.clone(), identity.clone(), metrics.clone());
            let election = reconcile::Election {
                namespace: args.pod_namespace.clone(),
                identity,
                lease: Duration::from_secs(args.leader_lease_seconds.max(3)),
            };
            let world = |publish| {
                let (c, h) = (background_client, health.clone());
                KubeWorld::start(client, c, &config, h, Some(events), publish)
            };
            let (world, controllers) =
                reconcile::start::start(world, config.clone(), metrics.clone(), election);
            let files = CertFiles {
                cert: args.tls_cert.clone(),
                key: args.tls_key.clone(),
            };
            let reload = Duration::from_secs(args.cert_reload_seconds.max(1));
            let tasks = vec![tokio::spawn(certs.watch(files, reload, metrics.clone()))];
            (world, tasks, controllers)
        };
        let state = Arc::new(AppState {
            config,
            world,
            metrics: metrics.clone(),
            max_body_bytes: args.max_body_bytes,
            body_timeout: Duration::from_millis(args.body_timeout_ms),
            limits: Limits::new(args.max_buffered_bytes, args.max_in_flight),
        });
        tracing::info!(listen = %args.listen, admin = %args.admin_listen, "rayshare serving");
        server::serve(
            listeners,
            server::Webhook {
                router: api::router(state),
                tls,
                max_connections: args.max_connections,
                metrics: metrics.clone(),
            },
            admin::router(health.clone(), metrics),
            health,
            Drain {
                delay: Duration::from_secs(args.shutdown_delay_seconds),
                timeout: Duration::from_secs(args.drain_timeout_seconds),
            },
            async move {
                shutdown.await;
                // A draining replica no longer acts as leader or provisioner; it gives
                // the lease up, so another replica leads at once.
                for task in tasks {
                    task.abort();
                }
                controllers.stop().await;
            },
        )
        .await
    }

    /// The bound addresses (admission, admin): useful with port 0.
    pub fn addresses(&self) -> std::io::Result<(std::net::SocketAddr, std::net::SocketAddr)> {
        Ok((
            self.listeners.admission.local_addr()?,
            self.listeners.admin.local_addr()?,
        ))
    }
}

/// Two clients of one config: one for admission's calls, one (with its connections and
/// request queue on the background runtime) for watches and reconcilers.
async fn kube_clients(
    args: &ServeArgs,
    background: &tokio::runtime::Handle,
) -> anyhow::Result<(kube::Client, kube::Client)> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    // No call hangs for ever (kube sets no read timeout); admission's calls have their
    // own, far shorter bounds. Longer than a watch request (290 s) with its bookmarks.
    config.read_timeout = Some(std::time::Duration::from_secs(300));
    config.reset_reader_on_write = true;
    let admission = kube::Client::try_from(config.clone())?;
    let _on = background.enter();
    Ok((admission, kube::Client::try_from(config)?))
}
