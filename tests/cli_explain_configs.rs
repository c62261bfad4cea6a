//! `draguard explain --claims`: each request's effective driver configs,
//! the class's first, then the claim's, through the real binary.

mod support {
    pub mod cli;
}

const CLAIM: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: train, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
      - {name: mig, exactly: {deviceClassName: mig.nvidia.com}}
      config:
      - requests: [gpu]
        opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: MPS}}
";

const CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  config:
  - opaque:
      driver: gpu.nvidia.com
      parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing}}
";

#[test]
fn class_configs_first_then_the_claims() {
    let dir = tempfile::tempdir().expect("tempdir");
    let claim = dir.path().join("claim.yaml");
    let class = dir.path().join("class.yaml");
    std::fs::write(&claim, CLAIM).expect("write");
    std::fs::write(&class, CLASS).expect("write");
    let out = support::cli::draguard(
        &[
            "explain",
            "--claims",
            claim.to_str().expect("path"),
            "--classes",
            class.to_str().expect("path"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", support::cli::stderr(&out));
    assert_eq!(
        support::cli::stdout(&out),
        r#"ResourceClaimTemplate/train
  request gpu (class gpu.nvidia.com):
    1. DeviceClass/gpu.nvidia.com spec.config[0] (gpu.nvidia.com): {"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}
    2. spec.spec.devices.config[0] (gpu.nvidia.com): {"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}
  request mig (class mig.nvidia.com, not given: its configs are unknown):
    no config
"#
    );
}
