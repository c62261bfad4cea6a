//! A watch the apiserver refuses (403: draguard's ClusterRole lacks it) is
//! retried forever and never fixes itself. The real binary logs it once a
//! minute, naming the missing permission, and kube-runtime's own warning
//! per retry is hidden (counted in `draguard_library_warnings_total`).

mod support {
    pub mod fake_apiserver;
    pub mod kubeconfig;
    pub mod serve_process;
}

use support::fake_apiserver::{FakeApiServer, Objects};
use support::serve_process;

fn value(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_is_one_line_naming_the_permission() {
    let api = FakeApiServer::start(Objects::default()).await;
    api.forbid_lists("resourceclaims");
    let serve = serve_process::spawn(api.addr, &[] as &[&str]);

    // Until kube-runtime has retried (and warned) a few times.
    let errors = r#"draguard_cache_watch_errors_total{cache="resourceclaims"}"#;
    let hidden = r#"draguard_library_warnings_total{target="kube_runtime::watcher"}"#;
    let text = serve
        .scrape_until(200, |text| value(text, errors) >= 3 && value(text, hidden) >= 3)
        .await;
    let log = serve.stop();
    assert!(value(&text, errors) >= 3, "{text}");
    assert!(value(&text, hidden) >= 3, "kube-runtime warned on each retry: {text}");

    let (stderr, lines) = (&log.stderr, log.lines());
    assert!(
        !lines
            .iter()
            .any(|l| l["target"].as_str().is_some_and(|t| t.starts_with("kube_runtime"))),
        "{stderr}"
    );
    let said: Vec<&serde_json::Value> = lines.iter().filter(|l| l["what"] == "resourceclaims").collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert_eq!(said[0]["level"], "ERROR");
    assert_eq!(
        said[0]["message"],
        "watch refused: draguard's ServiceAccount may not list and watch resourceclaims.resource.k8s.io \
         cluster-wide (HTTP 403); this will not fix itself: grant the verbs list and watch on \
         resourceclaims.resource.k8s.io in its ClusterRole (deploy/base/rbac.yaml) (at most one line a \
         minute; `suppressed` errors since the last)"
    );
}
