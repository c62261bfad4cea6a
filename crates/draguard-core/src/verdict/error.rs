//! Why a request could not be judged at all (HTTP 400), or why `/mutate`
//! had to give up on its own patch.

use crate::objects::DecodeError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReviewError {
    /// CREATE and UPDATE carry the object; a request without it is malformed.
    #[error("{kind} {operation} request carries no object")]
    NoObject { kind: String, operation: &'static str },
    #[error("{kind} UPDATE request carries no oldObject")]
    NoOldObject { kind: String },
    /// The object does not have the shape its kind requires.
    #[error("{object} could not be decoded: {source}")]
    Undecodable { object: String, source: DecodeError },
    /// The old object does not have the shape its kind requires.
    #[error("{object} could not be decoded: oldObject: {source}")]
    OldUndecodable { object: String, source: DecodeError },
    /// draguard's own patch did not apply to the object it was computed
    /// for: a bug of ours, never the requester's.
    #[error("cannot apply draguard's own patch: {0}")]
    OwnPatch(String),
    /// PodTolerationRestriction cannot read the namespace's annotations.
    #[error("{0}")]
    PodTolerationRestriction(String),
    /// The envelope itself was not an AdmissionRequest.
    #[error("{0}")]
    Envelope(String),
    /// The review passed its deadline and stopped; the server answers 504
    /// (it has already, when the review ran off the async workers).
    #[error("the review did not finish before its deadline")]
    DeadlinePassed,
}
