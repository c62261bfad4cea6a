//! What an audit of the live cluster reads: every kind the webhook judges,
//! and the facts the judgement reads besides (ResourceQuotas,
//! DeviceClasses), each with whether it is namespaced. `audit --cluster`
//! reads them all at once; serve's background audit reads the namespaced
//! ones a namespace at a time.

use super::paged_list::Collection;

/// A collection to read, and whether its objects live in namespaces.
pub struct Audited {
    pub collection: Collection,
    pub namespaced: bool,
}

/// The facts first, then the judged kinds in the registry's order; a fact
/// that is also a judged kind (DeviceClass) is read once.
pub fn audited() -> Vec<Audited> {
    let facts = [
        Audited {
            collection: Collection {
                group: "",
                versions: &["v1"],
                plural: "resourcequotas",
                kind: "ResourceQuota",
            },
            namespaced: true,
        },
        Audited {
            collection: Collection {
                group: "resource.k8s.io",
                versions: &["v1", "v1beta2", "v1beta1"],
                plural: "deviceclasses",
                kind: "DeviceClass",
            },
            namespaced: false,
        },
    ];
    let judged = crate::review::registry::rows()
        .filter(|row| {
            !facts
                .iter()
                .any(|f| f.collection.group == row.group && f.collection.plural == row.plural)
        })
        .map(|row| Audited {
            collection: Collection {
                group: row.group,
                versions: row.versions,
                plural: row.plural,
                kind: row.kind,
            },
            namespaced: row.namespaced,
        })
        .collect::<Vec<_>>();
    facts.into_iter().chain(judged).collect()
}
