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
        let plan = pod_group::plan(
            self.object(),
            &self.req.uid,
            cfg,
            &self.cfg.opt_out_annotation,
        );
        let name = match plan {
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
            Ok(pod_group::Plan::Create { name }) => name,
        };
        if !self.req.dry_run {
            self.count(|m| &m.planned, "PodGroup");
        }
        self.warnings
            .push(format!("rayshare: in Volcano PodGroup {name}"));
        let mut pod = self.object().clone();
        labels::set(&mut pod, Meta::Annotations, labels::GROUP_NAME, &name);
        labels::set(&mut pod, Meta::Labels, GROUPED, &self.cfg.instance);
        self.changed = Some(pod);
    }
}
