//! What a watch error means for the operator: which errors are the same
//! one (for the log's rate limit), and which will not go away by retrying.
//!
//! A 401 or 403 from the apiserver is an RBAC or credential problem: the
//! watcher retries it forever with backoff, but nothing changes until an
//! administrator grants the permission, so the log says which permission
//! is missing instead of "retrying".

use kube::runtime::watcher;

/// The HTTP status the apiserver answered the list or watch with, if the
/// error is one.
pub(crate) fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    }
}

/// 401 (the credentials are not accepted) or 403 (RBAC): retrying never
/// helps.
pub(crate) fn is_denied(error: &watcher::Error) -> bool {
    matches!(status_code(error), Some(401 | 403))
}

/// Errors with the same key are one error for the log's rate limit: the
/// apiserver's status code and reason, else the error's text (which for a
/// transport error names the cause, e.g. "Connection refused"), cut so a
/// key stays small.
pub(crate) fn key(error: &watcher::Error) -> String {
    const MAX_KEY: usize = 160;
    let status = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status),
        watcher::Error::WatchError(status) => Some(status),
        _ => None,
    };
    let mut key = match status {
        Some(status) => format!("HTTP {} {}", status.code, status.reason),
        None => error.to_string(),
    };
    if key.len() > MAX_KEY {
        let end = (0..=MAX_KEY).rev().find(|&i| key.is_char_boundary(i)).unwrap_or(0);
        key.truncate(end);
    }
    key
}

/// The RBAC resource a watch of `url` (as `kube::Api::resource_url` gives
/// it: `/api/v1/namespaces`, `/apis/resource.k8s.io/v1/resourceclaims`)
/// lists and watches: `namespaces`, `resourceclaims.resource.k8s.io`.
pub(crate) fn rbac_resource(url: &str) -> String {
    let parts: Vec<&str> = url.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api", _version, plural, ..] => (*plural).to_owned(),
        ["apis", group, _version, plural, ..] => format!("{plural}.{group}"),
        _ => url.to_owned(),
    }
}

/// What the log and `/readyz` say about a watch the apiserver refuses.
pub(crate) fn denied_message(code: u16, resource: &str) -> String {
    match code {
        401 => format!(
            "the apiserver does not accept draguard's credentials (HTTP 401) for list and watch on {resource}; \
             this will not fix itself: check the ServiceAccount token or --kubeconfig"
        ),
        _ => format!(
            "draguard's ServiceAccount may not list and watch {resource} cluster-wide (HTTP 403); \
             this will not fix itself: grant the verbs list and watch on {resource} in its ClusterRole \
             (deploy/base/rbac.yaml)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.to_owned(),
            message: message.to_owned(),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn denied_is_401_or_403_wherever_the_watch_got_it() {
        let forbidden = || api_error(403, "Forbidden", "resourceclaims.resource.k8s.io is forbidden");
        assert!(is_denied(&watcher::Error::InitialListFailed(forbidden())));
        assert!(is_denied(&watcher::Error::WatchStartFailed(forbidden())));
        assert!(is_denied(&watcher::Error::WatchFailed(api_error(
            401,
            "Unauthorized",
            ""
        ))));
        assert!(!is_denied(&watcher::Error::InitialListFailed(api_error(
            500,
            "InternalError",
            ""
        ))));
        assert!(!is_denied(&watcher::Error::NoResourceVersion));
        assert_eq!(status_code(&watcher::Error::NoResourceVersion), None);
    }

    #[test]
    fn the_same_status_is_one_error_whatever_its_message() {
        let a = watcher::Error::InitialListFailed(api_error(403, "Forbidden", "cannot list at 12:00:01"));
        let b = watcher::Error::WatchStartFailed(api_error(403, "Forbidden", "cannot watch at 12:00:02"));
        assert_eq!(key(&a), "HTTP 403 Forbidden");
        assert_eq!(key(&a), key(&b));
        let other = watcher::Error::InitialListFailed(api_error(500, "InternalError", ""));
        assert_ne!(key(&a), key(&other));
        assert_eq!(
            key(&watcher::Error::NoResourceVersion),
            "no metadata.resourceVersion in watch result (does resource support watch?)"
        );
    }

    #[test]
    fn the_rbac_resource_of_a_watch_url() {
        assert_eq!(rbac_resource("/api/v1/namespaces"), "namespaces");
        assert_eq!(rbac_resource("/api/v1/resourcequotas"), "resourcequotas");
        assert_eq!(
            rbac_resource("/apis/resource.k8s.io/v1/resourceclaims"),
            "resourceclaims.resource.k8s.io"
        );
        assert_eq!(rbac_resource("/weird"), "/weird");
    }

    #[test]
    fn a_denied_watch_names_the_permission_and_does_not_promise_a_retry() {
        let said = denied_message(403, "resourceclaims.resource.k8s.io");
        assert_eq!(
            said,
            "draguard's ServiceAccount may not list and watch resourceclaims.resource.k8s.io cluster-wide \
             (HTTP 403); this will not fix itself: grant the verbs list and watch on \
             resourceclaims.resource.k8s.io in its ClusterRole (deploy/base/rbac.yaml)"
        );
        let said = denied_message(401, "namespaces");
        assert!(
            said.contains("HTTP 401") && said.contains("will not fix itself"),
            "{said}"
        );
        for said in [denied_message(403, "x"), denied_message(401, "x")] {
            assert!(!said.contains("retry"), "{said}");
        }
    }
}
