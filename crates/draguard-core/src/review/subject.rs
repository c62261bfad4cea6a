//! Decode: the request's object (and stored object) read once into the
//! kind's typed view, which every later stage reads.

use std::borrow::Cow;

use kube_core::admission::Operation;
use serde_json::Value;

use crate::kinds::{AdmittedKind, ObjectView, Routed};
use crate::objects::ObjectJson;
use crate::verdict::{ObjectRef, Request, ReviewError, operation_name};

/// One object under review: where it is routed, its JSON and its typed
/// view, and the same for the stored object on UPDATE.
pub struct ReviewSubject<'r, K: AdmittedKind> {
    pub routed: Routed,
    pub request: &'r Request,
    pub object: Cow<'r, ObjectJson>,
    pub view: K::View,
    pub old_object: Option<&'r ObjectJson>,
    pub old: Option<K::View>,
}

impl<'r, K: AdmittedKind> ReviewSubject<'r, K> {
    /// `Ok(None)` when the write is not judged at all (see
    /// [`AdmittedKind::judged`]). Both views get the defaults the apiserver
    /// gives each object it decodes ([`AdmittedKind::decode_defaults`]),
    /// `now` being the review's time in its stored form.
    pub fn decode(routed: Routed, request: &'r Request, now: &str) -> Result<Option<Self>, ReviewError> {
        let env = &request.envelope;
        let Some(object) = request.object.as_ref() else {
            return Err(ReviewError::NoObject {
                kind: env.kind.kind.clone(),
                operation: operation_name(&env.operation),
            });
        };
        let old_object = match (&request.old_object, &env.operation) {
            (Some(old), Operation::Update) => Some(old),
            (None, Operation::Update) => {
                return Err(ReviewError::NoOldObject {
                    kind: env.kind.kind.clone(),
                });
            }
            _ => None,
        };
        let mut view = K::decode(object, routed).map_err(|source| ReviewError::Undecodable {
            object: unnamed(request).describe(),
            source,
        })?;
        let mut old =
            old_object
                .map(|o| K::decode(o, routed))
                .transpose()
                .map_err(|source| ReviewError::OldUndecodable {
                    object: named(request, view.metadata().name.as_deref()).describe(),
                    source,
                })?;
        K::decode_defaults(&mut view, now);
        if let Some(old) = old.as_mut() {
            K::decode_defaults(old, now);
        }
        if !K::judged(&view, old.as_ref()) {
            return Ok(None);
        }
        Ok(Some(ReviewSubject {
            routed,
            request,
            object: Cow::Borrowed(object),
            view,
            old_object,
            old,
        }))
    }

    /// The subject after draguard's own patch: the object as `/validate`
    /// will see it, decoded again only because it changed.
    pub fn patched(self, patched: Value, now: &str) -> Result<Self, ReviewError> {
        let object = ObjectJson::Tree(patched);
        let mut view = K::decode(&object, self.routed).map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
        K::decode_defaults(&mut view, now);
        Ok(ReviewSubject {
            object: Cow::Owned(object),
            view,
            ..self
        })
    }

    /// The object a verdict names.
    pub fn object_ref(&self) -> ObjectRef {
        named(self.request, self.view.metadata().name.as_deref())
    }

    pub fn namespace(&self) -> &'r str {
        self.request.envelope.namespace()
    }

    pub fn is_create(&self) -> bool {
        self.request.envelope.operation == Operation::Create
    }
}

/// The object as named by the request (its own name may be unreadable).
fn unnamed(request: &Request) -> ObjectRef {
    named(request, None)
}

/// The object's own name, or the request's when it has none (a
/// `generateName` CREATE).
fn named(request: &Request, name: Option<&str>) -> ObjectRef {
    let env = &request.envelope;
    ObjectRef {
        group: env.kind.group.clone(),
        kind: env.kind.kind.clone(),
        name: name.filter(|n| !n.is_empty()).unwrap_or(&env.name).to_owned(),
    }
}
