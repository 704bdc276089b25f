//! PodGroups at admission: create (or refresh) the pod's group, annotate the pod.

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::work::Work;
use crate::domain::{labels, pod_group};
use crate::world::{Created, Touched, World};

impl<W: World> Work<'_, W> {
    pub(super) async fn pod_group(&mut self) {
        let cfg = &self.cfg.pod_groups;
        let queue = self.world.namespace_queue(&self.namespace);
        let plan = pod_group::plan(
            self.object(),
            &self.namespace,
            &self.req.uid,
            queue.as_deref(),
            cfg,
            &self.cfg.opt_out_annotation,
        );
        let group = match plan {
            Err(why) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod, its shape was not understood: {why}"
                );
                return self.fail("odd_object", msg, cfg.deny_on_error);
            }
            Ok(pod_group::Plan::Skip(warning)) => {
                self.warnings.extend(warning);
                return;
            }
            Ok(pod_group::Plan::Create(g)) => *g,
        };
        match self.create(&group.group, cfg.create_timeout_ms).await {
            Ok(Created::Created) => {
                if !self.req.dry_run {
                    self.count(|m| &m.created, "PodGroup");
                }
            }
            // A retry or reinvocation for the same pod: the group is ours already.
            // A pod of the same name again (a retry, or a recreated pod): bring the group
            // up to date and stamp it, so the orphan reconciler (which deletes only the
            // version it judged) cannot take it from under the new pod.
            Ok(Created::Exists(found))
                if labels::get(&found, "labels", labels::MANAGED_BY) == Some(labels::MANAGER) =>
            {
                let patch = json!({
                    "metadata": { "annotations": {
                        labels::ADMITTED_AT: Timestamp::now().to_string(),
                        labels::ADMISSION_UID: self.req.uid,
                    }},
                    "spec": group.group["spec"],
                });
                let timeout = self.budget(cfg.create_timeout_ms);
                let refreshed = match self.world.touch(&group.group, &patch, timeout).await {
                    Ok(Touched::Alive) => Ok(()),
                    Ok(Touched::Gone) => {
                        match self.create(&group.group, cfg.create_timeout_ms).await {
                            Ok(Created::Created) => Ok(()),
                            Ok(Created::Exists(_)) => Err("name_conflict"),
                            Err(e) => Err(e.cause()),
                        }
                    }
                    Ok(Touched::Deleting) => Err("pod_group_deleting"),
                    Err(e) => Err(e.cause()),
                };
                if let Err(cause) = refreshed {
                    let msg = format!(
                        "rayshare: no PodGroup for this pod: cannot refresh PodGroup {} ({cause})",
                        group.name
                    );
                    return self.fail(cause, msg, cfg.deny_on_error);
                }
                self.count(|m| &m.reused, "PodGroup");
            }
            Ok(Created::Exists(_)) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod: a PodGroup named {} exists that rayshare did not create",
                    group.name
                );
                return self.fail("name_conflict", msg, false);
            }
            Err(e) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod (Volcano will group it itself): cannot create PodGroup {}: {e}",
                    group.name
                );
                return self.fail(e.cause(), msg, cfg.deny_on_error);
            }
        }
        self.warnings
            .push(format!("rayshare: in Volcano PodGroup {}", group.name));
        self.changed = Some(group.pod);
        self.ensured.push(group.group);
    }
}
