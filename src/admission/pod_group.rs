//! PodGroups at admission: name the pod's group on the pod, and label the pod for the
//! group provisioner (`reconcile::group_provision`), which makes the group once the API
//! server has stored the pod. No API writes here: a forged review holds no capacity.

use super::work::Work;
use crate::cause::Cause;
use crate::domain::labels::Meta;
use crate::domain::stored_pod_group::GROUPED;
use crate::domain::{labels, pod_group};
use crate::world::World;

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
                return self.fail(Cause::OddObject, msg, cfg.deny_on_error);
            }
            Ok(pod_group::Plan::Skip(warning)) => {
                self.warnings.extend(warning);
                return;
            }
            Ok(pod_group::Plan::Create(g)) => *g,
        };
        if !self.req.dry_run {
            self.count(|m| &m.planned, "PodGroup");
        }
        self.warnings
            .push(format!("rayshare: in Volcano PodGroup {}", group.name));
        let mut pod = group.pod;
        labels::set(&mut pod, Meta::Labels, GROUPED, &self.cfg.instance);
        self.changed = Some(pod);
        self.ensured.push(group.group);
    }
}
