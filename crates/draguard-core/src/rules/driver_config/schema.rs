//! One kind of a driver's parameters, compiled: its `openAPIV3Schema` and
//! the CEL rules in it. Compiled once (at start for the built-in schemas,
//! at load for a user's), then shared by every review.

use serde_json::Value;

use super::{cel, structural};
use crate::field::{FieldError, Path};

/// A parameters kind's schema, ready to judge.
pub struct ConfigSchema {
    openapi: Value,
    rules: cel::Rules,
}

impl std::fmt::Debug for ConfigSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSchema").finish_non_exhaustive()
    }
}

impl ConfigSchema {
    /// Compiles `openapi`; the errors are the rules that do not compile.
    pub fn compile(openapi: Value) -> Result<ConfigSchema, Vec<String>> {
        let rules = cel::Rules::compile(&openapi)?;
        Ok(ConfigSchema { openapi, rules })
    }

    /// The `openAPIV3Schema` it was compiled from.
    pub fn openapi(&self) -> &Value {
        &self.openapi
    }

    /// What is wrong with `parameters`, at paths under `base` (the
    /// `parameters` field). The rules run only on data of the right shape,
    /// as the apiserver runs a CRD's: a rule over a mistyped field would
    /// only repeat the structural error in worse words.
    pub fn judge(&self, parameters: &Value, base: &Path) -> Vec<FieldError> {
        let mut errs = Vec::new();
        structural::judge(&self.openapi, parameters, base, true, &mut errs);
        if errs.is_empty() {
            self.rules.judge(parameters, base, &mut errs);
        }
        errs
    }
}
