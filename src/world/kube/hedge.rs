//! A write admission cannot do without, sent again when its first try is slow.
//!
//! Under load one call can stall far past the others (measured on 2 cores with the
//! 1,000-pod Volcano burst: p99 of the PodGroup admissions 1.2 s, one create past its
//! 3 s); a create is idempotent by name (`AlreadyExists` finds the object made), so a
//! second try on another connection costs one more call for the few slow ones and
//! takes the stall out of the pod's path.

use std::future::Future;
use std::time::Duration;

/// Runs `first`; if it has not answered after `after`, starts `second()` as well and
/// returns the first success of the two (or, when both fail, the later failure: the one
/// that had more time).
pub(super) async fn first_ok<T, E, A, B>(
    first: A,
    after: Duration,
    second: impl FnOnce() -> B,
) -> Result<T, E>
where
    A: Future<Output = Result<T, E>>,
    B: Future<Output = Result<T, E>>,
{
    tokio::pin!(first);
    tokio::select! {
        answer = &mut first => return answer,
        _ = tokio::time::sleep(after) => {}
    }
    let second = second();
    tokio::pin!(second);
    tokio::select! {
        answer = &mut first => match answer {
            Ok(done) => Ok(done),
            Err(_) => second.await,
        },
        answer = &mut second => match answer {
            Ok(done) => Ok(done),
            Err(_) => first.await,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::pending;
    use tokio::time::{Instant, sleep};

    const AFTER: Duration = Duration::from_millis(1500);

    async fn answer(at: u64, result: Result<u32, &'static str>) -> Result<u32, &'static str> {
        sleep(Duration::from_millis(at)).await;
        result
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_answer_sends_nothing_more() {
        let start = Instant::now();
        let got = first_ok(answer(200, Ok(1)), AFTER, || async {
            panic!("a second try for a quick answer")
        })
        .await;
        assert_eq!(got, Ok(1));
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_failure_is_the_answer() {
        let got = first_ok(answer(100, Err("refused")), AFTER, || async {
            panic!("a second try for a refusal")
        })
        .await;
        assert_eq!(got, Err("refused"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_first_try_is_overtaken() {
        let start = Instant::now();
        let got = first_ok(pending(), AFTER, || answer(300, Ok(2))).await;
        assert_eq!(got, Ok(2));
        assert_eq!(start.elapsed(), AFTER + Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_try_still_wins_when_it_answers_first() {
        let got = first_ok(answer(1600, Ok(1)), AFTER, || answer(1000, Ok(2))).await;
        assert_eq!(got, Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn one_failure_waits_for_the_other_try() {
        let got = first_ok(answer(1600, Err("timed out")), AFTER, || answer(500, Ok(2))).await;
        assert_eq!(got, Ok(2));
        let got = first_ok(answer(2000, Ok(1)), AFTER, || answer(100, Err("lost"))).await;
        assert_eq!(got, Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn both_failing_is_a_failure() {
        let got = first_ok(answer(1600, Err("first")), AFTER, || {
            answer(900, Err("second"))
        })
        .await;
        assert_eq!(got, Err("second"));
    }
}
