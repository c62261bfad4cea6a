//! Name formats from `k8s.io/apimachinery/pkg/api/validate/content`
//! (`dns.go`, `kube.go`, `identifier.go`). Each returns the list of
//! messages the Go function returns; callers turn each into one
//! `field.Invalid`, as the apiserver does.

use std::borrow::Cow;

pub const DNS1123_LABEL_MAX: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
pub const LABEL_KEY_NAME_MAX: usize = 63;
pub const LABEL_VALUE_MAX: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_CASELESS_ERR: &str = "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";

/// `strings.ToLower`, copying only text that has something to lower: names
/// are nearly always lower-case ASCII already.
pub fn to_lowercase(s: &str) -> Cow<'_, str> {
    if s.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.to_lowercase())
    }
}

/// `content.MaxLenError`.
pub fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} bytes")
}

/// `content.RegexError`, including its two spaces before each "or".
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f) && is_lower_alnum(l) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`: dot
/// separated DNS labels, in one pass over the bytes (every claim names
/// several: device classes, drivers, key prefixes; splitting on dots cost
/// ~470 instructions a name).
fn matches_dns_subdomain(s: &str) -> bool {
    // The byte before: a label starts after a dot (or at the start) and
    // ends before one (or at the end), never at a `-` or another dot.
    let mut before = b'.';
    for &c in s.as_bytes() {
        let fits = match c {
            b'a'..=b'z' | b'0'..=b'9' => true,
            b'-' => before != b'.',
            b'.' => before != b'.' && before != b'-',
            _ => false,
        };
        if !fits {
            return false;
        }
        before = c;
    }
    before != b'.' && before != b'-'
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `content.IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_dns_label(value) {
        if matches_dns_subdomain(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `content.IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `content.IsDNS1123SubdomainCaseless` (apimachinery v0.36.0 dns.go): upper
/// case passes, and the message says so; the regex it quotes is still
/// the lower-case one.
pub fn dns1123_subdomain_caseless(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns_subdomain(&to_lowercase(value)) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_CASELESS_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["Example.com"],
        ));
    }
    errs
}

/// `content.IsLabelKey` (also `IsQualifiedName`).
pub fn label_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    // By bytes: `/` is ASCII, and names are short (a `char` search costs
    // more to set up than to run here).
    let slash = value.bytes().position(|b| b == b'/');
    let name = match slash.map(|at| (&value[..at], &value[at + 1..])) {
        None => value,
        Some((prefix, name)) if !name.bytes().any(|b| b == b'/') => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        Some(_) => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_KEY_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_NAME_MAX)));
    }
    if !matches_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `content.IsLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !matches_label_key_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `content.IsCIdentifier`.
pub fn c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = match b.first() {
        Some(&f) => (f.is_ascii_alphabetic() || f == b'_') && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_'),
        None => false,
    };
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            C_IDENTIFIER_ERR,
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// `path.ValidatePathSegmentName` / `NameIsDNSSubdomain`: with `prefix`, a
/// trailing dash (as in `generateName`) is allowed.
pub fn dns_subdomain_name(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        dns1123_subdomain(&mask_trailing_dash(name))
    } else {
        dns1123_subdomain(name)
    }
}

fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string of up to 6 bytes over the bytes that matter (and two
    /// that never fit) reads as the labels between its dots do.
    #[test]
    fn a_subdomain_is_dot_separated_labels() {
        let alphabet = *b"a0-.A_";
        let mut strings = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..6 {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |&c| format!("{s}{}", char::from(c))))
                .collect();
            strings.extend(last.iter().cloned());
        }
        for s in strings {
            let by_labels = !s.is_empty() && s.split('.').all(matches_dns_label);
            assert_eq!(matches_dns_subdomain(&s), by_labels, "{s:?}");
        }
    }

    #[test]
    fn dns_label() {
        assert!(dns1123_label("a").is_empty());
        assert!(dns1123_label("my-name-1").is_empty());
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            dns1123_label("Foo"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 bytes"]);
        assert_eq!(dns1123_label("").len(), 1);
        assert_eq!(dns1123_label("-a").len(), 1);
    }

    #[test]
    fn dns_subdomain() {
        assert!(dns1123_subdomain("example.com").is_empty());
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert_eq!(dns1123_subdomain("").len(), 1);
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 bytes"]
        );
        assert!(dns_subdomain_name("gen-", true).is_empty());
        assert_eq!(dns_subdomain_name("gen-", false).len(), 1);
    }

    #[test]
    fn label_keys() {
        assert!(label_key("example.com/MyName").is_empty());
        assert!(label_key("my.name").is_empty());
        assert_eq!(
            label_key(""),
            vec![
                "name part must be non-empty".to_owned(),
                format!(
                    "name part {}",
                    regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
                ),
            ]
        );
        assert_eq!(label_key("/a"), vec!["prefix part must be non-empty"]);
        assert_eq!(label_key("a/b/c").len(), 1);
        assert!(label_key("a/b/c")[0].starts_with("a valid label key must consist"));
        assert_eq!(
            label_key(&"a".repeat(64)),
            vec!["name part must be no more than 63 bytes"]
        );
        assert_eq!(label_key("Bad_/x").len(), 1);
    }

    #[test]
    fn label_values() {
        assert!(label_value("").is_empty());
        assert!(label_value("my_value.1").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert_eq!(label_value(&"a".repeat(64)), vec!["must be no more than 63 bytes"]);
    }

    #[test]
    fn c_identifiers() {
        assert!(c_identifier("_a1").is_empty());
        assert!(c_identifier("MyName").is_empty());
        assert_eq!(c_identifier("1a").len(), 1);
        assert_eq!(c_identifier("").len(), 1);
        assert_eq!(c_identifier("a-b").len(), 1);
    }
}
