//! Every claim, template and DeviceClass of the drivers' own repositories
//! (NVIDIA's quickstart, demo and bats specs, the rendered compute-domain
//! templates and chart DeviceClasses; the example driver's demo specs and
//! chart DeviceClass) is admitted by `check`. Each file under
//! tests/fixtures/driver_configs/ names its source (repository, path,
//! commit) in its first lines. Left out: the four NVIDIA demo files still
//! written for resource.k8s.io/v1alpha2 and v1alpha3 (demo/specs/mig+mps/
//! sharing-demo-claims*.yaml, demo/specs/selectors/claims.yaml,
//! demo/specs/quickstart/v1beta1/gpu-test-vfiopci.yaml), versions no
//! supported apiserver serves, and the e2e `.yaml.tmpl` specs, Go templates
//! the e2e framework renders at run time.

use std::path::{Path, PathBuf};

use draguard::check::{Options, Severity, Source, check};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/driver_configs");

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("corpus folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

fn sources(dir: &str) -> Vec<Source> {
    let mut files = Vec::new();
    for sub in ["nvidia", "example"] {
        let root = Path::new(CORPUS).join(sub);
        let mut found = Vec::new();
        yaml_files(&root, &mut found);
        files.extend(
            found
                .into_iter()
                .filter(|p| p.components().all(|c| c.as_os_str() != "denied") == (dir == "valid")),
        );
    }
    files.sort();
    files
        .iter()
        .map(|p| Source {
            name: p.display().to_string(),
            text: std::fs::read_to_string(p).expect("corpus file"),
        })
        .collect()
}

fn options() -> Options {
    Options::at("2026-11-21T10:00:00Z".parse().expect("time"))
}

#[test]
fn every_valid_spec_of_the_drivers_is_admitted() {
    let sources = sources("valid");
    assert!(sources.len() >= 69, "{} files", sources.len());
    for source in &sources {
        assert!(
            source.text.starts_with("# Source: ") || source.text.starts_with("# Rendered from "),
            "{}: names its source",
            source.name
        );
    }
    let report = check(&sources, &[], &options(), |_, _| {});
    let dra = ["ResourceClaim", "ResourceClaimTemplate", "DeviceClass"];
    let judged: Vec<_> = report
        .objects
        .iter()
        .filter(|o| dra.contains(&o.id.kind.as_str()))
        .collect();
    let configs: usize = sources.iter().map(|s| s.text.matches("opaque:").count()).sum();
    assert!(judged.len() >= 80, "{} claims, templates and classes", judged.len());
    assert!(configs >= 17, "{configs} configs");
    let refused: Vec<_> = judged
        .iter()
        .filter(|o| !o.allowed || o.findings.iter().any(|f| f.severity == Severity::Error))
        .map(|o| format!("{}: {:?}", o.id, o.findings))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

/// NVIDIA's bats test of a config with an unknown field, which the driver
/// fails at prepare time: draguard refuses the claim, in the words the
/// bats test greps for.
#[test]
fn the_drivers_own_bad_config_is_denied_in_its_words() {
    let sources = sources("denied");
    let report = check(&sources, &[], &options(), |_, _| {});
    let claim = &report.objects[0];
    assert!(!claim.allowed);
    let causes: Vec<_> = claim
        .findings
        .iter()
        .map(|f| (f.field.as_deref(), f.message.as_str()))
        .collect();
    assert_eq!(
        causes,
        [(
            Some("spec.devices.config[0].opaque.parameters.unexpectedField"),
            "Forbidden: strict decoding error: unknown field \"unexpectedField\""
        )]
    );
}
