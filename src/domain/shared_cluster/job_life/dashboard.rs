//! Where a shared cluster's Ray dashboard is (pure). Never from a name a tenant wrote:
//! the RayJob's spec names the head service and could name an ExternalName Service that
//! points at another namespace's head, or a host and path of its choosing. The address
//! is the IP of the cluster's head pod, the pod KubeRay made for the cluster rayshare
//! created (its controller owner is that cluster's uid), and that pod's dashboard port.

use std::net::IpAddr;

use serde_json::Value;

use crate::domain::labels::{self, Meta};

/// KubeRay's default dashboard port and the head container port name it looks for.
pub const DASHBOARD_PORT: u16 = 8265;
const DASHBOARD_PORT_NAME: &str = "dashboard";

/// The dashboard of one cluster: its head pod's IP and dashboard port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub ip: IpAddr,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoHead {
    #[error("the cluster has no uid yet")]
    NoUid,
    #[error("no running head pod of this cluster has an IP yet")]
    NotRunning,
}

/// The label selector of a cluster's head pods (narrows the list; the owner check in
/// [`head`] decides).
pub fn head_selector(cluster_name: &str) -> String {
    format!(
        "{}={cluster_name},{}=head",
        labels::RAY_CLUSTER,
        labels::RAY_NODE_TYPE
    )
}

/// The running head pod among `pods` that KubeRay made for `cluster`: labelled as its
/// head, controlled by the cluster's uid, not being deleted, with an IP. A pod anyone else
/// made (another owner, or none) is never chosen, whatever its labels say.
pub fn head(cluster: &Value, pods: &[Value]) -> Result<Head, NoHead> {
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    let uid = cluster["metadata"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or(NoHead::NoUid)?;
    pods.iter()
        .filter(|p| labels::get(p, Meta::Labels, labels::RAY_CLUSTER) == Some(name))
        .filter(|p| labels::get(p, Meta::Labels, labels::RAY_NODE_TYPE) == Some("head"))
        .filter(|p| controlled_by(p, uid))
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["status"]["phase"] == "Running")
        .find_map(|p| {
            let ip = p["status"]["podIP"].as_str()?.parse().ok()?;
            Some(Head {
                ip,
                port: dashboard_port(p),
            })
        })
        .ok_or(NoHead::NotRunning)
}

fn controlled_by(pod: &Value, uid: &str) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["controller"] == true && o["uid"] == uid)
}

/// The head container's port named `dashboard` (KubeRay's convention), else 8265.
fn dashboard_port(pod: &Value) -> u16 {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["ports"].as_array())
        .flatten()
        .find(|p| p["name"] == DASHBOARD_PORT_NAME)
        .and_then(|p| p["containerPort"].as_u64())
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(DASHBOARD_PORT)
}

/// Whether `template` needs the head pod (`{headIP}` or `{port}`): a fixed address does not.
pub fn needs_head(template: &str) -> bool {
    template.contains("{headIP}") || template.contains("{port}")
}

/// The dashboard address of a RayCluster: `template` with `{headIP}`, `{port}`,
/// `{namespace}` and `{cluster}` filled in (`head` is needed only when [`needs_head`]).
pub fn dashboard_url(template: &str, cluster: &Value, head: Option<&Head>) -> Option<String> {
    let name = cluster["metadata"]["name"].as_str()?;
    let namespace = cluster["metadata"]["namespace"].as_str()?;
    let mut url = template
        .replace("{namespace}", namespace)
        .replace("{cluster}", name);
    if needs_head(template) {
        let head = head?;
        let ip = match head.ip {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        url = url
            .replace("{headIP}", &ip)
            .replace("{port}", &head.port.to_string());
    }
    Some(url.trim_end_matches('/').to_string())
}
