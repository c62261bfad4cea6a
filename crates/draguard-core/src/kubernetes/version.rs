//! The Kubernetes minor versions whose rules draguard carries.

use std::fmt;

/// A Kubernetes minor release whose validation rules, limits and messages
/// draguard reproduces. Ordered: `V1_36 < V1_37 < V1_38`, so a rule that
/// changed in 1.37 reads `version >= KubeVersion::V1_37`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KubeVersion {
    V1_36,
    V1_37,
    /// Carried ahead of its release (due 2026-12-16): its rules come from
    /// the 1.38 CHANGELOG (alpha.1, alpha.2) and merged PRs, and the
    /// messages only PR text gives are in [`crate::rules::unverified`].
    /// It is chosen by name or by a 1.38 apiserver, never by default.
    V1_38,
}

/// Why a version could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        "Kubernetes {given} is not supported: draguard has the rules of {}",
        KubeVersion::supported_list()
    )]
    Unsupported { given: String },
    #[error(
        "{given:?} is not a Kubernetes version: expected MAJOR.MINOR such as {}",
        KubeVersion::NEWEST
    )]
    Malformed { given: String },
}

impl KubeVersion {
    /// Every version draguard has rules for, oldest first.
    pub const SUPPORTED: &'static [KubeVersion] = &[KubeVersion::V1_36, KubeVersion::V1_37, KubeVersion::V1_38];
    /// The newest released minor: `check`'s default, and `serve`'s without
    /// a cluster. 1.38 is not released yet, and some of its messages are
    /// read from PR text, so it is used only when asked for or detected.
    pub const NEWEST: KubeVersion = KubeVersion::V1_37;
    /// The newest draguard carries: an apiserver newer than this gets its
    /// rules, with a note that they are not its own.
    pub const NEWEST_CARRIED: KubeVersion = KubeVersion::V1_38;
    /// The oldest.
    pub const OLDEST: KubeVersion = KubeVersion::V1_36;

    /// `1.36`.
    pub fn as_str(self) -> &'static str {
        match self {
            KubeVersion::V1_36 => "1.36",
            KubeVersion::V1_37 => "1.37",
            KubeVersion::V1_38 => "1.38",
        }
    }

    pub fn minor(self) -> u32 {
        match self {
            KubeVersion::V1_36 => 36,
            KubeVersion::V1_37 => 37,
            KubeVersion::V1_38 => 38,
        }
    }

    /// `1.36, 1.37`: for messages.
    pub fn supported_list() -> String {
        KubeVersion::SUPPORTED
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A version as a user writes it: `1.36`, `v1.36`, `1.36.2` or
    /// `v1.36.2`. The patch release does not matter: rules change between
    /// minors.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let (major, minor) = major_minor(text).ok_or_else(|| VersionError::Malformed { given: text.to_owned() })?;
        KubeVersion::from_major_minor(major, minor).ok_or_else(|| VersionError::Unsupported {
            given: format!("{major}.{minor}"),
        })
    }

    fn from_major_minor(major: u32, minor: u32) -> Option<Self> {
        (major == 1)
            .then(|| KubeVersion::SUPPORTED.iter().copied().find(|v| v.minor() == minor))
            .flatten()
    }

    /// The rules for an apiserver that reports `gitVersion` (`/version`:
    /// `v1.36.2`, `v1.37.1-eks-4e5a1b2`, `v1.38.0-rc.0`): its own minor when
    /// draguard knows it, else the nearest one draguard knows, with
    /// [`Nearest::exact`] false so the caller can say so.
    pub fn for_apiserver(git_version: &str) -> Result<Nearest, VersionError> {
        let (major, minor) = major_minor(git_version).ok_or_else(|| VersionError::Malformed {
            given: git_version.to_owned(),
        })?;
        if let Some(version) = KubeVersion::from_major_minor(major, minor) {
            return Ok(Nearest { version, exact: true });
        }
        let version = if (major, minor) < (1, KubeVersion::OLDEST.minor()) {
            KubeVersion::OLDEST
        } else {
            KubeVersion::NEWEST_CARRIED
        };
        Ok(Nearest { version, exact: false })
    }
}

/// [`KubeVersion::for_apiserver`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nearest {
    pub version: KubeVersion,
    /// The apiserver runs exactly this minor.
    pub exact: bool,
}

/// `v1.36.2-eks-1` → (1, 36). Anything after the minor is ignored; the
/// major and minor must be plain numbers.
fn major_minor(text: &str) -> Option<(u32, u32)> {
    let text = text.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts = text.splitn(3, '.');
    let major = parts.next()?;
    let minor = parts.next()?;
    // `1.36` or `1.36.2...`: the minor ends at the first non-digit only
    // when a patch follows (`1.36.2`); `1.36x` is malformed.
    let number = |s: &str| (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?;
    Some((number(major)?, number(minor)?))
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for KubeVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KubeVersion::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_users_write_them() {
        for text in ["1.36", "v1.36", "1.36.2", "v1.36.2", " 1.36 "] {
            assert_eq!(KubeVersion::parse(text), Ok(KubeVersion::V1_36), "{text}");
        }
        assert_eq!(KubeVersion::parse("1.37.1"), Ok(KubeVersion::V1_37));
    }

    #[test]
    fn an_unknown_version_names_the_supported_ones() {
        let err = KubeVersion::parse("1.35").expect_err("1.35 is not carried");
        assert_eq!(
            err.to_string(),
            "Kubernetes 1.35 is not supported: draguard has the rules of 1.36, 1.37, 1.38"
        );
        assert_eq!(
            KubeVersion::parse("2.36").expect_err("no 2.x").to_string(),
            "Kubernetes 2.36 is not supported: draguard has the rules of 1.36, 1.37, 1.38"
        );
        for bad in ["", "1", "one.two", "1.36x", "1..36", "v", "1.-3"] {
            assert_eq!(
                KubeVersion::parse(bad),
                Err(VersionError::Malformed { given: bad.to_owned() }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_apiserver_gets_its_own_rules_or_the_nearest() {
        let cases = [
            ("v1.36.2", KubeVersion::V1_36, true),
            ("v1.37.1-eks-4e5a1b2", KubeVersion::V1_37, true),
            ("v1.38.0-rc.0", KubeVersion::V1_38, true),
            ("v1.38.0-alpha.2.41+0411cc70", KubeVersion::V1_38, true),
            ("v1.39.0", KubeVersion::V1_38, false),
            ("v1.34.10", KubeVersion::V1_36, false),
        ];
        for (git, version, exact) in cases {
            assert_eq!(KubeVersion::for_apiserver(git), Ok(Nearest { version, exact }), "{git}");
        }
        assert!(KubeVersion::for_apiserver("devel").is_err());
    }

    #[test]
    fn newer_versions_compare_greater() {
        assert!(KubeVersion::V1_37 > KubeVersion::V1_36);
        assert!(KubeVersion::V1_38 > KubeVersion::V1_37);
        assert_eq!(KubeVersion::SUPPORTED.last(), Some(&KubeVersion::NEWEST_CARRIED));
        assert_eq!(KubeVersion::parse("v1.38"), Ok(KubeVersion::V1_38));
        assert_eq!(
            KubeVersion::NEWEST,
            KubeVersion::V1_37,
            "1.38 is not released: never the default"
        );
        assert_eq!(KubeVersion::SUPPORTED.first(), Some(&KubeVersion::OLDEST));
    }
}
