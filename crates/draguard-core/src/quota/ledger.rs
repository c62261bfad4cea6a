//! Quota usage per namespace, kept as the apiserver's quota controller
//! keeps `status.used`: each claim's charge is remembered, and a running
//! total per namespace moves by that charge when the claim is created,
//! changed or deleted. Reading a namespace's usage then costs the same with
//! one claim in the cluster or a hundred thousand.
//!
//! Totals are summed in `u128`, so that removing a charge is exact even
//! after sums that a `u64` would have had to saturate; a total is read
//! back saturated at `u64::MAX`, which [`super::excesses`] treats as over
//! any limit.
//!
//! A claim's charge is remembered in a compact form ([`Stored`]), about
//! 100 bytes with its name instead of the 500 a [`Charge`] with its own
//! class map takes: the ledger holds one per claim in the cluster.

use std::collections::{BTreeMap, HashMap};

use super::Charge;

/// Every claim's charge and each namespace's total.
#[derive(Debug, Default, Clone)]
pub struct UsageLedger {
    /// namespace -> name -> what the claim costs.
    charges: HashMap<String, HashMap<Box<str>, Stored>>,
    /// Claims recorded, over every namespace.
    claims: usize,
    totals: HashMap<String, NamespaceTotal>,
}

/// A claim's [`Charge`] as the ledger keeps it: the classes in boxed
/// slices, in the charge's (sorted) order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    claims: u64,
    devices: Box<[(Box<str>, u64)]>,
    paid_by_pods: Box<[(Box<str>, u64)]>,
}

fn compact(classes: &BTreeMap<String, u64>) -> Box<[(Box<str>, u64)]> {
    classes.iter().map(|(c, n)| (c.as_str().into(), *n)).collect()
}

fn expand(classes: &[(Box<str>, u64)]) -> BTreeMap<String, u64> {
    classes.iter().map(|(c, n)| (c.to_string(), *n)).collect()
}

fn same(stored: &[(Box<str>, u64)], classes: &BTreeMap<String, u64>) -> bool {
    stored.len() == classes.len() && stored.iter().zip(classes).all(|((a, n), (b, m))| **a == **b && n == m)
}

impl Stored {
    fn of(charge: &Charge) -> Self {
        Stored {
            claims: charge.claims,
            devices: compact(&charge.devices),
            paid_by_pods: compact(&charge.paid_by_pods),
        }
    }

    fn is(&self, charge: &Charge) -> bool {
        self.claims == charge.claims
            && same(&self.devices, &charge.devices)
            && same(&self.paid_by_pods, &charge.paid_by_pods)
    }

    fn charge(&self) -> Charge {
        Charge {
            claims: self.claims,
            devices: expand(&self.devices),
            paid_by_pods: expand(&self.paid_by_pods),
            stamped: None,
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct NamespaceTotal {
    claims: u128,
    /// Class -> devices charged, and how many recorded claims name the
    /// class (a claim may name it at 0 devices: an unknown allocation mode).
    /// A class leaves the total with the last claim naming it, so the total
    /// equals a sum taken afresh, zero entries included.
    devices: BTreeMap<String, ClassTotal>,
    /// The same for [`Charge::paid_by_pods`].
    paid_by_pods: BTreeMap<String, ClassTotal>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ClassTotal {
    devices: u128,
    named_by: u64,
}

impl UsageLedger {
    /// Records the claim `namespace/name` at `charge`, replacing what it
    /// cost before (an update) or adding it (a creation).
    pub fn put(&mut self, namespace: &str, name: &str, charge: Charge) {
        let before = self.charges.get(namespace).and_then(|claims| claims.get(name));
        if let Some(before) = before {
            if before.is(&charge) {
                // Most updates (status, labels, an allocation) leave the
                // spec, and so the charge, as it was.
                return;
            }
            let before = before.charge();
            self.subtract(namespace, &before);
        }
        self.total_mut(namespace).add(&charge);
        let claims = match self.charges.get_mut(namespace) {
            Some(claims) => claims,
            None => self.charges.entry(namespace.to_owned()).or_default(),
        };
        if claims.insert(name.into(), Stored::of(&charge)).is_none() {
            self.claims += 1;
        }
    }

    /// Forgets the claim `namespace/name` (a deletion); unknown claims are
    /// ignored, as a delete seen twice must not count twice.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        let Some(claims) = self.charges.get_mut(namespace) else {
            return;
        };
        let Some(before) = claims.remove(name) else {
            return;
        };
        if claims.is_empty() {
            self.charges.remove(namespace);
        }
        self.claims -= 1;
        self.subtract(namespace, &before.charge());
    }

    /// What the namespace's claims use; zero for a namespace with none.
    pub fn usage(&self, namespace: &str) -> Charge {
        let Some(total) = self.totals.get(namespace) else {
            return Charge::default();
        };
        let narrow = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
        let read = |classes: &BTreeMap<String, ClassTotal>| {
            classes
                .iter()
                .map(|(class, t)| (class.clone(), narrow(t.devices)))
                .collect()
        };
        Charge {
            claims: narrow(total.claims),
            devices: read(&total.devices),
            paid_by_pods: read(&total.paid_by_pods),
            stamped: None,
        }
    }

    /// How many claims are recorded.
    pub fn claims(&self) -> usize {
        self.claims
    }

    fn total_mut(&mut self, namespace: &str) -> &mut NamespaceTotal {
        self.totals.entry(namespace.to_owned()).or_default()
    }

    fn subtract(&mut self, namespace: &str, charge: &Charge) {
        let Some(total) = self.totals.get_mut(namespace) else {
            return;
        };
        total.subtract(charge);
        if total.claims == 0 && total.devices.is_empty() && total.paid_by_pods.is_empty() {
            self.totals.remove(namespace);
        }
    }
}

impl NamespaceTotal {
    fn add(&mut self, charge: &Charge) {
        self.claims += u128::from(charge.claims);
        add_classes(&mut self.devices, &charge.devices);
        add_classes(&mut self.paid_by_pods, &charge.paid_by_pods);
    }

    /// Only ever given a charge that was added before, so nothing goes
    /// below zero; `saturating_sub` keeps a bug from wrapping regardless.
    fn subtract(&mut self, charge: &Charge) {
        self.claims = self.claims.saturating_sub(u128::from(charge.claims));
        subtract_classes(&mut self.devices, &charge.devices);
        subtract_classes(&mut self.paid_by_pods, &charge.paid_by_pods);
    }
}

fn add_classes(totals: &mut BTreeMap<String, ClassTotal>, charged: &BTreeMap<String, u64>) {
    for (class, n) in charged {
        let total = totals.entry(class.clone()).or_default();
        total.devices += u128::from(*n);
        total.named_by += 1;
    }
}

fn subtract_classes(totals: &mut BTreeMap<String, ClassTotal>, charged: &BTreeMap<String, u64>) {
    for (class, n) in charged {
        if let Some(total) = totals.get_mut(class) {
            total.devices = total.devices.saturating_sub(u128::from(*n));
            total.named_by = total.named_by.saturating_sub(1);
            if total.named_by == 0 {
                totals.remove(class);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(claims: u64, devices: &[(&str, u64)]) -> Charge {
        Charge {
            claims,
            devices: devices.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn creations_updates_and_deletions_move_the_total() {
        let mut ledger = UsageLedger::default();
        ledger.put("ml", "a", charge(1, &[("gpu", 2)]));
        ledger.put("ml", "b", charge(1, &[("gpu", 1), ("nic", 1)]));
        ledger.put("other", "c", charge(1, &[("gpu", 8)]));
        assert_eq!(ledger.usage("ml"), charge(2, &[("gpu", 3), ("nic", 1)]));
        // An update replaces the claim's old charge.
        ledger.put("ml", "a", charge(1, &[("gpu", 4)]));
        assert_eq!(ledger.usage("ml"), charge(2, &[("gpu", 5), ("nic", 1)]));
        ledger.remove("ml", "b");
        assert_eq!(ledger.usage("ml"), charge(1, &[("gpu", 4)]));
        // A deletion seen twice counts once.
        ledger.remove("ml", "b");
        assert_eq!(ledger.usage("ml"), charge(1, &[("gpu", 4)]));
        ledger.remove("ml", "a");
        assert_eq!(ledger.usage("ml"), Charge::default());
        assert_eq!(ledger.usage("other"), charge(1, &[("gpu", 8)]));
        assert_eq!(ledger.usage("nowhere"), Charge::default());
        assert_eq!(ledger.claims(), 1);
    }

    #[test]
    fn the_total_equals_a_sum_taken_afresh() {
        let mut ledger = UsageLedger::default();
        let mut fresh = Charge::default();
        for i in 0..50u64 {
            let c = charge(1, &[("gpu", i % 4), ("nic", i % 3)]);
            ledger.put("ml", &format!("c{i}"), c);
        }
        for i in (0..50u64).filter(|i| i % 5 != 0) {
            ledger.remove("ml", &format!("c{i}"));
        }
        for i in (0..50u64).filter(|i| i % 5 == 0) {
            fresh.add(&charge(1, &[("gpu", i % 4), ("nic", i % 3)]));
        }
        assert_eq!(ledger.usage("ml"), fresh);
    }

    #[test]
    fn sums_past_u64_read_saturated_and_subtract_exactly() {
        let mut ledger = UsageLedger::default();
        let huge = charge(1, &[("gpu", u64::MAX)]);
        ledger.put("ml", "a", huge.clone());
        ledger.put("ml", "b", huge.clone());
        ledger.put("ml", "c", charge(1, &[("gpu", 5)]));
        assert_eq!(ledger.usage("ml"), charge(3, &[("gpu", u64::MAX)]));
        ledger.remove("ml", "a");
        ledger.remove("ml", "b");
        assert_eq!(
            ledger.usage("ml"),
            charge(1, &[("gpu", 5)]),
            "exact again once the big claims are gone"
        );
    }

    #[test]
    fn a_class_charged_zero_stays_while_its_claim_does() {
        let mut ledger = UsageLedger::default();
        // An unknown allocation mode names its class at 0.
        ledger.put("ml", "a", charge(1, &[("gpu", 0)]));
        ledger.put("ml", "b", charge(1, &[("gpu", 1)]));
        ledger.remove("ml", "b");
        assert_eq!(ledger.usage("ml"), charge(1, &[("gpu", 0)]));
        ledger.remove("ml", "a");
        assert_eq!(ledger.usage("ml"), Charge::default());
    }
}
