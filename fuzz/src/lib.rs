//! What the fuzz targets share: the policies and the fixed clock every
//! review runs with, and the invariants every answer must hold. A target
//! that only checked "no panic" would pass a webhook that answers the wrong
//! uid, emits a patch that does not apply, or turns 10 KB of input into
//! 248 MB of answer; each of these is an assertion here, so libFuzzer
//! reports it as a crash with the input that caused it.

pub mod json_mutator;

use std::path::Path;
use std::sync::OnceLock;

use base64::Engine as _;
use draguard::admission::Incoming;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use draguard::review::{Context, Engine};
use draguard::verdict::{Decision, Denial, Phase, ReviewError};
use draguard::view::NoCluster;
use json_patch::PatchOperation;
use serde_json::Value;

/// The fixed size every output may have whatever the input: a denial's
/// Status is capped at a 32 KiB message and 100 causes of at most 4 KiB
/// (`src/admission/status.rs`), and issue 16 asks that the 10.6 KB deep-`[`
/// selector get "a denial under 64 KB".
pub const OUTPUT_BASE: usize = 64 << 10;
/// How many output bytes one input byte may cost on top of
/// [`OUTPUT_BASE`]. A patch grows with the input (a `timeAdded` per taint,
/// a default toleration per request: a 40-byte taint gets a 90-byte `add`,
/// 120 in base64), and a value is echoed in a cause, in the message, and Go-quoted
/// (a control character becomes 4 to 6 bytes). 16 leaves room for
/// all of it at once; an amplification (one error per nesting level, each
/// echoing the whole source) is orders of magnitude past it.
pub const OUTPUT_FACTOR: usize = 16;

/// How many bytes of an uncapped report one input byte may cost: the
/// verdict before the answer's caps, and `check`'s findings, hold one
/// cause per bad element, each with Kubernetes' fixed text, its field path
/// and (in `check`) the position and object name. The smallest bad
/// element, `{}, ` in a list of tolerations or requests, gets one or two
/// such causes: 40 to 90 bytes of report per input byte, linear in the
/// input. The amplification of issue 16, one error per nesting level each
/// echoing the whole source, is 12,000 bytes per input byte.
pub const REPORT_FACTOR: usize = 128;

/// The most bytes an output computed from `input_len` bytes of input may have.
pub fn output_bound(input_len: usize) -> usize {
    OUTPUT_BASE + OUTPUT_FACTOR * input_len
}

/// Panics (a finding) when `what` is larger than [`output_bound`].
pub fn assert_bounded(what: &str, output_len: usize, input_len: usize) {
    assert_within(what, output_len, input_len, OUTPUT_FACTOR);
}

/// Panics (a finding) when the uncapped report `what` is larger than
/// [`OUTPUT_BASE`] + [`REPORT_FACTOR`] x the input.
pub fn assert_report_bounded(what: &str, output_len: usize, input_len: usize) {
    assert_within(what, output_len, input_len, REPORT_FACTOR);
}

fn assert_within(what: &str, output_len: usize, input_len: usize, factor: usize) {
    let bound = OUTPUT_BASE + factor * input_len;
    assert!(
        output_len <= bound,
        "{what}: {output_len} bytes of output for {input_len} bytes of input (bound {OUTPUT_BASE} + {factor} x input = {bound})"
    );
}

/// The text a verdict carries before the answer caps it: every cause,
/// violation, warning and audit line. The server builds (and logs from)
/// this, so an amplification here costs memory and time even where the
/// answer is cut.
pub fn decision_text_len(decision: &Decision) -> usize {
    let denial = match &decision.denial {
        None => 0,
        Some(Denial::Invalid { errors, .. }) => errors.iter().map(|e| e.to_string().len()).sum(),
        Some(Denial::Forbidden { violations, .. }) => violations.iter().map(|v| v.message.len()).sum(),
        Some(Denial::BadRequest(e)) => e.to_string().len(),
    };
    let warnings: usize = decision.warnings.iter().map(|w| w.message.len()).sum();
    let audit: usize = decision.audit.iter().map(String::len).sum();
    denial + warnings + audit
}

/// The clock of every review: fixed, so a crash reproduces.
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_795_255_200).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// The example policies the README serves with (`--policies policies`),
/// loaded once, through the loader `serve` uses.
pub fn example_policies() -> &'static PolicySet {
    static POLICIES: OnceLock<PolicySet> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        match draguard::policy_files::load::load_dir(&dir) {
            Ok(folder) if !folder.set.is_empty() => folder.set,
            Ok(_) => panic!("fuzz setup: {} holds no policy", dir.display()),
            Err(e) => panic!("fuzz setup: cannot load {}: {e}", dir.display()),
        }
    })
}

/// The context of a review in `phase` under the rules of `version`: no
/// cluster (as `serve --no-cluster` and `review`), the given policies, the
/// fixed clock.
pub fn context(phase: Phase, policies: &PolicySet, version: KubeVersion) -> Context<'_> {
    Engine::new(policies, &NoCluster, Target::new(version)).context(now(), phase, None)
}

/// Every supported rule set gets inputs: the body's length picks one, so a
/// mutated body meets both.
pub fn version_for(body_len: usize) -> KubeVersion {
    KubeVersion::SUPPORTED[body_len % KubeVersion::SUPPORTED.len()]
}

/// One phase's verdict on a review body, after every invariant held.
pub struct Answered {
    pub decision: Decision,
    /// The answer as the server sends it, read back.
    pub answer: Value,
}

/// The three phases' answers to one body.
pub struct Answers {
    /// The body as JSON (it parsed as an AdmissionReview, so it is JSON).
    pub body: Value,
    pub validate: Answered,
    pub mutate: Answered,
    pub both: Answered,
    /// The envelope decoded, so the request was judged (not a 400).
    pub decoded: bool,
    /// The rules it was judged by.
    pub version: KubeVersion,
}

/// Answers `body` as the server does (`Incoming::parse`, `decide`,
/// `answer_with`, `to_vec`) in every phase, checking each answer.
/// `None` when the body is not an AdmissionReview (the server's 400).
pub fn answer_all_phases(body: &[u8], policies: &PolicySet) -> Option<Answers> {
    answer_all_phases_under(body, policies, version_for(body.len()))
}

/// [`answer_all_phases`] under the rules of `version`: a review compared
/// with another (the patched object's) must be judged by the same rules.
pub fn answer_all_phases_under(body: &[u8], policies: &PolicySet, version: KubeVersion) -> Option<Answers> {
    let incoming = match Incoming::parse(body) {
        Ok(incoming) => incoming,
        Err(e) => {
            assert_bounded(
                "the 400 for a body that is no AdmissionReview",
                e.to_string().len(),
                body.len(),
            );
            return None;
        }
    };
    // serde_json skips the fields the server does not read without checking
    // that they are UTF-8, so a body with a broken byte in, say,
    // `requestKind` is answered. Harmless: the uid and the objects the
    // answer depends on are checked strings. Read it the same way here.
    let tree = serde_json::from_slice::<Value>(body)
        .or_else(|_| serde_json::from_str::<Value>(&String::from_utf8_lossy(body)));
    let Ok(tree) = tree else {
        panic!("Incoming::parse accepted a body that is not JSON");
    };
    let decoded = incoming.request().is_some();
    let answer = |phase| answer_one(&incoming, &tree, body.len(), phase, policies, version);
    let validate = answer(Phase::Validate);
    let mutate = answer(Phase::Mutate);
    let both = answer(Phase::Both);
    if decoded {
        // /mutate never judges: it refuses only what it cannot read (the
        // same 400 that /validate gives), and never for a patch of its own.
        match &mutate.decision.denial {
            None => assert!(mutate.decision.allowed, "/mutate denied without a denial"),
            Some(Denial::BadRequest(ReviewError::OwnPatch(e))) => {
                panic!("draguard's own patch did not apply: {e}")
            }
            Some(Denial::BadRequest(e)) => match &validate.decision.denial {
                Some(Denial::BadRequest(v)) => assert_eq!(
                    v.to_string(),
                    e.to_string(),
                    "/validate and /mutate refuse an unreadable request differently"
                ),
                other => panic!("/mutate refused with {e}, /validate answered {other:?}"),
            },
            Some(other) => panic!("/mutate judged a request it could decode: {other:?}"),
        }
    }
    Some(Answers {
        body: tree,
        validate,
        mutate,
        both,
        decoded,
        version,
    })
}

fn answer_one(
    incoming: &Incoming,
    body: &Value,
    body_len: usize,
    phase: Phase,
    policies: &PolicySet,
    version: KubeVersion,
) -> Answered {
    let ctx = context(phase, policies, version);
    let decision = incoming.decide(&ctx);
    assert_report_bounded(
        &format!("{phase:?} verdict before the answer's caps"),
        decision_text_len(&decision),
        body_len,
    );
    let answer = incoming.answer_with(&decision, &ctx);
    let bytes = match answer.to_vec() {
        Ok(bytes) => bytes,
        Err(e) => panic!("{phase:?}: the answer does not serialize: {e}"),
    };
    assert_bounded(&format!("{phase:?} answer"), bytes.len(), body_len);
    let answer: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => panic!("{phase:?}: the answer is not JSON: {e}"),
    };
    let response = &answer["response"];
    // The apiserver matches the answer to its call by uid and apiVersion.
    assert_eq!(response["uid"], body["request"]["uid"], "{phase:?}: uid not echoed");
    assert_eq!(response["uid"].as_str(), Some(incoming.uid()), "{phase:?}");
    assert_eq!(answer["apiVersion"], body["apiVersion"], "{phase:?}: apiVersion");
    assert_eq!(answer["kind"], "AdmissionReview", "{phase:?}");
    assert_eq!(response["allowed"], decision.allowed, "{phase:?}: allowed");
    check_status(phase, &decision, response);
    check_patch(phase, &decision, response, body);
    Answered { decision, answer }
}

/// An admission carries an empty Status; a denial a 4xx code and a message.
fn check_status(phase: Phase, decision: &Decision, response: &Value) {
    let status = &response["status"];
    let code = status["code"].as_u64().unwrap_or(0);
    let message = status["message"].as_str().unwrap_or("");
    if decision.allowed {
        assert!(decision.denial.is_none(), "{phase:?}: allowed with a denial");
        assert_eq!(code, 0, "{phase:?}: allowed with a code");
        assert!(message.is_empty(), "{phase:?}: allowed with a message: {message}");
    } else {
        assert!(
            matches!(code, 400 | 403 | 422),
            "{phase:?}: denied with code {code}: {message}"
        );
        assert!(!message.is_empty(), "{phase:?}: denied without a message");
    }
}

/// Only an admitting `/mutate` carries a patch, and it applies to the
/// object of the request it answers.
fn check_patch(phase: Phase, decision: &Decision, response: &Value, body: &Value) {
    let Some(encoded) = response.get("patch") else {
        assert!(
            phase != Phase::Mutate || !decision.allowed || decision.patch.is_empty(),
            "{phase:?}: a patch was computed but not sent"
        );
        return;
    };
    assert_eq!(phase, Phase::Mutate, "a patch in a {phase:?} answer");
    assert!(decision.allowed, "a patch on a denial");
    assert_eq!(response["patchType"], "JSONPatch");
    let Some(ops) = encoded
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .and_then(|json| serde_json::from_slice::<Vec<PatchOperation>>(&json).ok())
    else {
        panic!("the patch is not base64 of a JSON Patch: {encoded}");
    };
    assert_eq!(ops, decision.patch, "the patch sent is not the patch computed");
    if let Err(e) = apply(&body["request"]["object"], &ops) {
        panic!("/mutate's patch does not apply to the request's object: {e}\npatch: {ops:?}");
    }
}

/// The object after `ops`, as the apiserver applies a JSON Patch.
pub fn apply(object: &Value, ops: &[PatchOperation]) -> Result<Value, json_patch::PatchError> {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, ops)?;
    Ok(patched)
}

/// `body` with its `request.object` replaced by `object`, as bytes.
pub fn with_object(body: &Value, object: Value) -> Vec<u8> {
    let mut body = body.clone();
    if let Some(request) = body.get_mut("request").and_then(Value::as_object_mut) {
        request.insert("object".to_owned(), object);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// How many lines a YAML parser sees in `text`: YAML breaks lines at
/// `\n`, `\r\n` and a lone `\r` (where `str::lines` sees one line), and
/// YAML 1.1 parsers also at NEL, LS and PS. A position past this is wrong.
pub fn yaml_lines(text: &str) -> u64 {
    let mut lines = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' => lines += 1,
            _ => {}
        }
    }
    lines
}

/// A conformance case (`tests/conformance/*.json`) holds its
/// AdmissionReview under `review`; any other document is taken as it is.
pub fn unwrap_case(value: Value) -> Value {
    match value {
        Value::Object(mut case) if case.get("review").is_some_and(Value::is_object) => {
            case.remove("review").unwrap_or(Value::Null)
        }
        other => other,
    }
}
