//! What `draguard check` reads from a YAML file, as one JSON line:
//! `{"ok": [documents]}` (empty and null documents dropped, as `check`
//! drops them) or `{"error": "LINE:COLUMN: message"}`. The draguard side
//! of `scripts/yaml-suite.sh`, which compares it with go-yaml's reading.
//!
//!   cargo run --example yaml_read -- FILE...   # one line per file

use draguard::check::input::Document;

fn main() {
    for path in std::env::args().skip(1) {
        let line = match std::fs::read(&path).map(String::from_utf8) {
            Ok(Ok(text)) => read(&path, &text),
            _ => serde_json::json!({"error": "unreadable or not UTF-8"}),
        };
        println!("{line}");
    }
}

fn read(path: &str, text: &str) -> serde_json::Value {
    let mut docs = Vec::new();
    for document in Document::split(0, text) {
        match document.json(path) {
            Ok(Some(json)) => match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(value) => docs.push(value),
                Err(e) => return serde_json::json!({"error": format!("JSON text: {e}")}),
            },
            Ok(None) => {}
            Err(p) => return serde_json::json!({"error": format!("{}:{}: {}", p.line, p.column, p.message)}),
        }
    }
    serde_json::json!({"ok": docs})
}
