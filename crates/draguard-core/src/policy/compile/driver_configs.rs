//! Drivers' opaque configs (`spec.devices.config[i].opaque`) judged in CEL,
//! inside a namespace's compiled devices policy: what
//! `rules::driver_config::judge_configs` judges, generated from the same
//! schemas (built-in and DriverConfigSchema), so that a claim whose
//! configs only compiled drivers judge needs no webhook call.
//!
//! A schema becomes an ordered list of checks, each a CEL condition that
//! the parameters are wrong there and the webhook's text of that error
//! (`PATH: Invalid value: "x": ...`, as `FieldError`'s `Display` renders
//! it). The order is the webhook's: the structural walk (type, enum, each
//! key in sorted order with the unknown ones among them, required fields,
//! bounds), then the schema's CEL rules, node by node, only when the walk
//! found nothing. A ValidatingAdmissionPolicy names one message per failed
//! validation, so the compiled one names the first error of the first bad
//! config; the webhook lists every error.
//!
//! A quantity (`format: quantity`) is parsed in CEL as the webhook parses
//! it, each of `resource.ParseQuantity`'s three errors told apart
//! (`quantity.rs`).
//!
//! The policy's variables: per compiled driver, each quantity node's
//! parses (every config's strings there, parsed once), each kind's checks,
//! then the driver's own (apiVersion, kind, which kind's checks to read),
//! each a map from a config's index; then the list's first errors. One
//! expression each, because the apiserver's compile time grows with the
//! square of an expression's size (one expression per driver took 30 s
//! to create the shipped devices policy on kube-apiserver v1.36.2, where
//! these take 3.8 s) and refuses one of more than 100,000 code points.
//!
//! What is not compiled (the driver stays with the webhook, and `--explain`
//! says why): enums of other than strings, `additionalProperties` or
//! `items` that carry CEL rules, schemas deeper than the webhook walks,
//! checks longer than a CEL expression may be, and a driver whose feature
//! gates or opt-in rules a user declared (`nvidia::gate_errors`,
//! `passthrough_gate`, `admin_access`).
//!
//! Where the compiled verdict can differ from the webhook's: a message
//! longer than the apiserver keeps (a bad value of thousands of
//! characters: the validation's `message` names the list instead), and a
//! claim whose configs cost more CEL than the apiserver allows one
//! expression (some 300,000 characters of quantities that are not plain
//! numbers with a suffix): refused with the cost error (`Fail`).

use serde_json::{Map, Value};

use super::cel::string as lit;
use crate::field::{Path, Segment};
use crate::rules::driver_config::DriverSchemas;
use crate::rules::driver_config::registry::DriverVersions;

/// How deep the webhook walks a schema (`structural::MAX_DEPTH`); a schema
/// deeper is not compiled.
const MAX_DEPTH: usize = 32;

/// The longest a driver's checks may be: cel-go's parser refuses an
/// expression of more than 100,000 code points (its default
/// `ExpressionSizeCodePointLimit`, which kube-apiserver v1.36.2 keeps: it
/// answered `expression code point size exceeds limit: size: 116377,
/// limit 100000` to one variable holding every driver's checks), and the
/// variable around a driver's checks adds the config list's path.
const MAX_EXPRESSION: usize = 99_000;

/// A step from a config's parameters to a schema node: a property, an
/// array's item (the index variable the checks have bound there), a map's
/// value (its key variable, `k` or `j` at the map's depth: written
/// [`key_placeholder`] until the map's checks are built).
#[derive(Debug, Clone)]
enum Step {
    Field(String),
    Item(String),
    Key(usize),
}

fn key_placeholder(depth: usize) -> String {
    format!("__key{depth}__")
}

/// The variable holding a quantity node's parses, in a driver's checks
/// (numbered per driver, named per policy in [`validation`]).
fn quantity_placeholder(j: usize) -> String {
    format!("variables.__quantity{j}__")
}

/// A quantity node met in a schema: where it is, and the placeholder its
/// checks read its parses from until the driver's nodes are numbered.
#[derive(Debug, Clone)]
struct QuantityNode {
    steps: Vec<Step>,
    id: String,
}

fn steps_with(steps: &[Step], step: Step) -> Vec<Step> {
    let mut out = steps.to_vec();
    out.push(step);
    out
}

/// Every parse of a quantity node's strings in a config, shaped like the
/// parameters from `e` down (`steps`): a map of the keys, a list of the
/// items, at the node [`super::quantity::error`] of a string (0 for
/// anything else). Written once per node and read by the node's checks by
/// index and key, so that the parse is written once, not in every check
/// that reads it (the apiserver's compile time grows with the square of
/// an expression's size), and each string parsed once.
fn parses(e: &str, steps: &[Step], d: usize) -> String {
    let y = format!("y{d}");
    match steps.split_first() {
        None => format!("type({e}) == string ? {} : 0", super::quantity::error(e)),
        Some((Step::Field(name), rest)) => format!(
            "type({e}) == map && {n} in {e} ? [{e}[{n}]].map({y}, {})[0] : dyn(0)",
            parses(&y, rest, d + 1),
            n = lit(name)
        ),
        Some((Step::Item(_), rest)) => {
            format!("type({e}) == list ? {e}.map({y}, {}) : dyn(0)", parses(&y, rest, d + 1))
        }
        Some((Step::Key(_), rest)) => format!(
            "type({e}) == map ? {e}.transformMap(z{d}, {y}, {}) : dyn(0)",
            parses(&y, rest, d + 1)
        ),
    }
}

/// How a node's checks read its parse: the node's variable at the
/// config's index `i`, then an index or key per array or map on the way.
fn parse_of(id: &str, steps: &[Step]) -> String {
    let mut out = format!("{id}[i]");
    for s in steps {
        match s {
            Step::Field(_) => {}
            Step::Item(i) => out.push_str(&format!("[{i}]")),
            Step::Key(depth) => out.push_str(&format!("[{}]", key_placeholder(*depth))),
        }
    }
    out
}

/// One check: when `bad` holds, `text` is the error (both CEL).
#[derive(Debug, Clone)]
struct Check {
    bad: String,
    text: String,
}

/// One compiled driver: what a config of it gets wrong first, a CEL
/// string over `p` (the parameters) and `at` (their path), '' when
/// nothing. Each kind's schema checks are an expression of their own
/// (`kinds`: the condition over `p` that a config is of that kind, and its
/// checks), read by `head` through a placeholder [`kind_placeholder`]:
/// the apiserver's compile time grows with the square of an expression's
/// size, so one expression per kind compiles several times faster than
/// one per driver.
#[derive(Debug, Clone)]
struct Compiled {
    driver: String,
    head: String,
    kinds: Vec<(String, String)>,
    /// Each quantity node's parses (the condition over `p` that a config
    /// is of the node's kind, and [`parses`] over `p`), read by the checks
    /// through [`quantity_placeholder`].
    quantities: Vec<(String, String)>,
}

fn kind_placeholder(m: usize) -> String {
    format!("__kind{m}[i]")
}

impl Compiled {
    /// The checks as one expression (the kinds inlined).
    fn inlined(&self) -> String {
        let mut out = self.head.clone();
        for (m, (_, checks)) in self.kinds.iter().enumerate() {
            out = out.replace(&kind_placeholder(m), &format!("({checks})"));
        }
        out
    }
}

/// The compiled drivers and those left to the webhook (with why).
#[derive(Debug, Clone, Default)]
pub struct Drivers {
    compiled: Vec<Compiled>,
    pub left: Vec<(String, String)>,
}

impl Drivers {
    /// One compiled driver's first-error expression, over `p` and `at`
    /// (each kind's checks inlined; the quantities' parses read from the
    /// variables [`quantity_placeholder`] names).
    pub fn first_error(&self, driver: &str) -> Option<String> {
        self.compiled.iter().find(|c| c.driver == driver).map(Compiled::inlined)
    }

    pub fn compiled_names(&self) -> Vec<&str> {
        self.compiled.iter().map(|c| c.driver.as_str()).collect()
    }
}

/// Every driver of `schemas`, compiled or left with the reason.
pub fn compile(schemas: &DriverSchemas) -> Drivers {
    let mut out = Drivers::default();
    for (driver, versions) in schemas.drivers() {
        if schemas.has_declared_rules(driver) {
            out.left.push((
                driver.to_owned(),
                "feature gates declared off or opt-in rules turned on (DriverConfigSchema) are judged by the webhook only"
                    .to_owned(),
            ));
            continue;
        }
        match driver_checks(driver, versions) {
            Ok(compiled)
                if std::iter::once(&compiled.head)
                    .chain(compiled.kinds.iter().map(|(_, k)| k))
                    .chain(compiled.quantities.iter().map(|(_, q)| q))
                    .any(|e| e.chars().count() > MAX_EXPRESSION) =>
            {
                out.left.push((
                    driver.to_owned(),
                    format!("its checks are longer than a CEL expression may be ({MAX_EXPRESSION} characters)"),
                ))
            }
            Ok(compiled) => out.compiled.push(compiled),
            Err(why) => out.left.push((driver.to_owned(), why)),
        }
    }
    out
}

/// `c1 ? t1 : c2 ? t2 : ... : tail`: the first check's error, else `tail`.
fn chain(checks: &[Check], tail: &str) -> String {
    let mut out = tail.to_owned();
    for c in checks.iter().rev() {
        out = format!("({}) ? ({}) : {out}", c.bad, c.text);
    }
    out
}

/// The first error of one driver's parameters `p` at `at` (CEL string, ''
/// when none): `judge_unmemoised` (apiVersion, kind, lookup, schema).
fn driver_checks(driver: &str, versions: &DriverVersions) -> Result<Compiled, String> {
    let text = |k: &str| format!("(('{k}' in p) && type(p['{k}']) == string ? p['{k}'] : '')");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let head = [
        Check {
            bad: format!("{api_version} == ''"),
            text: "at + '.apiVersion: Required value: Object \\'apiVersion\\' is missing'".to_owned(),
        },
        Check {
            bad: format!("{kind} == ''"),
            text: "at + '.kind: Required value: Object \\'Kind\\' is missing'".to_owned(),
        },
    ];
    let mut by_version: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for (v, k) in versions.keys() {
        by_version.entry(v.as_str()).or_default().push(k.as_str());
    }
    // A known apiVersion without this kind: runtime's notRegisteredErr.
    let mut unknown_kind = Vec::new();
    for (v, kinds) in &by_version {
        unknown_kind.push(Check {
            bad: format!("{api_version} == {}", lit(v)),
            text: format!(
                "at + '.kind: Invalid value: ' + {} + ': no kind \"' + {kind} + '\" is registered for version \"' + {} + '\" (driver ' + {} + ' accepts ' + {} + ')'",
                quote(&kind),
                lit(v),
                lit(driver),
                lit(&kinds.join(", "))
            ),
        });
    }
    let mut lookup = chain(&unknown_kind, "''");
    let mut quantities = Vec::new();
    let mut kinds = Vec::new();
    for (m, ((v, k), schema)) in versions.iter().enumerate().rev() {
        let mut walk = Walk::default();
        walk.node(schema.openapi(), "p", "at", true, 0, &[])?;
        walk.rules(schema.openapi(), "p", "at", 0)?;
        let checks: Vec<Check> = walk.structural.into_iter().chain(walk.rules).collect();
        let is_kind = format!("{api_version} == {} && {kind} == {}", lit(v), lit(k));
        let mut checks = chain(&checks, "''");
        for q in walk.quantities {
            checks = checks.replace(&q.id, &quantity_placeholder(quantities.len()));
            quantities.push((is_kind.clone(), parses("p", &q.steps, 0)));
        }
        lookup = format!("({is_kind}) ? {} : {lookup}", kind_placeholder(m));
        kinds.push((is_kind, checks));
    }
    kinds.reverse();
    Ok(Compiled {
        driver: driver.to_owned(),
        head: chain(&head, &lookup),
        kinds,
        quantities,
    })
}

/// A kind's checks are inlined in its driver's expression while that stays
/// this short, and are a variable of their own past it. Every variable
/// costs each write the policy judges, judged or not: the apiserver builds
/// the map of a policy's variables anew for each pass over its
/// validations and messages (k8s.io/apiserver v0.36
/// pkg/admission/plugin/cel/composition.go `Variables`). On
/// kube-apiserver v1.36.2, 34 variables that no expression read added
/// 0.038 ms to a plain claim's write in one interleaved run (about 1 µs
/// each; four fewer measured within the runs' noise). And the compile
/// time grows with the square of
/// an expression's size, so a merged expression stays about as long as
/// the longest kind's (NVIDIA's GpuConfig, some 23,500 characters; its
/// driver's other kinds and its own checks together some 24,500).
const INLINE_MAX: usize = 28 * 1024;

/// Where a claim's or a template's config list is: each a CEL expression
/// that chooses by the request's resource, so that one set of variables
/// judges both.
#[derive(Debug, Clone, Copy)]
pub struct ConfigList<'a> {
    /// The list, or `[]` when absent.
    pub list: &'a str,
    /// Whether the list is there (a claim without one reads no variable).
    pub present: &'a str,
    /// Its path, a CEL string (`'spec.devices.config'`).
    pub path: &'a str,
}

/// The checks of a config list, and the variables they read: per compiled
/// driver, its quantity nodes' parses, the kinds too long to inline, and
/// the driver's own (`variable` and its index: a map from a config's index
/// to its first error, so that each driver's checks are an expression of
/// their own, under CEL's size limit); then `variable`, every compiled
/// driver's config's first error, in config order. The message is the
/// first, or `''` when there is none (a message that fails to evaluate
/// costs the apiserver a formatted error on every write it admits).
/// `None` when no driver compiles.
pub fn validation(drivers: &Drivers, at: ConfigList<'_>, variable: &str) -> Option<ConfigCheck> {
    if drivers.compiled.is_empty() {
        return None;
    }
    let ConfigList { list, present, path } = at;
    let judged = "has(c.opaque) && has(c.opaque.parameters) && type(c.opaque.parameters) == map";
    let mut variables = Vec::new();
    let mut first = String::from("''");
    let each_config = |filter: &str, expr: &str| {
        format!(
            "{list}.transformMap(i, c, {judged} && {filter}, [c.opaque.parameters].map(p, [{path} + '[' + string(i) + '].opaque.parameters'].map(at, {expr})[0])[0])"
        )
    };
    for (n, compiled) in drivers.compiled.iter().enumerate().rev() {
        let name = format!("{variable}{n}");
        let is_driver = format!("c.opaque.driver == {}", lit(&compiled.driver));
        let of_kind = |is_kind: &str| format!("{is_driver} && [c.opaque.parameters].exists(p, {is_kind})");
        let named = |checks: &str| {
            let mut out = checks.to_owned();
            for j in 0..compiled.quantities.len() {
                out = out.replace(&quantity_placeholder(j), &format!("variables.{name}q{j}"));
            }
            out
        };
        let mut head = named(&compiled.head);
        let mut kinds = Vec::new();
        // The shortest first, so that the most kinds fit.
        let mut by_length: Vec<(usize, &(String, String))> = compiled.kinds.iter().enumerate().collect();
        by_length.sort_by_key(|(_, (_, checks))| checks.len());
        for (m, (is_kind, checks)) in by_length {
            let checks = named(checks);
            if head.len() + checks.len() <= INLINE_MAX {
                head = head.replace(&kind_placeholder(m), &format!("({checks})"));
            } else {
                let kind_name = format!("{name}k{m}");
                head = head.replace(&kind_placeholder(m), &format!("variables.{kind_name}[i]"));
                kinds.push((
                    m,
                    serde_json::json!({"name": kind_name, "expression": each_config(&of_kind(is_kind), &checks)}),
                ));
            }
        }
        kinds.sort_by_key(|(m, _)| std::cmp::Reverse(*m));
        variables.push(serde_json::json!({"name": name, "expression": each_config(&is_driver, &head)}));
        variables.extend(kinds.into_iter().map(|(_, v)| v));
        for (j, (is_kind, parses)) in compiled.quantities.iter().enumerate().rev() {
            variables.push(serde_json::json!({"name": format!("{name}q{j}"), "expression": format!(
                "{list}.transformMap(i, c, {judged} && {}, [c.opaque.parameters].map(p, {parses})[0])",
                of_kind(is_kind)
            )}));
        }
        first = format!("{is_driver} ? variables.{name}[i] : {first}");
    }
    variables.reverse();
    variables.push(serde_json::json!({"name": variable, "expression": format!("{list}.transformList(i, c, {judged}, {first}).filter(e, e != '')")}));
    let fallback = format!("{path} + {}", lit(": a driver's opaque parameters are invalid"));
    let none = format!("!{present} || size(variables.{variable}) == 0");
    Some(ConfigCheck {
        variables,
        message: format!(
            "{none} ? '' : {}",
            shown_or(&format!("variables.{variable}[0]"), &fallback)
        ),
        ok: none,
    })
}

/// A claim's or template's compiled config checks: the policy's variables,
/// the condition that every config is valid, and the message naming the
/// first error (CEL; `''` when there is none).
#[derive(Debug, Clone)]
pub struct ConfigCheck {
    pub variables: Vec<Value>,
    pub ok: String,
    pub message: String,
}

/// The apiserver's treatment of a messageExpression's text, in CEL:
/// trimmed, and the validation's static `message` instead of one that is
/// empty, longer than 5 KiB or on several lines (k8s.io/apiserver v0.36
/// pkg/admission/plugin/policy/validating/validator.go `Validate`;
/// `MaxEvaluatedMessageExpressionSizeBytes` in pkg/apis/cel/config.go).
/// A validation that judges claims and templates (and the tolerations'
/// limit before the configs) has one static message for all of them: a
/// config message names its own fallback (`fallback`, a CEL string) so
/// that a driver's error of a long value reads as it did in a validation
/// of its own.
fn shown_or(message: &str, fallback: &str) -> String {
    format!("[{message}.trim()].map(m, m == '' || size(bytes(m)) > 5120 || m.contains('\\n') ? {fallback} : m)[0]")
}

/// Go's `%q` of a CEL string `s`, as `field::go_quote` writes it:
/// backslash, quote and the control characters with a letter escape
/// (`\n`, `\t`, ...); the other control characters (`\x01`, `\u0085`) are
/// not escaped, where the webhook would escape them.
fn quote(s: &str) -> String {
    let mut out = format!("{s}.replace('\\\\', '\\\\\\\\').replace('\"', '\\\\\"')");
    for (c, letter) in [
        ("\\n", 'n'),
        ("\\r", 'r'),
        ("\\t", 't'),
        ("\\a", 'a'),
        ("\\b", 'b'),
        ("\\f", 'f'),
        ("\\v", 'v'),
    ] {
        out = format!("{out}.replace('{c}', '\\\\{letter}')");
    }
    format!("('\"' + {out} + '\"')")
}

/// `BadValue::from(&json)`'s text of a CEL value `v`: quoted strings,
/// `null`, numbers and booleans as CEL prints them.
fn render(v: &str) -> String {
    format!(
        "(type({v}) == string ? {} : type({v}) == null_type ? 'null' : string({v}))",
        quote(v)
    )
}

/// A Path segment's text after `at` (a CEL string).
fn child_path(at: &str, segment: &str) -> String {
    format!("{at} + {}", lit(&format!(".{segment}")))
}

#[derive(Default)]
struct Walk {
    structural: Vec<Check>,
    rules: Vec<Check>,
    /// The quantity nodes met.
    quantities: Vec<QuantityNode>,
}

/// `cond` and `c.bad`, `c` unchanged otherwise.
fn guarded(cond: &str, checks: Vec<Check>) -> Vec<Check> {
    checks
        .into_iter()
        .map(|c| Check {
            bad: format!("{cond} && ({})", c.bad),
            text: c.text,
        })
        .collect()
}

/// The type condition of a schema node (true when the node has no type).
fn type_ok(schema: &Map<String, Value>, v: &str) -> Result<(String, &'static str), String> {
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        return Ok((
            format!("type({v}) == string || type({v}) == int || type({v}) == uint"),
            "integer or string",
        ));
    }
    Ok(match schema.get("type").and_then(Value::as_str) {
        None => ("true".to_owned(), ""),
        Some("object") => (format!("type({v}) == map"), "object"),
        Some("array") => (format!("type({v}) == list"), "array"),
        Some("string") => (format!("type({v}) == string"), "string"),
        Some("boolean") => (format!("type({v}) == bool"), "boolean"),
        // (Not `type(v) in [int, uint, double]`: a list literal's elements
        // must share one type, and `type(int)` is not `type(uint)`.)
        Some("number") => (
            format!("type({v}) == int || type({v}) == uint || type({v}) == double"),
            "number",
        ),
        Some("integer") => (
            format!(
                "type({v}) == int || type({v}) == uint || (type({v}) == double && {v} > -9.2e18 && {v} < 9.2e18 && double(int({v})) == {v})"
            ),
            "integer",
        ),
        Some(other) => return Err(format!("a schema type {other:?} the webhook does not know")),
    })
}

/// `json_type`'s name of a CEL value.
fn json_type(v: &str) -> String {
    format!(
        "(type({v}) == map ? 'object' : type({v}) == list ? 'array' : type({v}) == string ? 'string' : type({v}) == bool ? 'boolean' : type({v}) == double ? 'number' : 'integer')"
    )
}

impl Walk {
    /// `structural::walk` of value `v` (CEL) at path `at` (CEL string),
    /// reached from the parameters by `steps`.
    fn node(
        &mut self,
        schema: &Value,
        v: &str,
        at: &str,
        root: bool,
        depth: usize,
        steps: &[Step],
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("a schema nested more than {MAX_DEPTH} levels deep"));
        }
        let Some(schema) = schema.as_object() else {
            return Ok(());
        };
        let mut checks = Vec::new();
        let (ok, wanted) = type_ok(schema, v)?;
        if ok != "true" {
            checks.push(Check {
                bad: format!("!({ok})"),
                text: format!(
                    "{at} + ': Invalid value: \"' + {} + '\": must be of type {wanted}'",
                    json_type(v)
                ),
            });
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            let texts: Option<Vec<&str>> = allowed.iter().map(Value::as_str).collect();
            let Some(texts) = texts else {
                return Err("an enum of other than strings".to_owned());
            };
            let supported: Vec<String> = texts.iter().map(|t| crate::field::go_quote(t)).collect();
            checks.push(Check {
                bad: format!("!({v} in {})", super::cel::strings(texts.iter().copied())),
                text: format!(
                    "{at} + ': Unsupported value: ' + {} + {}",
                    render(v),
                    lit(&format!(": supported values: {}", supported.join(", ")))
                ),
            });
        }
        let kind = schema.get("type").and_then(Value::as_str);
        match kind {
            Some("object") => self.object(schema, v, at, root, depth, steps, &mut checks)?,
            Some("array") => {
                if let Some(item) = schema.get("items") {
                    let mut inner = Walk::default();
                    let (x, i) = (format!("x{depth}"), format!("i{depth}"));
                    let item_at = format!("{at} + '[' + string({i}) + ']'");
                    inner.node(
                        item,
                        &x,
                        &item_at,
                        false,
                        depth + 1,
                        &steps_with(steps, Step::Item(i.clone())),
                    )?;
                    self.quantities.append(&mut inner.quantities);
                    push_each(&mut checks, v, &x, &i, inner.structural);
                }
                bound(
                    schema,
                    &format!("size({v})"),
                    "maxItems",
                    "minItems",
                    "items",
                    at,
                    None,
                    &mut checks,
                );
            }
            Some("number" | "integer") => {
                let exclusive = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
                for (key, ex, op, exop, words, exwords) in [
                    (
                        "minimum",
                        "exclusiveMinimum",
                        "<",
                        "<=",
                        "greater than or equal to",
                        "greater than",
                    ),
                    (
                        "maximum",
                        "exclusiveMaximum",
                        ">",
                        ">=",
                        "less than or equal to",
                        "less than",
                    ),
                ] {
                    if let Some(limit) = schema.get(key).and_then(Value::as_f64) {
                        let (op, words) = if exclusive(ex) { (exop, exwords) } else { (op, words) };
                        checks.push(Check {
                            bad: format!("double({v}) {op} {limit:?}"),
                            text: format!(
                                "{at} + ': Invalid value: ' + {} + {}",
                                render(v),
                                lit(&format!(": should be {words} {}", number_text(limit)))
                            ),
                        });
                    }
                }
            }
            Some("string") => {
                bound(
                    schema,
                    &format!("size({v})"),
                    "maxLength",
                    "minLength",
                    "characters",
                    at,
                    Some(v),
                    &mut checks,
                );
            }
            _ => {}
        }
        // A string quantity, after any string bound (`structural::walk`):
        // its parse is read from the node's parses (see `parses`), named
        // by where the node is until the driver's nodes are numbered.
        if schema.get("format").and_then(Value::as_str) == Some("quantity") {
            let id: String = format!("{steps:?}").bytes().map(|b| format!("{b:02x}")).collect();
            let id = format!("__quantity_at_{id}__");
            let (bad, text) = super::quantity::check(v, at, &quote(v), &parse_of(&id, steps));
            checks.push(Check { bad, text });
            self.quantities.push(QuantityNode {
                steps: steps.to_vec(),
                id,
            });
        }
        // A null is as good as absent (`encoding/json`).
        self.structural.extend(guarded(&format!("{v} != null"), checks));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn object(
        &mut self,
        schema: &Map<String, Value>,
        v: &str,
        at: &str,
        root: bool,
        depth: usize,
        steps: &[Step],
        checks: &mut Vec<Check>,
    ) -> Result<(), String> {
        let empty = Map::new();
        let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
        if root {
            known.extend(["apiVersion", "kind"]);
        }
        let known_list = super::cel::strings(known.iter().copied());
        let (k, j) = (format!("k{depth}"), format!("j{depth}"));
        // The keys not among the properties, and what the webhook says of
        // the first wrong one (in key order, as the walk meets them).
        let extra: Option<(String, String)> = match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => None,
            Some(s @ Value::Object(_)) => {
                if has_rules(s) {
                    return Err("additionalProperties with CEL rules".to_owned());
                }
                let mut inner = Walk::default();
                let item = format!("x{depth}");
                let item_at = format!("{at} + '[' + {k} + ']'");
                inner.node(
                    s,
                    &item,
                    &item_at,
                    false,
                    depth + 1,
                    &steps_with(steps, Step::Key(depth)),
                )?;
                self.quantities.append(&mut inner.quantities);
                // A quantity's parse is read at the key the checks bind.
                let keyed = |text: &str, key: &str| text.replace(&key_placeholder(depth), key);
                let bad_of = |key: &str| {
                    let terms: Vec<String> = inner.structural.iter().map(|c| keyed(&c.bad, key)).collect();
                    format!("[{v}[{key}]].exists({item}, {})", super::cel::any(&terms))
                };
                let mut chain = String::from("''");
                for c in inner.structural.iter().rev() {
                    chain = format!("({}) ? ({}) : {chain}", keyed(&c.bad, &k), keyed(&c.text, &k));
                }
                Some((
                    bad_of(&k),
                    format!(
                        "{v}.filter({k}, !({k} in {known_list}) && {} && !{v}.exists({j}, !({j} in {known_list}) && {} && {j} < {k})).map({k}, [{v}[{k}]].map({item}, {chain})[0])[0]",
                        bad_of(&k),
                        bad_of(&j)
                    ),
                ))
            }
            _ if schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true) =>
            {
                None
            }
            _ => Some((
                "true".to_owned(),
                format!(
                    "{v}.filter({k}, !({k} in {known_list}) && !{v}.exists({j}, !({j} in {known_list}) && {j} < {k})).map({k}, {at} + '.' + {k} + ': Forbidden: strict decoding error: unknown field \"' + {k} + '\"')[0]"
                ),
            )),
        };
        let extra_before = |before: Option<&str>| -> Option<Check> {
            let (bad, text) = extra.as_ref()?;
            let limit = before.map(|b| format!(" && {k} < {}", lit(b))).unwrap_or_default();
            Some(Check {
                bad: format!("{v}.exists({k}, !({k} in {known_list}){limit} && {bad})"),
                text: text.clone(),
            })
        };
        for (name, s) in properties {
            checks.extend(extra_before(Some(name)));
            let mut inner = Walk::default();
            let child = format!("{v}[{}]", lit(name));
            inner.node(
                s,
                &child,
                &child_path(at, name),
                false,
                depth + 1,
                &steps_with(steps, Step::Field(name.clone())),
            )?;
            self.quantities.append(&mut inner.quantities);
            checks.extend(guarded(&format!("{} in {v}", lit(name)), inner.structural));
        }
        checks.extend(extra_before(None));
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = name.as_str() {
                checks.push(Check {
                    bad: format!("!({} in {v}) || {v}[{}] == null", lit(name), lit(name)),
                    text: format!("{} + ': Required value'", child_path(at, name)),
                });
            }
        }
        Ok(())
    }

    /// `cel::walk`: the node's rules, then its children's.
    fn rules(&mut self, schema: &Value, v: &str, at: &str, depth: usize) -> Result<(), String> {
        let Some(map) = schema.as_object() else {
            return Ok(());
        };
        let mut checks = Vec::new();
        for rule in map
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text_of = |k: &str| rule.get(k).and_then(Value::as_str);
            let Some(expr) = text_of("rule") else {
                continue;
            };
            // Transition rules never run in the webhook (a config is judged
            // on its own).
            if expr.contains("oldSelf") {
                continue;
            }
            let message = match (text_of("messageExpression"), text_of("message")) {
                (Some(m), _) => format!("[{v}].map(self, {m})[0]"),
                (None, Some(m)) => lit(m),
                (None, None) => lit(&format!("failed rule: {expr}")),
            };
            let relative = Path::parse(text_of("fieldPath").unwrap_or(""));
            let mut field_at = at.to_owned();
            let mut value = Some(v.to_owned());
            let mut present = Vec::new();
            for s in relative.segments() {
                match s {
                    Segment::Field(name) => {
                        field_at = child_path(&field_at, name);
                        if let Some(x) = &value {
                            present.push(format!("{} in {x}", lit(name)));
                            value = Some(format!("{x}[{}]", lit(name)));
                        }
                    }
                    _ => {
                        return Err("a rule's fieldPath with an index or key".to_owned());
                    }
                }
            }
            let body = match text_of("reason") {
                Some("FieldValueForbidden") => format!("': Forbidden: ' + {message}"),
                Some("FieldValueRequired") => format!("': Required value: ' + {message}"),
                _ => {
                    let shown = match value {
                        Some(x) if !present.is_empty() => {
                            format!("({} ? ': ' + {} : '')", present.join(" && "), render(&x))
                        }
                        Some(x) => format!("': ' + {}", render(&x)),
                        None => "''".to_owned(),
                    };
                    format!("': Invalid value' + {shown} + ': ' + {message}")
                }
            };
            checks.push(Check {
                bad: format!("![{v}].all(self, {expr})"),
                text: format!("{field_at} + {body}"),
            });
        }
        let mut children = Vec::new();
        if let Some(props) = map.get("properties").and_then(Value::as_object) {
            for (name, s) in props {
                let mut inner = Walk::default();
                let child = format!("{v}[{}]", lit(name));
                inner.rules(s, &child, &child_path(at, name), depth + 1)?;
                children.extend(guarded(&format!("{} in {v}", lit(name)), inner.rules));
            }
        }
        if map.get("additionalProperties").is_some_and(has_rules) {
            return Err("additionalProperties with CEL rules".to_owned());
        }
        if let Some(items) = map.get("items").filter(|s| has_rules(s)) {
            let mut inner = Walk::default();
            let (x, i) = (format!("x{depth}"), format!("i{depth}"));
            inner.rules(items, &x, &format!("{at} + '[' + string({i}) + ']'"), depth + 1)?;
            push_each(&mut children, v, &x, &i, inner.rules);
        }
        checks.extend(children);
        self.rules.extend(guarded(&format!("{v} != null"), checks));
        Ok(())
    }
}

/// One check for a list `v` whose items `x` (index `i`) have `inner`.
fn push_each(checks: &mut Vec<Check>, v: &str, x: &str, i: &str, inner: Vec<Check>) {
    if inner.is_empty() {
        return;
    }
    let bad = super::cel::any(&inner.iter().map(|c| c.bad.clone()).collect::<Vec<_>>());
    let mut chain = String::from("''");
    for c in inner.iter().rev() {
        chain = format!("({}) ? ({}) : {chain}", c.bad, c.text);
    }
    checks.push(Check {
        bad: format!("{v}.exists({i}, {x}, {bad})"),
        text: format!("{v}.transformList({i}, {x}, {bad}, {chain})[0]"),
    });
}

#[allow(clippy::too_many_arguments)]
fn bound(
    schema: &Map<String, Value>,
    len: &str,
    max_key: &str,
    min_key: &str,
    unit: &str,
    at: &str,
    shown: Option<&str>,
    checks: &mut Vec<Check>,
) {
    let value = shown
        .map(|v| format!("': ' + {}", quote(v)))
        .unwrap_or_else(|| "''".to_owned());
    for (key, op, words) in [(max_key, ">", "at most"), (min_key, "<", "at least")] {
        if let Some(n) = schema.get(key).and_then(Value::as_u64) {
            checks.push(Check {
                bad: format!("{len} {op} {n}"),
                text: format!(
                    "{at} + ': Invalid value' + {value} + {}",
                    lit(&format!(": should have {words} {n} {unit}"))
                ),
            });
        }
    }
}

fn number_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        x.to_string()
    }
}

fn has_rules(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    map.contains_key("x-kubernetes-validations")
        || ["items", "additionalProperties"]
            .iter()
            .any(|k| map.get(*k).is_some_and(has_rules))
        || map
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(has_rules))
}
