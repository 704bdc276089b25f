//! Command-line interface. Process settings are flags (each with an environment alias);
//! feature settings live in the YAML file named by `--config`.

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

pub use crate::version::{REVISION, VERSION};

/// What `rayshare --version` prints after the name: `0.1.0 (revision 0123456789ab)`.
pub fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| format!("{VERSION} (revision {REVISION})"))
}

#[derive(Debug, Parser)]
#[command(
    name = "rayshare",
    version = long_version(),
    about = "Shared Ray clusters, Volcano PodGroups and multi-host indices, at admission time"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The file name under which the binary is a kubectl plugin (krew's naming convention:
/// `kubectl rayshare status` runs `kubectl-rayshare status` from `$PATH`).
pub const KUBECTL_PLUGIN: &str = "kubectl-rayshare";

impl Cli {
    /// Parses a command line (`args[0]` is the program). Parsing is the same under any
    /// program name; run as [`KUBECTL_PLUGIN`], usage and help name the command as the
    /// user typed it, `kubectl rayshare`.
    pub fn try_parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let mut command = Self::command();
        if args.first().is_some_and(|argv0| is_kubectl_plugin(argv0)) {
            command = command.bin_name("kubectl rayshare");
        }
        let mut matches = command.clone().try_get_matches_from(args)?;
        Self::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
    }
}

/// Whether `argv0` names the kubectl plugin (`kubectl-rayshare`, also `.exe`), by file
/// name: kubectl runs it by its full path.
fn is_kubectl_plugin(argv0: &OsStr) -> bool {
    let path = Path::new(argv0);
    let name = match path.extension() {
        Some(ext) if ext.eq_ignore_ascii_case("exe") => path.file_stem(),
        _ => path.file_name(),
    };
    name.is_some_and(|n| n == KUBECTL_PLUGIN)
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the admission webhook server.
    Serve(Box<ServeArgs>),
    /// Show what rayshare would do to an object, offline (no cluster needed).
    Mutate(MutateArgs),
    /// Write a development CA and serving certificate.
    Certs(CertsArgs),
    /// Show the shared-cluster pool, PodGroups and index claims rayshare manages.
    Status(StatusArgs),
    /// For uninstalling (after `helm uninstall`, or from the chart's opt-in pre-delete
    /// hook): delete one installation's idle shared clusters now, busy ones once their
    /// jobs end, its index claims and the PodGroups it never handed to a pod.
    Drain(DrainArgs),
    /// Tell what is wired: the webhook registration, its Service and pods, the opted-in
    /// namespaces, KubeRay, Volcano and Kueue, and a dry-run RayJob rewritten. One line
    /// per check (ok, warn, fail); exit code 1 when one failed.
    Check(CheckArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "RAYSHARE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax, e.g. `info,rayshare=debug`).
    #[arg(long, env = "RAYSHARE_LOG", default_value = "info")]
    pub log_level: String,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// HTTPS address of the admission endpoint (POST /mutate).
    #[arg(long, env = "RAYSHARE_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Plain-HTTP admin address: /livez, /readyz, /metrics.
    #[arg(long, env = "RAYSHARE_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// PEM certificate chain (reloaded when it changes).
    #[arg(
        long,
        env = "RAYSHARE_TLS_CERT",
        default_value = "/etc/rayshare/tls/tls.crt"
    )]
    pub tls_cert: PathBuf,
    /// PEM private key (reloaded when it changes).
    #[arg(
        long,
        env = "RAYSHARE_TLS_KEY",
        default_value = "/etc/rayshare/tls/tls.key"
    )]
    pub tls_key: PathBuf,
    /// PEM CA bundle: when set, the admission port accepts only clients presenting a
    /// certificate it signed (configure the API server's AdmissionConfiguration
    /// `kubeConfigFile` with a matching client certificate). Read at startup.
    #[arg(long, env = "RAYSHARE_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// With `--client-ca`: the names a client certificate's subject common name (the
    /// last one, which Kubernetes reads) may be, comma-separated; the cluster CA also signs
    /// every user's and kubelet's certificate. Empty: the chain alone decides.
    #[arg(
        long,
        env = "RAYSHARE_CLIENT_CN",
        value_delimiter = ',',
        default_value = "kube-apiserver"
    )]
    pub client_cn: Vec<String>,
    /// How often the certificate files are checked for changes.
    #[arg(long, env = "RAYSHARE_CERT_RELOAD_SECONDS", default_value_t = 10)]
    pub cert_reload_seconds: u64,
    /// YAML feature config; defaults apply when absent.
    #[arg(long, env = "RAYSHARE_CONFIG")]
    pub config: Option<PathBuf>,
    /// kubeconfig file; in-cluster config (or $KUBECONFIG) when absent.
    #[arg(long, env = "RAYSHARE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Largest accepted AdmissionReview body.
    #[arg(long, env = "RAYSHARE_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once (being read or admitted); a request that
    /// finds them spent is answered 503 at once, and the API server applies the webhook's
    /// failurePolicy.
    #[arg(long, env = "RAYSHARE_MAX_BUFFERED_BYTES", default_value_t = 48 * 1024 * 1024)]
    pub max_buffered_bytes: usize,
    /// Admissions worked on at once; past it a request waits for a slot, and only one
    /// that would wait past half of `admissionTimeoutMs` is answered "allowed, unchanged"
    /// with a warning (counted as cause `overloaded`).
    #[arg(long, env = "RAYSHARE_MAX_IN_FLIGHT", default_value_t = 64)]
    pub max_in_flight: usize,
    /// Connections to the webhook port served at once; past it a new connection is closed
    /// at once (the port is open to every pod by default; the API server keeps a few).
    #[arg(long, env = "RAYSHARE_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Bound on reading a request body.
    #[arg(long, env = "RAYSHARE_BODY_TIMEOUT_MS", default_value_t = 5000)]
    pub body_timeout_ms: u64,
    /// After SIGTERM, keep serving (not ready) this long before closing the listener.
    #[arg(long, env = "RAYSHARE_SHUTDOWN_DELAY_SECONDS", default_value_t = 0)]
    pub shutdown_delay_seconds: u64,
    /// Bound on waiting for in-flight requests at shutdown.
    #[arg(long, env = "RAYSHARE_DRAIN_TIMEOUT_SECONDS", default_value_t = 20)]
    pub drain_timeout_seconds: u64,
    /// This replica's identity for leader election (the pod name in a cluster).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Leader lease duration: how soon another replica takes over the reconcilers.
    #[arg(long, env = "RAYSHARE_LEADER_LEASE_SECONDS", default_value_t = 15)]
    pub leader_lease_seconds: u64,
    /// Namespace of the leader-election Lease (rayshare's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "rayshare-system")]
    pub pod_namespace: String,
    /// The image reference this replica was deployed from (the chart sets it): under the
    /// release's image name, anything but that release's own build is logged as a
    /// placeholder at start and exported as `rayshare_image_placeholder`.
    #[arg(long, env = "RAYSHARE_IMAGE")]
    pub image: Option<String>,
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct MutateArgs {
    /// Object (YAML or JSON) or a whole AdmissionReview; `-` reads standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// Namespace when the object names none.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// YAML feature config.
    #[arg(long, env = "RAYSHARE_CONFIG")]
    pub config: Option<PathBuf>,
    /// `yaml`: the mutated object, then the objects rayshare would create.
    /// `json`: {"object", "patch", "creates", "warnings"}.
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory for ca.crt, tls.crt, tls.key.
    #[arg(long)]
    pub out: PathBuf,
    /// DNS name or IP address for the serving certificate (repeatable).
    #[arg(long = "host", required = true)]
    pub hosts: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum StatusOutput {
    Table,
    Json,
}

/// Which cluster and which of rayshare's objects a command looks at.
#[derive(Debug, Args)]
pub struct Target {
    /// kubeconfig file (else $KUBECONFIG, ~/.kube/config, or in-cluster, as kubectl).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// One namespace; all namespaces when absent.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Only this installation's objects (its `instance` setting, the label
    /// `rayshare.io/instance`): shared clusters, their RayJobs, PodGroups, index claims.
    #[arg(long)]
    pub instance: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: Target,
    /// The installation's config, for its default idle TTL.
    #[arg(long, env = "RAYSHARE_CONFIG")]
    pub config: Option<PathBuf>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: StatusOutput,
}

#[derive(Debug, Args)]
pub struct DrainArgs {
    #[command(flatten)]
    pub target: Target,
    /// How long to wait for busy clusters' jobs to end; exit code 3 if some still run.
    #[arg(long, default_value_t = 600)]
    pub wait_seconds: u64,
    /// Delete busy clusters too, now: their running jobs die with them.
    #[arg(long)]
    pub force: bool,
    /// Drain every installation's objects (and those made before releases labelled their
    /// installation). Without it, `--instance` must name the one to drain: another
    /// installation's claims and groups are in use.
    #[arg(
        long,
        conflicts_with = "instance",
        required_unless_present = "instance"
    )]
    pub all_instances: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// kubeconfig file (else $KUBECONFIG, ~/.kube/config, or in-cluster, as kubectl).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The installation to check: its `instance` (the label `rayshare.io/instance` on its
    /// MutatingWebhookConfiguration) or its MutatingWebhookConfiguration's name. Needed
    /// only when several are installed.
    #[arg(long)]
    pub instance: Option<String>,
    /// The opted-in namespace to run the dry-run RayJob in; the first opted-in one when
    /// absent.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// `table`: one line per check (ok, warn or fail) and a hint under each that is not ok.
    /// `json`: {"ok", "checks": [{"check", "level", "said", "hint"}]}. Exit code 1 when a
    /// check failed.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: StatusOutput,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn version_names_the_revision() {
        let err = Cli::try_parse_from(["rayshare", "--version"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        let text = err.render().to_string();
        assert_eq!(
            text.trim_end(),
            format!("rayshare {VERSION} (revision {REVISION})")
        );
        // git's 12 hex digits, `unknown`, or what the build's RAYSHARE_REVISION said.
        assert!(
            !REVISION.is_empty() && !REVISION.contains(char::is_whitespace),
            "{REVISION:?}"
        );
    }

    #[test]
    fn as_a_kubectl_plugin_it_parses_the_same_and_says_kubectl_rayshare() {
        for argv0 in [
            "kubectl-rayshare",
            "/home/me/bin/kubectl-rayshare",
            "C:\\bin\\kubectl-rayshare.exe",
        ] {
            let cli = Cli::try_parse_args([argv0, "status", "-n", "team-a", "-o", "json"])
                .unwrap_or_else(|e| panic!("{argv0}: {e}"));
            let Command::Status(args) = cli.command else {
                panic!("{argv0}: not status");
            };
            assert_eq!(args.target.namespace.as_deref(), Some("team-a"));
            assert_eq!(args.output, StatusOutput::Json);
        }
        let err = Cli::try_parse_args(["/usr/local/bin/kubectl-rayshare", "status", "--help"])
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(
            err.render()
                .to_string()
                .contains("Usage: kubectl rayshare status"),
            "{}",
            err.render()
        );
        let err = Cli::try_parse_args(["kubectl-rayshare", "bogus"]).unwrap_err();
        assert!(
            err.render()
                .to_string()
                .contains("kubectl rayshare <COMMAND>"),
            "{}",
            err.render()
        );
        // `--version` names the program, not the plugin.
        let err = Cli::try_parse_args(["kubectl-rayshare", "--version"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        assert!(err.render().to_string().starts_with("rayshare "));
    }

    #[test]
    fn drain_names_its_installation_or_says_all() {
        let err = Cli::try_parse_from(["rayshare", "drain", "-n", "team"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert!(err.to_string().contains("--all-instances"), "{err}");
        let err = Cli::try_parse_from(["rayshare", "drain", "--instance", "a", "--all-instances"])
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        for (args, instance) in [
            (&["--instance", "a"][..], Some("a")),
            (&["--all-instances"][..], None),
        ] {
            let cli = Cli::try_parse_from(["rayshare", "drain"].iter().chain(args)).unwrap();
            let Command::Drain(drain) = cli.command else {
                panic!("not drain");
            };
            assert_eq!(drain.target.instance.as_deref(), instance);
            assert_eq!(drain.all_instances, instance.is_none());
        }
        // Status still shows every installation by default.
        assert!(Cli::try_parse_from(["rayshare", "status"]).is_ok());
    }

    #[test]
    fn under_its_own_name_usage_says_rayshare() {
        let err =
            Cli::try_parse_args(["./target/release/rayshare", "status", "--help"]).unwrap_err();
        assert!(
            err.render().to_string().contains("Usage: rayshare status"),
            "{}",
            err.render()
        );
        // Only the exact plugin name counts.
        let err = Cli::try_parse_args(["kubectl-rayshare-old", "status", "--help"]).unwrap_err();
        assert!(
            err.render()
                .to_string()
                .contains("Usage: kubectl-rayshare-old status"),
            "{}",
            err.render()
        );
    }
}
