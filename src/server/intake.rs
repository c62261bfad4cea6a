//! A review's intake: a slot under the review cap, then its body, within
//! the body limit, the review memory budget and the body timeout. What
//! cannot get in is answered at once and counted, so that a flood, a slow
//! client or a body that decodes to far more than its size costs a bounded
//! amount of memory and time, and never a queue.
//!
//! The review memory budget is charged what a review will hold, not its
//! body's bytes ([`super::review_memory`]); the charge is held until the
//! answer is written ([`super::answer_body`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::BodyDataStream;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::ServerLimits;
use super::metrics::{Metrics, RejectReason};
use super::review_memory::{Shape, least_charge};

/// The review memory budget is counted in KiB, so that a permit count fits
/// the semaphore's `u32` for any budget up to terabytes.
const KIB: usize = 1024;

/// What an overloaded answer tells the client to wait before retrying.
const RETRY_AFTER_SECONDS: &str = "1";

pub(crate) struct Intake {
    reviews: Arc<Semaphore>,
    max_reviews: usize,
    memory: Arc<Semaphore>,
    memory_bytes: usize,
    max_body: usize,
    body_timeout: Duration,
    refusals: Throttle,
}

/// Held while a review is in progress, from its body to its written
/// answer; gives its slot and its memory charge back when dropped (for a
/// review that missed its deadline and still runs on the blocking pool:
/// when it ends).
pub(crate) struct ReviewSlot {
    _review: OwnedSemaphorePermit,
    charge: Option<OwnedSemaphorePermit>,
    memory: Arc<Semaphore>,
}

impl ReviewSlot {
    /// Grows this review's charge to `bytes`; false when the budget has no
    /// room.
    pub(crate) fn reserve(&mut self, bytes: usize) -> bool {
        let want = kib(bytes);
        let held = self
            .charge
            .as_ref()
            .map_or(0, |p| u32::try_from(p.num_permits()).unwrap_or(u32::MAX));
        if want <= held {
            return true;
        }
        match self.memory.clone().try_acquire_many_owned(want - held) {
            Ok(more) => {
                match &mut self.charge {
                    Some(charge) => charge.merge(more),
                    None => self.charge = Some(more),
                }
                true
            }
            Err(_) => false,
        }
    }
}

impl ReviewSlot {
    /// The bytes this review is charged now (in whole KiB), for a part of
    /// the review that adds to it (the workload of a scale).
    pub(crate) fn charged(&self) -> usize {
        self.charge.as_ref().map_or(0, |p| p.num_permits().saturating_mul(KIB))
    }
}

fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(KIB)).unwrap_or(u32::MAX)
}

/// Why a body was not read.
#[derive(Debug)]
enum BodyError {
    TooLarge,
    /// The budget has no room for the review's charge now.
    OverBudget,
    /// The review's charge, in bytes, is more than the whole budget.
    NeverFits(usize),
    Broken(String),
}

impl Intake {
    pub(crate) fn new(limits: &ServerLimits, max_body: usize) -> Self {
        let max_reviews = limits.max_reviews.clamp(1, Semaphore::MAX_PERMITS);
        // Never below the least charge of a body at the limit: such a body,
        // without elements, must fit alone.
        let memory_bytes = limits.review_memory.max(least_charge(max_body));
        let budget_kib = usize::try_from(kib(memory_bytes)).unwrap_or(Semaphore::MAX_PERMITS);
        Intake {
            reviews: Arc::new(Semaphore::new(max_reviews)),
            max_reviews,
            memory: Arc::new(Semaphore::new(budget_kib.min(Semaphore::MAX_PERMITS))),
            memory_bytes,
            max_body,
            body_timeout: limits.body_timeout,
            refusals: Throttle::default(),
        }
    }

    /// Bytes the reviews in progress are charged now (in whole KiB), and
    /// the budget.
    pub(crate) fn review_memory(&self) -> (usize, usize) {
        let budget_kib = self.memory_bytes.div_ceil(KIB);
        let held_kib = budget_kib.saturating_sub(self.memory.available_permits());
        (held_kib * KIB, self.memory_bytes)
    }

    /// Reviews in progress now, and the cap.
    pub(crate) fn reviews_in_flight(&self) -> (usize, usize) {
        (self.max_reviews - self.reviews.available_permits(), self.max_reviews)
    }

    /// A slot and the whole body, or the answer to give instead: 503 when
    /// the review cap or the review memory budget is full, 413 over the
    /// body limit or when the review's charge is more than the whole
    /// budget, 408 when the body does not arrive in time, 400 when the
    /// client broke off; each counted in `metrics`.
    pub(crate) async fn admit(
        &self,
        metrics: &Metrics,
        endpoint: &'static str,
        request: Request,
    ) -> Result<(Vec<u8>, ReviewSlot), Response> {
        let h1 = request.version() <= Version::HTTP_11;
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut stream = request.into_body().into_data_stream();
        let Some(mut slot) = self.slot() else {
            let message = format!(
                "overloaded: the cap of {} reviews in progress is reached; retry shortly",
                self.max_reviews
            );
            self.discard_rest(h1, stream);
            return Err(self.refuse(metrics, endpoint, RejectReason::Overloaded, message));
        };
        let read = async {
            // Refused on the headers, before a byte of the body is held.
            if let Some(length) = declared {
                let length = usize::try_from(length).map_err(|_| BodyError::TooLarge)?;
                if length > self.max_body {
                    return Err(BodyError::TooLarge);
                }
                if !slot.reserve(least_charge(length)) {
                    return Err(BodyError::OverBudget);
                }
            }
            let capacity = declared.and_then(|l| usize::try_from(l).ok()).unwrap_or(0);
            read_body(&mut stream, capacity, self, &mut slot).await
        };
        let outcome = tokio::time::timeout(self.body_timeout, read).await;
        if matches!(
            outcome,
            Ok(Err(BodyError::TooLarge
                | BodyError::OverBudget
                | BodyError::NeverFits(_)))
        ) {
            self.discard_rest(h1, stream);
        }
        match outcome {
            Ok(Ok(body)) => Ok((body, slot)),
            Ok(Err(BodyError::TooLarge)) => {
                metrics.bad_request();
                tracing::info!(endpoint, status = 413, "request body over the limit; not read");
                let message = format!("request body is larger than the limit of {} bytes", self.max_body);
                Err((StatusCode::PAYLOAD_TOO_LARGE, message).into_response())
            }
            Ok(Err(BodyError::OverBudget)) => {
                let message = format!(
                    "overloaded: reviews in progress hold the {}-byte review memory budget; retry shortly",
                    self.memory_bytes
                );
                Err(self.refuse(metrics, endpoint, RejectReason::ReviewMemory, message))
            }
            Ok(Err(BodyError::NeverFits(charge))) => {
                metrics.bad_request();
                tracing::info!(
                    endpoint,
                    status = 413,
                    charge,
                    "request body decodes to more than the review memory budget; not read further"
                );
                let message = format!(
                    "request body would take more than the {}-byte review memory budget to review",
                    self.memory_bytes
                );
                Err((StatusCode::PAYLOAD_TOO_LARGE, message).into_response())
            }
            Ok(Err(BodyError::Broken(error))) => {
                metrics.bad_request();
                tracing::info!(
                    endpoint,
                    status = 400,
                    error = error.as_str(),
                    "cannot read the request body"
                );
                Err((
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {error}"),
                )
                    .into_response())
            }
            Err(_) => {
                metrics.review_rejected(RejectReason::BodyTimeout);
                self.refusals.note(endpoint, RejectReason::BodyTimeout);
                let message = format!("request body did not arrive within {:?}", self.body_timeout);
                let mut response = (StatusCode::REQUEST_TIMEOUT, message).into_response();
                if h1 {
                    // The rest of the body may still come: the connection
                    // cannot carry another request, and keeping it open
                    // would keep the slow client's socket.
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                Err(response)
            }
        }
    }

    /// HTTP/2: what is left of a body refused unread is read and thrown
    /// away in the background, for at most the body timeout, holding no
    /// memory. Dropped at once, the stream would be reset while the client
    /// still sends, and clients such as curl (nghttp2) then report the
    /// reset and lose the answer that came before it (issue 27: a body over
    /// the limit got a stream reset, not a 413). HTTP/1.1 needs nothing:
    /// hyper closes the connection after the answer.
    fn discard_rest(&self, h1: bool, mut stream: BodyDataStream) {
        if h1 {
            return;
        }
        let within = self.body_timeout;
        tokio::spawn(async move {
            let drain = async { while let Some(Ok(_)) = stream.next().await {} };
            let _ = tokio::time::timeout(within, drain).await;
        });
    }

    /// A place under the review cap, holding no memory charge yet; `None` at
    /// the cap.
    fn slot(&self) -> Option<ReviewSlot> {
        let review = self.reviews.clone().try_acquire_owned().ok()?;
        Some(ReviewSlot {
            _review: review,
            charge: None,
            memory: self.memory.clone(),
        })
    }

    /// A 503 with Retry-After, counted.
    fn refuse(&self, metrics: &Metrics, endpoint: &'static str, reason: RejectReason, message: String) -> Response {
        metrics.review_rejected(reason);
        self.refusals.note(endpoint, reason);
        let mut response = (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
        response
    }
}

/// The body, chunk by chunk, refused as soon as it passes the body limit
/// or its review's charge passes what the budget has room for.
async fn read_body(
    stream: &mut BodyDataStream,
    capacity: usize,
    intake: &Intake,
    slot: &mut ReviewSlot,
) -> Result<Vec<u8>, BodyError> {
    let max = intake.max_body;
    let mut buffer = Vec::with_capacity(capacity.min(max));
    let mut shape = Shape::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
        let len = buffer.len().saturating_add(chunk.len());
        if len > max {
            return Err(BodyError::TooLarge);
        }
        shape.feed(&chunk);
        let charge = shape.charge();
        if charge > intake.memory_bytes {
            return Err(BodyError::NeverFits(charge));
        }
        if !slot.reserve(charge) {
            return Err(BodyError::OverBudget);
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer)
}

/// A refused review logs at debug; at warn at most one line a minute says
/// that reviews are being refused and how many since the last line, so a
/// flood of refusals costs a counter, not a line each.
#[derive(Default)]
struct Throttle {
    last: std::sync::Mutex<Option<Instant>>,
    since_last: AtomicU64,
}

const REFUSAL_LINE_EVERY: Duration = Duration::from_secs(60);

impl Throttle {
    fn note(&self, endpoint: &'static str, reason: RejectReason) {
        let reason = reason.label();
        tracing::debug!(endpoint, reason, "review refused before it started");
        let refused = self.since_last.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < REFUSAL_LINE_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        self.since_last.store(0, Ordering::Relaxed);
        drop(last);
        tracing::warn!(
            endpoint,
            reason,
            refused,
            "refusing reviews (503 overloaded or 408 slow body); see draguard_reviews_rejected_total"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intake(max_reviews: usize, review_memory: usize, max_body: usize) -> Intake {
        let limits = ServerLimits {
            max_reviews,
            review_memory,
            ..ServerLimits::default()
        };
        Intake::new(&limits, max_body)
    }

    #[test]
    fn slots_are_capped_and_given_back_on_drop() {
        let intake = intake(2, 1 << 20, 1024);
        let first = intake.slot().expect("a slot");
        let second = intake.slot().expect("a slot");
        assert_eq!(intake.reviews_in_flight(), (2, 2));
        assert!(intake.slot().is_none(), "at the cap");
        drop(first);
        assert_eq!(intake.reviews_in_flight(), (1, 2));
        assert!(intake.slot().is_some());
        drop(second);
    }

    #[test]
    fn the_charge_is_reserved_as_a_body_grows_and_given_back_with_its_slot() {
        let intake = intake(4, 40 << 10, 1024);
        let mut a = intake.slot().expect("a slot");
        assert!(a.reserve(12 << 10), "12 KiB of 40");
        assert!(a.reserve(16 << 10), "grows to 16 KiB");
        assert!(a.reserve(100), "already held: no change");
        let mut b = intake.slot().expect("a slot");
        assert!(!b.reserve(25 << 10), "24 KiB left");
        assert!(b.reserve(24 << 10));
        let mut c = intake.slot().expect("a slot");
        assert!(!c.reserve(1), "the budget is full");
        drop(a);
        assert!(c.reserve(16 << 10), "a's charge came back with its slot");
        assert!(c.reserve(0));
    }

    /// The charge goes with the answer's body, and comes back once the
    /// body has been taken whole.
    #[tokio::test]
    async fn the_charge_is_held_until_the_answer_is_taken() {
        let intake = intake(4, 1 << 20, 1024);
        let mut slot = intake.slot().expect("a slot");
        assert!(slot.reserve(8 << 10));
        let body = super::super::answer_body::AnswerBody::holding(slot, b"{}".to_vec());
        assert_eq!(intake.review_memory(), (8 << 10, 1 << 20), "held by the body");
        assert_eq!(intake.reviews_in_flight(), (1, 4));
        let taken = axum::body::to_bytes(body, usize::MAX).await.expect("the answer");
        assert_eq!(&taken[..], b"{}");
        assert_eq!(intake.review_memory(), (0, 1 << 20), "given back");
        assert_eq!(intake.reviews_in_flight(), (0, 4));
    }

    #[test]
    fn the_budget_never_falls_below_the_least_charge_of_one_body_at_the_limit() {
        let intake = intake(4, 1024, 3 << 20);
        assert_eq!(intake.memory_bytes, least_charge(3 << 20));
        let mut slot = intake.slot().expect("a slot");
        assert!(slot.reserve(least_charge(3 << 20)), "a body at the limit fits alone");
        assert!(!intake.slot().expect("a slot").reserve(1));
    }
}
