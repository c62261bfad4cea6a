//! The vocabulary every stage and every door shares: what is asked (a
//! [`Request`] in its [`Envelope`], in a [`Phase`]), what is answered (a
//! [`Decision`], its [`Denial`], [`Warning`]s and [`ObjectRef`]), why a
//! request could not be judged ([`ReviewError`]), and what policies find
//! ([`Violation`], [`Mode`], [`Concept`]).
//!
//! It imports nothing above `field` and `objects`, so the kinds, the
//! policies and the doors can all speak it without importing `review`,
//! the module that runs the pipeline over them.

mod concept;
mod decision;
mod error;
mod mode;
mod request;
mod violation;

pub use concept::Concept;
pub use decision::{Decision, Denial, ObjectRef, Warning};
pub use error::ReviewError;
pub use mode::Mode;
pub use request::{Envelope, Phase, Request, operation_name};
pub use violation::Violation;
