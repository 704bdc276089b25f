//! `rayshare drain`, for uninstalling: deletes the shared clusters no job uses at once,
//! the busy ones as their jobs end (up to a bound), the index claims, and the PodGroups
//! never taken up (or gives them to their pod), so nothing rayshare made for workloads is
//! left holding nodes or queue capacity. Run it after `helm uninstall`:
//! while rayshare runs, it makes a cluster again for every new job.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::domain::drain::{self, Plan};
use crate::domain::labels;
use crate::status::{Scope, status};
use crate::world::kube::{lease_resource, pod_group_resource, ray_cluster_resource};

/// How a drain ended.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Nothing of rayshare's is left in the scope.
    Drained,
    /// These shared clusters still ran jobs when the wait was over.
    StillBusy(Vec<(drain::Key, Vec<String>)>),
}

/// How often the drain looks again while clusters are busy.
const POLL: Duration = Duration::from_secs(2);

/// Drains `scope`, waiting at most `wait` for busy clusters (`force`: delete them now).
/// Prints what it does, one line each.
pub async fn run(
    client: &kube::Client,
    scope: &Scope,
    wait: Duration,
    force: bool,
) -> Result<Outcome, kube::Error> {
    let started = Instant::now();
    let mut told = Vec::new();
    let mut first = true;
    loop {
        // The TTL does not matter here: only whether a cluster has active jobs.
        let found = status(client, scope, 0).await?;
        let plan = drain::plan(&found, force);
        act(client, scope, &plan, first).await?;
        first = false;
        if plan.done() {
            println!(
                "drained: no shared cluster, index claim, ownerless PodGroup or job of rayshare's is left running"
            );
            return Ok(Outcome::Drained);
        }
        if started.elapsed() >= wait {
            return Ok(Outcome::StillBusy(plan.busy));
        }
        if told != plan.busy {
            for ((ns, name), jobs) in &plan.busy {
                println!("waiting: raycluster {ns}/{name} runs {}", jobs.join(", "));
            }
            told = plan.busy;
        }
        tokio::time::sleep(POLL.min(wait.saturating_sub(started.elapsed()))).await;
    }
}

/// Deletes what the plan says; `tell_stranded` on the first look.
async fn act(
    client: &kube::Client,
    scope: &Scope,
    plan: &Plan,
    tell_stranded: bool,
) -> Result<(), kube::Error> {
    for (ns, name) in &plan.delete {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &ray_cluster_resource());
        if delete(&api, name).await? {
            println!("deleted: raycluster {ns}/{name}");
        }
    }
    for (ns, job) in plan.stranded.iter().filter(|_| tell_stranded) {
        println!(
            "stranded: rayjob {ns}/{job} waits for a shared cluster nothing will make; create it again"
        );
    }
    // The scope's installation's claims only (another's in the same namespace stay), one
    // by one: the chart's ServiceAccount (the uninstall hook's) may list and delete
    // claims, not delete collections.
    let claims = crate::domain::status::selectors(scope.instance.as_deref()).claims;
    for ns in &plan.claims {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &lease_resource());
        let listed = api
            .list_metadata(&ListParams::default().labels(&claims))
            .await?;
        for claim in listed.items {
            delete(&api, &claim.name_any()).await?;
        }
        println!("deleted: index claims in {ns}");
    }
    let namespaces: BTreeSet<&String> = plan.groups.iter().map(|((ns, _), _)| ns).collect();
    for ns in namespaces {
        // A pod names its group in an annotation (its own name may be generated): who
        // names which group, read once per namespace.
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let naming: BTreeMap<String, Pod> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| Some((p.annotations().get(labels::GROUP_NAME)?.clone(), p)))
            .collect();
        for ((_, group), _) in plan.groups.iter().filter(|((n, _), _)| n == ns) {
            settle_group(client, ns, group, naming.get(group)).await?;
        }
    }
    Ok(())
}

/// A PodGroup never taken up: given to the pod that names it (the garbage collector then
/// deletes it with the pod, as the group provisioner would have arranged), deleted when
/// no pod does.
async fn settle_group(
    client: &kube::Client,
    ns: &str,
    group: &str,
    pod: Option<&Pod>,
) -> Result<(), kube::Error> {
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &pod_group_resource());
    match pod {
        Some(pod) => {
            let owner = json!({"metadata": {"ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": pod.name_any(),
                "uid": pod.uid().unwrap_or_default(),
            }]}});
            groups
                .patch(group, &PatchParams::default(), &Patch::Merge(&owner))
                .await?;
            println!(
                "kept: podgroup {ns}/{group} now goes with pod {ns}/{}",
                pod.name_any()
            );
        }
        None => {
            if delete(&groups, group).await? {
                println!("deleted: podgroup {ns}/{group} (no pod names it)");
            }
        }
    }
    Ok(())
}

/// Deletes `name` in the background; `false` when it was gone already.
async fn delete(api: &Api<DynamicObject>, name: &str) -> Result<bool, kube::Error> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(e) if crate::world::kube::calls::is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
