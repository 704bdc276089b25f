//! Where a shared cluster's Ray dashboard is (pure). Never from a name a tenant wrote:
//! the RayJob's spec names the head service and could name an ExternalName Service that
//! points at another namespace's head, or a host and path of its choosing. The address
//! is the IP of the cluster's head pod, the pod KubeRay made for the cluster rayshare
//! created: the one KubeRay names in the cluster's status (`status.head.podName`, written
//! through the status subresource, which tenants do not write), controlled by the
//! cluster's uid, not on the host network; and that pod's dashboard port. An owner
//! reference alone proves nothing: anyone who may create pods can write one.

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
    #[error("KubeRay has not reported the cluster's head pod yet")]
    NotReported,
    #[error("no running head pod of this cluster has an IP yet")]
    NotRunning,
}

/// The name of the head pod KubeRay reports for `cluster` (`status.head.podName`).
pub fn head_pod_name(cluster: &Value) -> Result<&str, NoHead> {
    cluster["status"]["head"]["podName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or(NoHead::NotReported)
}

/// The head among `pods` that KubeRay made for `cluster`: the pod its status names,
/// labelled as its head, controlled by the cluster's uid, running, not being deleted,
/// not on the host network, with an IP. Any other pod is never chosen, whatever its
/// labels and owner references say.
pub fn head(cluster: &Value, pods: &[Value]) -> Result<Head, NoHead> {
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    let uid = cluster["metadata"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or(NoHead::NoUid)?;
    let pod_name = head_pod_name(cluster)?;
    pods.iter()
        .filter(|p| p["metadata"]["name"] == pod_name)
        .filter(|p| p["spec"]["hostNetwork"] != true)
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

fn controlled_by(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"]
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

/// Where a token-mode cluster's dashboard token is (KubeRay 1.6 `authOptions`; Ray >= 2.52
/// `RAY_AUTH_MODE=token`): the key `auth_token` of a Secret in the cluster's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSecret {
    pub name: String,
    /// KubeRay's own Secret for the cluster (no `secretName` in the spec): it must be
    /// controlled by the cluster's uid, as KubeRay makes it.
    pub made_for_cluster: bool,
}

pub const AUTH_TOKEN_KEY: &str = "auth_token";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("secret {0} is not the one KubeRay made for this cluster")]
    NotTheClusters(String),
    #[error("secret {0} has no usable auth_token")]
    NoToken(String),
}

/// The Secret a token-mode cluster's dashboard token is in, as KubeRay's own dashboard
/// client reads it (`GetRayDashboardClientFunc`): `authOptions.secretName`, else the
/// cluster's name as KubeRay's `CheckName` shortens it. `None`: no token needed.
pub fn auth_secret(cluster: &Value) -> Option<AuthSecret> {
    let auth = &cluster["spec"]["authOptions"];
    if auth["mode"] != "token" {
        return None;
    }
    if let Some(name) = auth["secretName"].as_str().filter(|s| !s.is_empty()) {
        return Some(AuthSecret {
            name: name.to_string(),
            made_for_cluster: false,
        });
    }
    let name = cluster["metadata"]["name"].as_str()?;
    Some(AuthSecret {
        name: kuberay_check_name(name),
        made_for_cluster: true,
    })
}

/// KubeRay's `CheckName`: at most 50 bytes (the front cut off), never starting with a
/// digit or punctuation.
fn kuberay_check_name(name: &str) -> String {
    let mut s = name
        .get(name.len().saturating_sub(50)..)
        .unwrap_or(name)
        .to_string();
    if s.starts_with(|c: char| c.is_ascii_digit() || c.is_ascii_punctuation()) {
        s.replace_range(..1, "r");
    }
    s
}

/// The token to send (`x-ray-authorization: Bearer <token>`) from `secret` (as the API
/// server has it, data base64-encoded), when `secret` is the one `expected` names for
/// `cluster`.
pub fn auth_token(
    secret: &Value,
    cluster: &Value,
    expected: &AuthSecret,
) -> Result<String, AuthError> {
    let name = || expected.name.clone();
    if expected.made_for_cluster {
        let uid = cluster["metadata"]["uid"].as_str().unwrap_or_default();
        if uid.is_empty() || !controlled_by(secret, uid) {
            return Err(AuthError::NotTheClusters(name()));
        }
    }
    let encoded = secret["data"][AUTH_TOKEN_KEY]
        .as_str()
        .ok_or_else(|| AuthError::NoToken(name()))?;
    let bytes = data_encoding::BASE64
        .decode(encoded.as_bytes())
        .map_err(|_| AuthError::NoToken(name()))?;
    let token = String::from_utf8(bytes).map_err(|_| AuthError::NoToken(name()))?;
    // A header value: visible ASCII only.
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AuthError::NoToken(name()));
    }
    Ok(token)
}

#[cfg(test)]
mod tests;
