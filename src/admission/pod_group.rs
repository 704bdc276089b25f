//! PodGroups at admission: name the pod's group on the pod, label the pod for the group
//! provisioner (`reconcile::make_groups`), and make the group now, so it exists when
//! Volcano's own admission webhook (`pods/validate`, which runs after every mutating
//! webhook) looks for it.
//!
//! A review alone is no proof that the pod will exist, so what is made here is held to
//! the least: only in a namespace rayshare's own watch shows served, a group for one pod
//! that reserves no queue capacity (no priority; requests no queue can hold, so Volcano
//! leaves it Pending: `pod_group::unconfirmed`), labelled as
//! rayshare's and as not yet taken up, and at most so many at once
//! (`domain::unconfirmed`). The provisioner takes it up from the pod the API server
//! stored (requests, priority, the pod's uid, owning it by a bare pod); one that no stored
//! pod took up is deleted after `podGroups.unconfirmedGraceSeconds`
//! (`reconcile::orphan_groups`).

use super::work::Work;
use crate::cause::Cause;
use crate::domain::labels::Meta;
use crate::domain::{labels, pod_group};
use crate::world::{Created, World};

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
        if cfg.create_at_admission && !self.req.dry_run {
            if let Err((cause, msg)) = self.make_group(&name).await {
                // The pod stays as it was: Volcano's own controller groups it.
                return self.fail(cause, msg, cfg.deny_on_error);
            }
        } else if !self.req.dry_run {
            self.count(|m| &m.planned, "PodGroup");
        }
        self.warnings
            .push(format!("rayshare: in Volcano PodGroup {name}"));
        let mut pod = self.object().clone();
        labels::set(&mut pod, Meta::Annotations, labels::GROUP_NAME, &name);
        labels::set(
            &mut pod,
            Meta::Labels,
            labels::POD_GROUPED,
            &self.cfg.instance,
        );
        self.changed = Some(pod);
    }

    /// Creates the group (or finds it made already, by an earlier call for this pod).
    async fn make_group(&mut self, name: &str) -> Result<(), (Cause, String)> {
        let cfg = &self.cfg.pod_groups;
        if !self.served_namespace() {
            return Err(not_served(&self.namespace));
        }
        let queue = self.world.namespace_queue(&self.namespace);
        let odd = |why: String| (Cause::OddObject, format!("rayshare: no PodGroup: {why}"));
        // From the few fields triage read: what the group needs of the whole pod
        // (requests, priority) the provisioner adds from the stored pod.
        let group = pod_group::group(
            self.object(),
            &self.namespace,
            &self.req.uid,
            name,
            queue.as_deref(),
            cfg,
        )
        .map_err(|e| odd(e.to_string()))?;
        let mut group = pod_group::unconfirmed(group);
        if !self.world.note_unconfirmed_group(&self.namespace, name) {
            return Err((
                Cause::UnconfirmedBound,
                format!(
                    "rayshare: no PodGroup for this pod: too many groups made at admission \
                     wait for their pods in namespace {} (at most {} there, {} in all)",
                    self.namespace,
                    crate::domain::unconfirmed::PER_NAMESPACE,
                    crate::domain::unconfirmed::IN_ALL
                ),
            ));
        }
        labels::set(
            &mut group,
            Meta::Labels,
            labels::INSTANCE,
            &self.cfg.instance,
        );
        // The kube world sends a slow try again (`world::kube::hedge`).
        let per_try = cfg.create_timeout_ms;
        match self.world.create(&group, self.budget(per_try)).await {
            Ok(Created::Created) => {
                self.count(|m| &m.created, "PodGroup");
                self.ensured.push(group);
                Ok(())
            }
            // A retried admission of this pod made it, or an earlier pod of the same name
            // left it: the provisioner brings it up to date from the stored pod.
            Ok(Created::Exists(existing)) => {
                self.ensured.push(existing);
                Ok(())
            }
            Err(e) => Err((
                e.cause(),
                format!("rayshare: no PodGroup for this pod, it could not be made: {e}"),
            )),
        }
    }
}

/// Why a pod review for a namespace rayshare does not serve gets no side effect.
pub(super) fn not_served(namespace: &str) -> (Cause, String) {
    (
        Cause::NotServed,
        format!(
            "rayshare: left unchanged: namespace {namespace:?} is not one rayshare serves \
             (as its namespace watch shows it now)"
        ),
    )
}
