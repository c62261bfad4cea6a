//! Which schema judges a config: keyed by driver, then by the parameters'
//! `apiVersion` and `kind`. The built-in schemas, overlaid by the user's
//! `DriverConfigSchema` documents (a user version replaces the built-in
//! one with the same apiVersion and kind, and adds the others).

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use super::memo::Verdicts;
use super::schema::ConfigSchema;
use super::{amd, example, nvidia};

/// The schemas of one driver's parameters, by (apiVersion, kind).
pub type DriverVersions = BTreeMap<(String, String), Arc<ConfigSchema>>;

/// Every driver's schemas in force. Cheap to clone: the compiled schemas
/// are shared.
#[derive(Clone, Debug)]
pub struct DriverSchemas {
    drivers: BTreeMap<String, DriverVersions>,
    /// Feature gates a user declared per driver (a DriverConfigSchema's
    /// `featureGates`); a gate not declared is taken to be on.
    gates: BTreeMap<String, BTreeMap<String, bool>>,
    /// Rules a user turned on per driver (a DriverConfigSchema's
    /// `optInRules`): rules no released driver has, off unless named.
    opt_in: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// The verdicts of configs judged by exactly these schemas and gates:
    /// shared by the clones, replaced by any change (`memo.rs`).
    verdicts: Arc<Verdicts>,
}

/// What the registry knows of a config's (driver, apiVersion, kind).
pub enum Lookup<'a> {
    Found(&'a ConfigSchema),
    /// No schema for the driver: admitted (`check --strict` warns).
    UnknownDriver,
    /// The driver is known but not this apiVersion: admitted, since a
    /// newer driver may serve it.
    UnknownVersion,
    /// A known apiVersion without this kind: the driver's decoder refuses
    /// it. `kinds`: those it accepts.
    UnknownKind {
        kinds: Vec<&'a str>,
    },
}

static BUILT_IN: LazyLock<DriverSchemas> = LazyLock::new(|| {
    let mut schemas = DriverSchemas {
        drivers: BTreeMap::new(),
        gates: BTreeMap::new(),
        opt_in: BTreeMap::new(),
        verdicts: Arc::default(),
    };
    for (driver, api_version, kind, openapi) in nvidia::schemas()
        .into_iter()
        .chain(example::schemas())
        .chain(amd::schemas())
    {
        // The built-in schemas' rules compile (a unit test holds them to
        // it); one that did not would judge nothing rather than everything.
        if let Ok(schema) = ConfigSchema::compile(openapi) {
            schemas.insert(driver, api_version, kind, Arc::new(schema));
        }
    }
    schemas
});

impl Default for DriverSchemas {
    fn default() -> Self {
        DriverSchemas::built_in().clone()
    }
}

impl DriverSchemas {
    /// The schemas draguard ships.
    pub fn built_in() -> &'static DriverSchemas {
        &BUILT_IN
    }

    /// Adds or replaces one version of a driver's parameters.
    pub fn insert(&mut self, driver: &str, api_version: &str, kind: &str, schema: Arc<ConfigSchema>) {
        self.verdicts = Arc::default();
        self.drivers
            .entry(driver.to_owned())
            .or_default()
            .insert((api_version.to_owned(), kind.to_owned()), schema);
    }

    /// Declares one of a driver's feature gates on or off.
    pub fn set_gate(&mut self, driver: &str, gate: &str, enabled: bool) {
        self.verdicts = Arc::default();
        self.gates
            .entry(driver.to_owned())
            .or_default()
            .insert(gate.to_owned(), enabled);
    }

    /// Whether a driver's gate is on: what a user declared, else on, so
    /// that draguard never denies what the driver could accept.
    pub fn gate(&self, driver: &str, gate: &str) -> bool {
        self.gates
            .get(driver)
            .and_then(|g| g.get(gate))
            .copied()
            .unwrap_or(true)
    }

    /// Turns on one of a driver's opt-in rules.
    pub fn opt_in(&mut self, driver: &str, rule: &str) {
        self.verdicts = Arc::default();
        self.opt_in
            .entry(driver.to_owned())
            .or_default()
            .insert(rule.to_owned());
    }

    /// Whether a user turned a driver's opt-in rule on; off by default.
    pub fn opted_in(&self, driver: &str, rule: &str) -> bool {
        self.opt_in.get(driver).is_some_and(|rules| rules.contains(rule))
    }

    /// The memo of verdicts of this schema set.
    pub fn verdicts(&self) -> &Verdicts {
        &self.verdicts
    }

    /// Every driver's schemas, by driver name (`policy compile` turns them
    /// into CEL).
    pub fn drivers(&self) -> impl Iterator<Item = (&str, &DriverVersions)> {
        self.drivers.iter().map(|(d, v)| (d.as_str(), v))
    }

    /// Whether a user declared one of `driver`'s gates off or turned one
    /// of its opt-in rules on: judgements only the webhook makes.
    pub fn has_declared_rules(&self, driver: &str) -> bool {
        self.gates.get(driver).is_some_and(|g| g.values().any(|on| !on))
            || self.opt_in.get(driver).is_some_and(|r| !r.is_empty())
    }

    pub fn knows_driver(&self, driver: &str) -> bool {
        self.drivers.contains_key(driver)
    }

    pub fn lookup(&self, driver: &str, api_version: &str, kind: &str) -> Lookup<'_> {
        let Some(versions) = self.drivers.get(driver) else {
            return Lookup::UnknownDriver;
        };
        let mut kinds = Vec::new();
        for ((v, k), schema) in versions {
            if v == api_version {
                if k == kind {
                    return Lookup::Found(schema);
                }
                kinds.push(k.as_str());
            }
        }
        if kinds.is_empty() {
            Lookup::UnknownVersion
        } else {
            Lookup::UnknownKind { kinds }
        }
    }
}
