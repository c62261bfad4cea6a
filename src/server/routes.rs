//! HTTP routes: the two admission endpoints and the operational ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::ReadyCheck;
use super::activity::Activity;
use super::answer_body::AnswerBody;
use super::cel_compiler::OffTheAsyncWorker;
use super::drain::{Draining, SHUTTING_DOWN};
use super::duration::review_deadline;
use super::intake::{Intake, ReviewSlot};
use super::metrics::{self, Metrics};
use super::scale_workload::{FetchOutcome, ScaleWorkloads};
use crate::admission::Incoming;
use crate::kubernetes::Target;
use crate::log_field::clip;
use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::policy_files::reload::PolicyStore;
use crate::review::Engine;
use crate::review::scale::scale_target;
use crate::verdict::{Decision, Phase, operation_name};
use crate::view::ClusterView;

/// What the handlers share; built once by `server::start`.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) cluster: Arc<dyn ClusterView>,
    pub(crate) ready: ReadyCheck,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) policies: PolicyStore,
    pub(crate) toleration_restriction: Option<Arc<TolerationRestrictionConfig>>,
    pub(crate) activity: Arc<Activity>,
    /// The review cap and the body limits of `/validate` and `/mutate`.
    pub(crate) intake: Arc<Intake>,
    pub(crate) draining: Draining,
    /// The Kubernetes release whose rules judge every review.
    pub(crate) target: Target,
    /// Reads a scaled workload, when `serve` has a cluster.
    pub(crate) scale_workloads: Option<ScaleWorkloads>,
}

/// `/healthz` and `/readyz` are never behind the review cap: they answer
/// however many reviews are in progress.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Validate,
    Mutate,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
        }
    }

    fn phase(self) -> Phase {
        match self {
            Endpoint::Validate => Phase::Validate,
            Endpoint::Mutate => Phase::Mutate,
        }
    }
}

async fn validate(State(state): State<AppState>, RawQuery(query): RawQuery, request: Request) -> Response {
    admit(state, Endpoint::Validate, query, request).await
}

async fn mutate(State(state): State<AppState>, RawQuery(query): RawQuery, request: Request) -> Response {
    admit(state, Endpoint::Mutate, query, request).await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    // First, and whatever else is ready: the endpoint must go before the
    // listener does (see `drain`).
    if state.draining.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, SHUTTING_DOWN).into_response();
    }
    match (state.ready)() {
        Ok(()) => "ok".into_response(),
        Err(waiting_for) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {waiting_for}")).into_response(),
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    render_metrics(&state.metrics)
}

/// The scrape answer, for this router and for `--metrics-listen`'s.
pub(crate) fn render_metrics(metrics: &Metrics) -> Response {
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], metrics.render()).into_response()
}

/// Plain-HTTP `GET /metrics` only, for `serve --metrics-listen`: Prometheus
/// scrapes it without TLS, and nothing else is reachable on that port.
pub(crate) fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new().route("/metrics", get(move || async move { render_metrics(&metrics) }))
}

/// Bodies up to this size are reviewed inline on the async worker when the
/// cluster view answers from memory: their parse and rules take tens of
/// microseconds (`cargo bench --bench review`: under 10 µs for a typical
/// claim), less than handing them to a blocking thread and back costs. The
/// one slow step a small body can trigger, compiling an unseen CEL
/// expression, steps off the worker itself (`rules::cel`). Bigger bodies,
/// up to the body limit, can take milliseconds, and like reviews against a
/// view that may block they go to the blocking pool under the apiserver's
/// deadline.
const INLINE_REVIEW_MAX_BODY: usize = 32 << 10;

/// Takes a slot under the review cap and reads the body (`intake`: 503,
/// 413, 408 or 400 when that fails), reviews it (inline when short, else
/// off the async workers under the apiserver's deadline), and answers. The
/// slot, with the review's memory charge, is held until the answer is
/// written (`answer_body`).
async fn admit(state: AppState, endpoint: Endpoint, query: Option<String>, request: Request) -> Response {
    let (body, mut slot) = match state.intake.admit(&state.metrics, endpoint.name(), request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let started = Instant::now();
    let policies = state.policies.current();
    let deadline = review_deadline(query.as_deref());
    // Both paths hand the review its deadline: it stops there by itself.
    let stop_at = started + deadline;
    let small = body.len() <= INLINE_REVIEW_MAX_BODY;
    // With a cluster, a small body is parsed here, so that a `scale` write
    // can have its workload fetched (async IO) before it is judged; a
    // Scale is always small. Without one, nothing changes.
    let mut input = if small && state.scale_workloads.is_some() {
        match Incoming::parse(&body) {
            Ok(incoming) => {
                // The objects are copied out: the body goes before the wait.
                drop(body);
                let workload = scale_workload(&state, endpoint, &incoming, &mut slot, stop_at).await;
                Input::Parsed(Box::new(incoming), workload)
            }
            Err(e) => {
                let outcome = ReviewOutcome::NotAReview(e.to_string());
                return respond(&state, endpoint, outcome, slot, started.elapsed(), deadline);
            }
        }
    } else {
        Input::Body(body)
    };
    // A fetched workload (up to 3 MiB, however small the Scale) is judged
    // off the async worker, as a large body is.
    let fetched = matches!(input, Input::Parsed(_, Some(_)));
    if small && !fetched && state.cluster.answers_from_memory() {
        let engine = Engine::new(&policies, &*state.cluster, state.target)
            .with_toleration_restriction(state.toleration_restriction.as_deref())
            .with_cel(&OffTheAsyncWorker);
        let outcome = decide(&mut input, endpoint, &engine, stop_at);
        return respond(&state, endpoint, outcome, slot, started.elapsed(), deadline);
    }
    let cluster = state.cluster.clone();
    let toleration_restriction = state.toleration_restriction.clone();
    let target = state.target;
    let task = tokio::task::spawn_blocking(move || {
        // Held until the review ends, even past its deadline: a review
        // still running counts against the cap and the budget. The body
        // goes first: only the answer is left to hold.
        let engine = Engine::new(&policies, &*cluster, target)
            .with_toleration_restriction(toleration_restriction.as_deref())
            .with_cel(&OffTheAsyncWorker);
        let outcome = decide(&mut input, endpoint, &engine, stop_at);
        drop(input);
        (outcome, slot)
    });
    let (outcome, slot) = match tokio::time::timeout(deadline, task).await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => {
            let error = e.to_string();
            tracing::error!(endpoint = endpoint.name(), error = &*clip(&error), "review task failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, "review failed").into_response();
        }
        Err(_) => return missed_deadline(&state, endpoint, deadline),
    };
    respond(&state, endpoint, outcome, slot, started.elapsed(), deadline)
}

/// What a review judges: the body as it came, or parsed already with the
/// workload of a `scale` write when it was fetched.
enum Input {
    Body(Vec<u8>),
    Parsed(Box<Incoming>, Option<serde_json::Value>),
}

/// The workload a `scale` write on `/validate` raises, as stored, for its
/// warning; `None` for every other review, and when the fetch fails
/// (counted and logged by the fetch; the scale is admitted silently).
/// `/mutate` gives no warnings, and is never sent a scale.
async fn scale_workload(
    state: &AppState,
    endpoint: Endpoint,
    incoming: &Incoming,
    slot: &mut ReviewSlot,
    stop_at: Instant,
) -> Option<serde_json::Value> {
    let workloads = state.scale_workloads.as_ref()?;
    if !matches!(endpoint, Endpoint::Validate) {
        return None;
    }
    let target = scale_target(incoming.request()?)?;
    let left = stop_at.saturating_duration_since(Instant::now());
    // The workload's charge comes on top of the review's own.
    let base = slot.charged();
    let fetched = workloads
        .fetch(&target, left, |bytes| slot.reserve(base.saturating_add(bytes)))
        .await;
    state
        .metrics
        .scale_workload_fetched(fetched.as_ref().err().copied().unwrap_or(FetchOutcome::Fetched));
    fetched.ok()
}

/// The answer to a review past the apiserver's deadline. The apiserver has
/// given up by now; its failurePolicy decides.
fn missed_deadline(state: &AppState, endpoint: Endpoint, deadline: Duration) -> Response {
    state.metrics.timed_out();
    tracing::warn!(
        endpoint = endpoint.name(),
        ?deadline,
        "review missed the apiserver's deadline"
    );
    let message = format!("review did not finish within {deadline:?}");
    (StatusCode::GATEWAY_TIMEOUT, message).into_response()
}

fn respond(
    state: &AppState,
    endpoint: Endpoint,
    outcome: ReviewOutcome,
    slot: ReviewSlot,
    took: Duration,
    deadline: Duration,
) -> Response {
    let metrics = &state.metrics;
    match outcome {
        ReviewOutcome::MissedDeadline => missed_deadline(state, endpoint, deadline),
        // Log fields are never named `message`: JSON logs put the event's
        // own text under that key.
        ReviewOutcome::NotAReview(reason) => {
            metrics.bad_request();
            // Request-derived text is recorded as a string (quoted and escaped in
            // the text format), never with `%`, so it cannot forge a line.
            tracing::info!(
                endpoint = endpoint.name(),
                reason = &*clip(&reason),
                "rejected a request that is not an AdmissionReview"
            );
            (StatusCode::BAD_REQUEST, reason).into_response()
        }
        ReviewOutcome::Unrenderable(reason) => {
            tracing::error!(
                endpoint = endpoint.name(),
                error = &*clip(&reason),
                "cannot serialize the AdmissionReview response"
            );
            (StatusCode::INTERNAL_SERVER_ERROR, reason).into_response()
        }
        ReviewOutcome::Answered { body, summary } => {
            if summary.handled.is_none() && summary.decoded {
                metrics.unhandled_kind();
            }
            metrics.answered(endpoint.name(), summary.kind_label(), summary.allowed, took);
            if let Some(error) = &summary.internal_error {
                // Admitted without a patch, so that failurePolicy never
                // fires for a bug of ours; loud here instead.
                metrics.internal_error();
                tracing::error!(
                    endpoint = endpoint.name(),
                    uid = &*clip(&summary.uid),
                    error = &*clip(error),
                    "admitted without draguard's patch"
                );
            }
            if !summary.audit.is_empty() {
                metrics.audited(summary.audit.len());
                summary.log_audit();
            }
            let denial_line = state.activity.answered(summary.allowed);
            summary.log(endpoint, took, denial_line);
            // One buffer with a known length: hyper sends it in one write.
            // The other answers are a line of text: the slot goes with them.
            (
                [(header::CONTENT_TYPE, "application/json")],
                AnswerBody::holding(slot, body),
            )
                .into_response()
        }
    }
}

enum ReviewOutcome {
    NotAReview(String),
    /// The review stopped at its deadline, without a verdict.
    MissedDeadline,
    Unrenderable(String),
    Answered {
        body: Vec<u8>,
        summary: Box<Summary>,
    },
}

/// The whole review: parse (unless done), judge, serialize.
fn decide(input: &mut Input, endpoint: Endpoint, engine: &Engine<'_>, deadline: Instant) -> ReviewOutcome {
    let parsed;
    let (incoming, workload) = match input {
        Input::Body(body) => {
            parsed = match Incoming::parse(body) {
                Ok(incoming) => incoming,
                Err(e) => return ReviewOutcome::NotAReview(e.to_string()),
            };
            (&parsed, None)
        }
        Input::Parsed(incoming, workload) => (&**incoming, workload.take()),
    };
    let ctx = engine.context(jiff::Timestamp::now(), endpoint.phase(), Some(deadline));
    let decision = match workload {
        Some(workload) => incoming.decide_scale(&ctx, workload),
        None => incoming.decide(&ctx),
    };
    if decision.missed_deadline() {
        return ReviewOutcome::MissedDeadline;
    }
    let answer = incoming.answer_with(&decision, &ctx);
    match answer.to_vec() {
        Ok(body) => ReviewOutcome::Answered {
            body,
            summary: Box::new(Summary::new(incoming, &decision, answer.status_message())),
        },
        Err(e) => ReviewOutcome::Unrenderable(e.to_string()),
    }
}

/// Audit violations logged one by one per review; the rest are counted.
const AUDIT_LINES_PER_REVIEW: usize = 10;

/// What the log line and the metrics say about one answered review.
struct Summary {
    uid: String,
    kind: String,
    decoded: bool,
    /// The kind's static name when draguard judges it.
    handled: Option<&'static str>,
    namespace: String,
    name: String,
    operation: &'static str,
    allowed: bool,
    causes: usize,
    /// Why it was denied (the Status message the apiserver shows).
    reason: String,
    audit: Vec<String>,
    /// What `/mutate` could not compute, when it admitted without a patch.
    internal_error: Option<String>,
}

impl Summary {
    /// `reason`: the Status message already rendered for the answer.
    fn new(incoming: &Incoming, decision: &Decision, reason: &str) -> Self {
        let request = incoming.request().map(|r| &r.envelope);
        let kind = request.map(|r| &r.kind);
        Summary {
            uid: incoming.uid().to_owned(),
            handled: kind
                .and_then(|k| crate::review::registry::route(&k.group, &k.version, &k.kind))
                .map(|r| r.row.kind),
            kind: kind.map(|k| k.kind.clone()).unwrap_or_default(),
            decoded: request.is_some(),
            namespace: request.and_then(|r| r.namespace.clone()).unwrap_or_default(),
            name: request.map(|r| r.name.clone()).unwrap_or_default(),
            operation: request.map_or("", |r| operation_name(&r.operation)),
            allowed: decision.allowed,
            causes: decision.cause_count(),
            reason: reason.to_owned(),
            audit: decision.audit.clone(),
            internal_error: decision.internal_error.as_ref().map(ToString::to_string),
        }
    }

    fn kind_label(&self) -> &'static str {
        match (self.decoded, self.handled) {
            (false, _) => "undecodable",
            (true, None) => "other",
            (true, Some(kind)) => kind,
        }
    }

    /// One info line per audit violation, up to [`AUDIT_LINES_PER_REVIEW`],
    /// then one line with how many more: a request with thousands of
    /// tolerations an Audit policy dislikes costs a bounded log.
    fn log_audit(&self) {
        let (uid, namespace, name) = (clip(&self.uid), clip(&self.namespace), clip(&self.name));
        let (uid, namespace, name) = (&*uid, &*namespace, &*name);
        for violation in self.audit.iter().take(AUDIT_LINES_PER_REVIEW) {
            tracing::info!(
                uid,
                namespace,
                name,
                violation = &*clip(violation),
                "audit: a policy would have denied this"
            );
        }
        let more = self.audit.len().saturating_sub(AUDIT_LINES_PER_REVIEW);
        if more > 0 {
            tracing::info!(
                uid,
                namespace,
                name,
                more,
                "audit: more violations in this review, not logged one by one"
            );
        }
    }

    /// Debug for every review; info for a denial, which someone may have to
    /// explain, when `denial_line` says the rate limit has room for it
    /// (the rest go to debug and are counted in the activity summary).
    fn log(&self, endpoint: Endpoint, took: Duration, denial_line: bool) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let endpoint = endpoint.name();
        let (operation, causes) = (self.operation, self.causes);
        // Request-derived, so cut to a few KiB (`log_field`): a denial's
        // reason can echo a whole request. Borrowed when short.
        // `reason`, not `message`: that key holds the event text.
        let (uid, kind, reason) = (clip(&self.uid), clip(&self.kind), clip(&self.reason));
        let (uid, kind, reason) = (&*uid, &*kind, &*reason);
        // Recorded as a string, which the text format quotes and escapes:
        // request fields must not be able to forge log lines. Built only
        // when the line is written.
        let object = || clip(&format!("{}/{}", self.namespace, self.name)).into_owned();
        if self.allowed || !denial_line {
            if !tracing::enabled!(tracing::Level::DEBUG) {
                return;
            }
            let object = object();
            tracing::debug!(
                uid,
                endpoint,
                kind,
                object,
                operation,
                allowed = self.allowed,
                causes,
                micros,
                reason,
                "admission review"
            );
        } else {
            let object = object();
            tracing::info!(
                uid,
                endpoint,
                kind,
                object,
                operation,
                allowed = false,
                causes,
                micros,
                reason,
                "admission review denied"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::log_capture::{capture, top_level_keys};

    fn denial() -> Summary {
        Summary {
            uid: "u-1".into(),
            kind: "ResourceClaim".into(),
            decoded: true,
            handled: Some("ResourceClaim"),
            namespace: "ml".into(),
            name: "c".into(),
            operation: "CREATE",
            allowed: false,
            causes: 1,
            reason: "spec.devices.requests[0].name: Required value".into(),
            audit: Vec::new(),
            internal_error: None,
        }
    }

    #[test]
    fn a_denial_logs_its_reason_beside_one_message() {
        let logged = capture(true, false, || {
            denial().log(Endpoint::Validate, Duration::from_micros(42), true)
        });
        let line = logged.lines().next().expect("one line");
        let keys = top_level_keys(line);
        assert_eq!(keys.iter().filter(|k| *k == "message").count(), 1, "{keys:?}");
        let json: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(json["message"], "admission review denied");
        assert_eq!(json["reason"], "spec.devices.requests[0].name: Required value");
        assert_eq!(json["object"], "ml/c");
        assert_eq!(json["micros"], 42);
    }

    /// Request fields cannot forge a text log line: a name carrying a
    /// newline, a fake line and a terminal escape stays inside one quoted,
    /// escaped value.
    #[test]
    fn request_fields_cannot_forge_text_log_lines() {
        let mut forged = denial();
        forged.name = "c\n2026-11-23T00:00:00Z  INFO draguard: all good\u{1b}[2J".into();
        forged.uid = "u\r\nx".into();
        let logged = capture(false, false, || {
            forged.log(Endpoint::Validate, Duration::from_micros(42), true);
        });
        assert_eq!(logged.lines().count(), 1, "{logged}");
        assert!(!logged.contains('\u{1b}'), "{logged:?}");
        assert!(
            logged.contains(r#"object="ml/c\n2026-11-23T00:00:00Z  INFO draguard: all good\u{1b}[2J""#),
            "{logged}"
        );
        assert!(logged.contains(r#"uid="u\r\nx""#), "{logged}");
    }

    /// Past the denial-line budget a denial logs at debug, not info.
    #[test]
    fn a_denial_past_the_line_budget_logs_at_debug() {
        let logged = capture(true, false, || {
            denial().log(Endpoint::Validate, Duration::from_micros(42), false)
        });
        let line: serde_json::Value = serde_json::from_str(logged.lines().next().expect("one line")).unwrap();
        assert_eq!(line["level"], "DEBUG");
        assert_eq!(line["message"], "admission review");
        assert_eq!(line["allowed"], false);
        assert_eq!(line["reason"], "spec.devices.requests[0].name: Required value");
    }

    #[test]
    fn audit_lines_per_review_are_bounded() {
        let mut audited = denial();
        audited.audit = (0..25).map(|i| format!("violation {i}")).collect();
        let logged = capture(true, false, || audited.log_audit());
        let lines: Vec<serde_json::Value> = logged.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), AUDIT_LINES_PER_REVIEW + 1, "{logged}");
        assert_eq!(lines[0]["violation"], "violation 0");
        assert_eq!(lines[AUDIT_LINES_PER_REVIEW]["more"], 15);
    }

    /// A denial's reason can echo the whole request (a 10 KB expression,
    /// thousands of tolerations): each request-derived field of a line is
    /// cut to a few KiB, and says how much was left out.
    #[test]
    fn request_derived_log_fields_are_cut_to_a_few_kib() {
        use crate::log_field::MAX_LOG_FIELD;
        let mut long = denial();
        long.reason = "r".repeat(1 << 20);
        long.name = "n".repeat(100_000);
        long.audit = vec!["a".repeat(1 << 20)];
        long.internal_error = None;
        let logged = capture(true, false, || {
            long.log(Endpoint::Validate, Duration::from_micros(42), true);
            long.log_audit();
        });
        let lines: Vec<serde_json::Value> = logged.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{logged:.300}");
        assert!(
            logged.lines().all(|l| l.len() < 3 * MAX_LOG_FIELD + 1024),
            "a line stays within a few KiB"
        );
        let cut =
            |c: &str, total: usize| format!("{}… ({} more bytes)", c.repeat(MAX_LOG_FIELD), total - MAX_LOG_FIELD);
        assert_eq!(lines[0]["reason"], cut("r", 1 << 20));
        assert_eq!(
            lines[0]["object"],
            format!(
                "ml/{}… ({} more bytes)",
                "n".repeat(MAX_LOG_FIELD - 3),
                100_003 - MAX_LOG_FIELD
            )
        );
        assert_eq!(lines[1]["violation"], cut("a", 1 << 20));
        assert_eq!(lines[1]["name"], cut("n", 100_000));
    }

    #[test]
    fn kind_labels_are_bounded() {
        let mut s = denial();
        assert_eq!(s.kind_label(), "ResourceClaim");
        s.handled = None;
        assert_eq!(s.kind_label(), "other");
        s.decoded = false;
        assert_eq!(s.kind_label(), "undecodable");
    }
}
