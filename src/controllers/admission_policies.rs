//! The admission policies `draguard policy compile` makes of the policies
//! in force, as `serve --manage-admission-policies` keeps them in the
//! cluster, and how serve tells which of them the apiserver enforces, so
//! that the validating entries stop sending what they judge
//! (`validate_conditions`).
//!
//! A compiled part counts as enforced only when its policy and its binding
//! are both stored with the same `draguard.dev/compiled-hash` as the one
//! draguard computes from the policies in force: a stale object (an older
//! policy, a GitOps repository behind the ConfigMap) or a missing binding
//! leaves the part in the webhook's routing. The routing is never narrower
//! than what the apiserver runs.
//!
//! Pure: `admission_policies_sync` does the IO.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The label on every object serve applies, which is how it finds the ones
/// to delete when a policy goes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "draguard";
/// The annotation that says which compiled content an object holds.
pub const HASH_ANNOTATION: &str = "draguard.dev/compiled-hash";

/// The kinds `policy compile` makes, all admissionregistration.k8s.io/v1,
/// with their plural resource names.
pub const KINDS: [(&str, &str); 4] = [
    ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
    ("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
    ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings"),
];

/// One object, by kind and name.
pub type ObjectKey = (String, String);

/// An object's kind and name, when it has both.
pub fn key(object: &Value) -> Option<ObjectKey> {
    let kind = object["kind"].as_str()?;
    let name = object["metadata"]["name"].as_str()?;
    Some((kind.to_owned(), name.to_owned()))
}

/// The objects annotated with the hash of their `spec`, as `draguard
/// policy compile` prints them and serve applies them: what a GitOps
/// repository holds is recognised by it.
pub fn with_hash(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .map(|mut object| {
            let hash = spec_hash(&object["spec"]);
            let metadata = &mut object["metadata"];
            if !metadata["annotations"].is_object() {
                metadata["annotations"] = json!({});
            }
            metadata["annotations"][HASH_ANNOTATION] = json!(hash);
            object
        })
        .collect()
}

/// The objects as serve applies them: [`with_hash`], and labelled as
/// draguard's, which is how serve finds the ones to delete.
pub fn stamped(objects: Vec<Value>) -> Vec<Value> {
    with_hash(objects)
        .into_iter()
        .map(|mut object| {
            let metadata = &mut object["metadata"];
            if !metadata["labels"].is_object() {
                metadata["labels"] = json!({});
            }
            metadata["labels"][MANAGED_BY_LABEL] = json!(MANAGED_BY);
            object
        })
        .collect()
}

/// FNV-1a (64 bits) of the spec's JSON text, in hex: serde_json writes an
/// object's keys in order (no `preserve_order` feature), so the same spec
/// gives the same text on every replica and version of draguard.
pub fn spec_hash(spec: &Value) -> String {
    let text = spec.to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The hash an object carries, if any.
fn hash_of(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][HASH_ANNOTATION].as_str()
}

/// Which desired objects are stored as desired: `found` holds what the
/// cluster returned for their names (any object, ours or not).
pub fn in_force(desired: &[Value], found: &[Value]) -> BTreeSet<ObjectKey> {
    let stored: BTreeMap<ObjectKey, Option<&str>> =
        found.iter().filter_map(|o| key(o).map(|k| (k, hash_of(o)))).collect();
    desired
        .iter()
        .filter_map(|d| {
            let k = key(d)?;
            let want = hash_of(d)?;
            (stored.get(&k).copied().flatten() == Some(want)).then_some(k)
        })
        .collect()
}

/// The objects of ours (`owned`, listed by [`MANAGED_BY_LABEL`]) that no
/// desired object names any more: a policy removed or no longer compiled.
pub fn stale(desired: &[Value], owned: &[Value]) -> Vec<ObjectKey> {
    let wanted: BTreeSet<ObjectKey> = desired.iter().filter_map(key).collect();
    owned.iter().filter_map(key).filter(|k| !wanted.contains(k)).collect()
}

/// The compiled ValidatingAdmissionPolicies the apiserver runs: both the
/// policy and a binding whose `policyName` is that policy stored as
/// desired. Their names are what `validate_conditions` leaves out.
pub fn enforced_policies(desired: &[Value], in_force: &BTreeSet<ObjectKey>) -> BTreeSet<String> {
    let stored = |d: &&Value| key(d).is_some_and(|k| in_force.contains(&k));
    let policies: BTreeSet<String> = desired
        .iter()
        .filter(stored)
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    desired
        .iter()
        .filter(stored)
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .filter_map(|d| d["spec"]["policyName"].as_str())
        .filter(|name| policies.contains(*name))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vap(name: &str, expression: &str) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": {"validations": [{"expression": expression}]}})
    }

    fn binding(name: &str, policy: &str) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": ["Deny"]}})
    }

    #[test]
    fn only_a_policy_and_its_binding_stored_as_desired_are_enforced() {
        let desired = stamped(vec![
            vap("a", "true"),
            binding("a", "a"),
            vap("b", "true"),
            binding("b", "b"),
        ]);
        assert_eq!(desired[0]["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        let mut found = desired.clone();
        // b's policy is stale (an older expression), a's is current.
        found[2] = stamped(vec![vap("b", "false")]).remove(0);
        let stored = in_force(&desired, &found);
        assert_eq!(enforced_policies(&desired, &stored), BTreeSet::from(["a".to_owned()]));
        // Without its binding, a policy judges nothing.
        let unbound: Vec<Value> = found
            .iter()
            .filter(|o| o["kind"] != "ValidatingAdmissionPolicyBinding")
            .cloned()
            .collect();
        assert!(enforced_policies(&desired, &in_force(&desired, &unbound)).is_empty());
        // An object someone wrote by hand under the same name, without our hash.
        let foreign = vec![vap("a", "true"), binding("a", "a")];
        assert!(enforced_policies(&desired, &in_force(&desired, &foreign)).is_empty());
    }

    #[test]
    fn objects_of_ours_no_longer_desired_are_stale() {
        let desired = stamped(vec![vap("a", "true"), binding("a", "a")]);
        let owned = stamped(vec![
            vap("a", "true"),
            binding("a", "a"),
            vap("gone", "true"),
            binding("gone", "gone"),
        ]);
        assert_eq!(
            stale(&desired, &owned),
            vec![
                ("ValidatingAdmissionPolicy".to_owned(), "gone".to_owned()),
                ("ValidatingAdmissionPolicyBinding".to_owned(), "gone".to_owned())
            ]
        );
    }

    #[test]
    fn the_hash_is_stable_and_follows_the_spec() {
        let a = spec_hash(&json!({"b": 1, "a": [1, 2]}));
        assert_eq!(a, spec_hash(&json!({"a": [1, 2], "b": 1})), "key order");
        assert_ne!(a, spec_hash(&json!({"a": [2, 1], "b": 1})));
        assert_eq!(a.len(), 16);
    }
}
