//! A Ray dashboard's job list (`GET /api/jobs/`), read as hostile input: the head runs a
//! tenant's image, so its answer can be anything. Typed and lenient: only the four fields
//! rayshare uses are kept (a field of another type counts as absent), everything else is
//! skipped without being built, and the list stops at [`MAX_JOBS`] entries.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Submission, Tie};

/// Entries read of one list; a real head's list stays far below (rayshare deletes the
/// records of finished jobs whose RayJob is gone).
pub const MAX_JOBS: usize = 10_000;

/// The submissions of a list (entries without a submission id, drivers run by hand with
/// `ray.init`, cannot be stopped through the job API and are left out, only counted while
/// they run), and whether the list went on past [`MAX_JOBS`].
#[derive(Debug, Default, PartialEq)]
pub struct JobList {
    pub submissions: Vec<Submission>,
    /// Entries without a submission id that are PENDING or RUNNING: drivers that connected
    /// to the cluster themselves (Ray lists each as type `DRIVER`, `RUNNING` until it
    /// exits), such as a script's `ray.init` on the head or a Ray Client session's.
    pub drivers_running: usize,
    pub truncated: bool,
}

/// Reads a job list from any serde source (the answer's bytes, or a `Value` in tests).
pub fn read<'de, D: Deserializer<'de>>(d: D) -> Result<JobList, D::Error> {
    d.deserialize_any(ListVisitor)
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = JobList;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the job list, a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JobList, A::Error> {
        let mut list = JobList::default();
        let mut seen = 0;
        while seen < MAX_JOBS {
            let Some(entry) = seq.next_element::<Map<Entry>>()? else {
                return Ok(list);
            };
            seen += 1;
            let Some(entry) = entry.0 else { continue };
            match entry.submission_id.0.is_some() {
                true => list.submissions.extend(entry.submission()),
                false if entry.status.0.as_deref().is_some_and(super::active_status) => {
                    list.drivers_running += 1;
                }
                false => {}
            }
        }
        // The rest is skipped unread, each entry in turn.
        while seq.next_element::<IgnoredAny>()?.is_some() {
            list.truncated = true;
        }
        Ok(list)
    }
}

/// The flags of the job API's answers to a stop (`stopped`) or a delete (`deleted`).
#[derive(Default, Deserialize)]
#[serde(default)]
pub struct Flags {
    stopped: Scalar<bool>,
    deleted: Scalar<bool>,
}

impl Flags {
    /// The answer to a stop says the job was stopped.
    pub fn stopped(&self) -> bool {
        self.stopped.0 == Some(true)
    }

    /// The answer to a delete says the record was deleted.
    pub fn deleted(&self) -> bool {
        self.deleted.0 == Some(true)
    }
}

/// One entry: the fields rayshare reads, each `None` when absent or of another type.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Entry {
    submission_id: Scalar<String>,
    status: Scalar<String>,
    runtime_env: Map<RuntimeEnv>,
    end_time: Scalar<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RuntimeEnv {
    env_vars: Map<EnvVars>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct EnvVars {
    #[serde(rename = "RAYSHARE_ADMISSION")]
    admission: Scalar<String>,
}

impl Entry {
    fn submission(self) -> Option<Submission> {
        let tie = self
            .runtime_env
            .0
            .and_then(|r| r.env_vars.0)
            .and_then(|e| e.admission.0);
        Some(Submission {
            id: self.submission_id.0?,
            status: self.status.0.unwrap_or_default(),
            tie: tie.as_deref().and_then(Tie::parse),
            end_time: self.end_time.0,
        })
    }
}

/// A string or unsigned number when the value is one, else `None` (skipped unread).
struct Scalar<T>(Option<T>);

/// A struct `T` when the value is a map (its other keys skipped unread), else `None`.
struct Map<T>(Option<T>);

impl<T> Default for Scalar<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T> Default for Map<T> {
    fn default() -> Self {
        Self(None)
    }
}

/// The `visit_*` methods for values of the wrong kind: `None`, a list or map consumed
/// unread (so the parser stays in step).
macro_rules! otherwise_none {
    ($wrap:ident) => {
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrap(None))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrap(None))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(None))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(None))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| $wrap(None))
        }
    };
}

struct ScalarVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ScalarVisitor<T> {
    type Value = Scalar<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let read = T::deserialize(de::value::StrDeserializer::<E>::new(v));
        Ok(Scalar(read.ok()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        let read = T::deserialize(de::value::U64Deserializer::<E>::new(v));
        Ok(Scalar(read.ok()))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        let read = T::deserialize(de::value::BoolDeserializer::<E>::new(v));
        Ok(Scalar(read.ok()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Scalar(None))
    }
    otherwise_none!(Scalar);
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Scalar<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor::<T>(std::marker::PhantomData))
    }
}

struct MapVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for MapVisitor<T> {
    type Value = Map<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Map(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Map(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Map(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        // `T`'s fields are all lenient: reading it consumes the map whatever it holds.
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Map(Some(t)))
    }
    otherwise_none!(Map);
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Map<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MapVisitor::<T>(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::super::TOKEN_ENV;
    use super::*;
    use serde_json::json;

    fn from_bytes(body: &[u8]) -> Result<JobList, serde_json::Error> {
        read(&mut serde_json::Deserializer::from_slice(body))
    }

    #[test]
    fn the_token_is_read_under_its_name() {
        assert_eq!(TOKEN_ENV, "RAYSHARE_ADMISSION");
    }

    #[test]
    fn fields_of_another_type_count_as_absent() {
        let body = json!([
            {"submission_id": 7, "status": "RUNNING"},
            {"submission_id": "a", "status": ["x"], "end_time": "soon",
             "runtime_env": {"env_vars": {TOKEN_ENV: {"deep": [1, 2]}}}},
            {"submission_id": "b", "status": "RUNNING", "runtime_env": "none",
             "extra": {"a": [{"b": {"c": 1}}]}},
            {"submission_id": "c", "status": "STOPPED", "end_time": 5,
             "runtime_env": {"env_vars": {TOKEN_ENV: "rs/team/uid-c", "OTHER": [1]}}},
            "not an object",
        ]);
        let list = from_bytes(body.to_string().as_bytes()).unwrap();
        let got: Vec<_> = list
            .submissions
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.status.as_str(),
                    s.tie.is_some(),
                    s.end_time,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", "", false, None),
                ("b", "RUNNING", false, None),
                ("c", "STOPPED", true, Some(5))
            ]
        );
        assert!(!list.truncated);
    }

    #[test]
    fn drivers_without_a_submission_are_counted_while_they_run() {
        let body = json!([
            {"type": "DRIVER", "job_id": "01000000", "status": "RUNNING"},
            {"type": "DRIVER", "job_id": "02000000", "status": "SUCCEEDED"},
            {"type": "DRIVER", "job_id": "03000000", "status": 7},
            {"type": "SUBMISSION", "submission_id": "s", "status": "RUNNING"},
        ]);
        let list = from_bytes(body.to_string().as_bytes()).unwrap();
        assert_eq!(list.drivers_running, 1);
        assert_eq!(list.submissions.len(), 1);
    }

    #[test]
    fn a_list_past_the_cap_is_cut_and_says_so() {
        let entry = json!({"submission_id": "x", "status": "RUNNING"});
        let body = json!(vec![entry; MAX_JOBS + 5]);
        let list = from_bytes(body.to_string().as_bytes()).unwrap();
        assert_eq!(list.submissions.len(), MAX_JOBS);
        assert!(list.truncated);
    }

    #[test]
    fn flags_are_true_only_when_true() {
        let flags = |body: &str| serde_json::from_str::<Flags>(body).unwrap();
        assert!(flags(r#"{"stopped": true, "x": [{"a": 1}]}"#).stopped());
        assert!(!flags(r#"{"stopped": "true"}"#).stopped());
        assert!(!flags(r#"{"stopped": {"a": true}}"#).stopped());
        assert!(flags(r#"{"deleted": true}"#).deleted());
        assert!(!flags("{}").deleted());
    }

    #[test]
    fn anything_but_an_array_is_an_error() {
        assert!(from_bytes(br#"{"jobs": []}"#).is_err());
        assert!(from_bytes(b"\"x\"").is_err());
        assert!(from_bytes(b"[1,").is_err());
    }

    /// 4 MB of tiny objects, as a hostile head could answer: nothing of them is built.
    #[test]
    fn tiny_objects_are_skipped_not_built() {
        let mut body = b"[".to_vec();
        for i in 0..500_000 {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(br#"{"a":0}"#);
        }
        body.push(b']');
        let list = from_bytes(&body).unwrap();
        assert!(list.submissions.is_empty());
        assert!(list.truncated);
    }
}
