//! A claim as its Lease says it (the shell's half of `domain::indices::claims::Claim`: the
//! Lease's metadata, and its least age by this replica's clock).

use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;

use crate::domain::indices::MAX_HOSTS;
use crate::domain::indices::Slot;
use crate::domain::indices::claims::{Claim, Span};
use crate::domain::labels;

impl Claim {
    pub(crate) fn read(o: &PartialObjectMeta<DynamicObject>) -> Option<Self> {
        let m = &o.metadata;
        Some(Self {
            name: m.name.clone()?,
            uid: m.uid.clone().unwrap_or_default(),
            resource_version: m.resource_version.clone().unwrap_or_default(),
            slot: Slot::of_labels(m.labels.as_ref()?)?,
            owner: m
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "RayCluster")
                .map(|o| o.uid.clone()),
            age: crate::world::kube::calls::least_age(m),
            span: m
                .labels
                .as_ref()?
                .get(labels::CLAIM_HOSTS)
                .map(|hosts| Span {
                    // Anyone may write a Lease in the namespace: bound what it makes us do.
                    hosts: hosts.parse::<u32>().unwrap_or(MAX_HOSTS).min(MAX_HOSTS),
                    assigned: m
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(labels::HOSTS_ASSIGNED)?.parse().ok()),
                }),
        })
    }
}
