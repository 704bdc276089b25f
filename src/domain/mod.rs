//! The pure core: what each feature decides, from the object, the config and what the
//! caches know. Nothing here talks to the API server or imports from the shell.

pub mod build;
pub mod check;
pub mod cluster;
pub mod drain;
pub mod events;
pub mod indices;
pub mod labels;
pub mod made_here;
pub(crate) mod naming;
pub mod orphans;
pub mod pod_group;
pub mod quantity;
pub mod reclaim;
pub mod shared_cluster;
pub mod status;
pub(crate) mod stored_pod_group;
pub mod time;
pub mod unconfirmed;
pub mod warm_ahead;
