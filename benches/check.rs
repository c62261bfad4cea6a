//! `draguard check` over 10,000 and 100,000 objects (claims, claim
//! templates, Deployments, DeviceTaintRules), from text to report, on
//! every core. Targets on a 2-core machine: 10,000 in under 0.25 s and
//! 100,000 in under 2.5 s (scripts/check-scale.sh measures peak memory).

use criterion::{Criterion, criterion_group, criterion_main};
use draguard::check::{Options, Source, check};

/// The binary's allocator: the figures are the command's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `n` manifests, a quarter of each kind, every tenth claim invalid so the
/// position lookup is exercised too.
pub fn manifests(n: usize) -> String {
    let mut out = String::with_capacity(n * 600);
    for i in 0..n {
        let doc = match i % 4 {
            0 => format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: claim-{i}\n  namespace: ml\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.example.com\n        count: {}\n        tolerations:\n        - key: example.com/maintenance\n          operator: Exists\n          effect: {}\n",
                1 + i % 3,
                if i % 40 == 0 { "Bogus" } else { "NoSchedule" }
            ),
            1 => format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: tmpl-{i}\n  namespace: ml\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        firstAvailable:\n        - name: large\n          deviceClassName: gpu-large.example.com\n        - name: small\n          deviceClassName: gpu-small.example.com\n          count: 2\n"
            ),
            2 => format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: ml\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: a{i}}}\n  template:\n    metadata:\n      labels: {{app: a{i}}}\n    spec:\n      tolerations:\n      - key: example.com/dedicated\n        operator: Equal\n        value: ml\n        effect: NoSchedule\n      resourceClaims:\n      - name: gpu\n        resourceClaimTemplateName: tmpl-{i}\n      containers:\n      - name: c\n        image: registry.example.com/app:1\n        resources:\n          claims:\n          - name: gpu\n"
            ),
            _ => format!(
                "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata:\n  name: rule-{i}\nspec:\n  deviceSelector:\n    driver: gpu.example.com\n    pool: node-{i}\n  taint:\n    key: example.com/maintenance\n    effect: NoExecute\n"
            ),
        };
        out.push_str("---\n");
        out.push_str(&doc);
    }
    out
}

fn bench_check(c: &mut Criterion) {
    // scripts/check-scale.sh runs the command on this mix, for its memory:
    // DRAGUARD_CHECK_MIX=FILE writes the 100,000 objects there, and stops.
    if let Some(path) = std::env::var_os("DRAGUARD_CHECK_MIX") {
        std::fs::write(&path, manifests(100_000)).expect("the mix is written");
        std::process::exit(0);
    }
    let options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    for (n, name) in [(10_000, "10,000 objects"), (100_000, "100,000 objects")] {
        let sources = vec![Source {
            name: "bench.yaml".into(),
            text: manifests(n),
        }];
        let report = check(&sources, &[], &options, |_, _| {});
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.objects.len(), n);
        assert_eq!(report.denied(), n / 40, "every tenth claim is invalid");
        group.bench_function(name, |b| b.iter(|| check(&sources, &[], &options, |_, _| {})));
    }
    group.finish();
}

criterion_group!(benches, bench_check);
criterion_main!(benches);
