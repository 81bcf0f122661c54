//! Typed reads from a Hugging Face `config.json`, with errors that name the missing field.
//!
//! Multimodal configs nest the language model under `text_config`; fields are looked up
//! there first and then at the top level (where `torch_dtype` and `quantization_config` live).

use super::error::ConfigError;
use serde_json::{Map, Value};

/// The largest architecture dimension accepted (2^24); real models stay far below it.
pub const MAX_DIM: u64 = 1 << 24;

/// One parsed `config.json` (or preset) and where it came from, for error messages.
#[derive(Debug, Clone)]
pub struct ConfigDoc {
    origin: String,
    root: Map<String, Value>,
    text: Option<Map<String, Value>>,
}

impl ConfigDoc {
    /// Parse JSON text; `origin` names the source in errors (`config.json at ./x`, `preset y`).
    pub fn parse(origin: &str, json: &str) -> Result<Self, ConfigError> {
        let value: Value = serde_json::from_str(json).map_err(|e| ConfigError::Json {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        Self::from_value(origin, value)
    }

    pub fn from_value(origin: &str, value: Value) -> Result<Self, ConfigError> {
        let Value::Object(root) = value else {
            return Err(ConfigError::NotAnObject {
                origin: origin.to_string(),
            });
        };
        let text = match root.get("text_config") {
            Some(Value::Object(inner)) => Some(inner.clone()),
            _ => None,
        };
        Ok(Self {
            origin: origin.to_string(),
            root,
            text,
        })
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The value of `field`, preferring `text_config`, with the path it was found at.
    fn lookup(&self, field: &str) -> Option<(&Value, String)> {
        if let Some(text) = &self.text
            && let Some(v) = text.get(field)
        {
            return Some((v, format!("text_config.{field}")));
        }
        self.root.get(field).map(|v| (v, field.to_string()))
    }

    /// Where a missing field should go (inside `text_config` when the file has one).
    fn expected_path(&self, field: &str) -> String {
        match self.text {
            Some(_) => format!("text_config.{field}"),
            None => field.to_string(),
        }
    }

    /// Whether `field` is present and not null.
    pub fn has(&self, field: &str) -> bool {
        matches!(self.lookup(field), Some((v, _)) if !v.is_null())
    }

    pub fn missing(&self, field: &str, meaning: &'static str) -> ConfigError {
        ConfigError::Missing {
            origin: self.origin.clone(),
            field: self.expected_path(field),
            meaning,
        }
    }

    pub fn invalid(&self, field: &str, problem: impl Into<String>) -> ConfigError {
        let path = self
            .lookup(field)
            .map(|(_, p)| p)
            .unwrap_or_else(|| self.expected_path(field));
        ConfigError::Invalid {
            origin: self.origin.clone(),
            field: path,
            problem: problem.into(),
        }
    }

    fn wrong_type(&self, path: String, expected: &'static str, found: &Value) -> ConfigError {
        ConfigError::WrongType {
            origin: self.origin.clone(),
            field: path,
            expected,
            found: describe(found),
        }
    }

    /// A non-negative integer, or `None` when absent or null.
    pub fn u64_opt(&self, field: &str) -> Result<Option<u64>, ConfigError> {
        let Some((value, path)) = self.lookup(field) else {
            return Ok(None);
        };
        if value.is_null() {
            return Ok(None);
        }
        as_u64(value)
            .map(Some)
            .ok_or_else(|| self.wrong_type(path, "a non-negative integer", value))
    }

    /// A required positive integer.
    pub fn u64_req(&self, field: &str, meaning: &'static str) -> Result<u64, ConfigError> {
        match self.u64_opt(field)? {
            None => Err(self.missing(field, meaning)),
            Some(0) => Err(self.invalid(field, "is 0; it must be at least 1")),
            Some(n) => Ok(n),
        }
    }

    /// An architecture dimension (layers, heads, widths, vocab): positive and at most
    /// [`MAX_DIM`], so the arithmetic built on it cannot overflow.
    pub fn dim_opt(&self, field: &str) -> Result<Option<u64>, ConfigError> {
        match self.u64_opt(field)? {
            Some(0) => Err(self.invalid(field, "is 0; it must be at least 1")),
            Some(n) if n > MAX_DIM => Err(self.invalid(
                field,
                format!("is {n}, implausibly large (over {MAX_DIM}); check the file"),
            )),
            other => Ok(other),
        }
    }

    /// A required architecture dimension.
    pub fn dim_req(&self, field: &str, meaning: &'static str) -> Result<u64, ConfigError> {
        self.dim_opt(field)?
            .ok_or_else(|| self.missing(field, meaning))
    }

    pub fn bool_opt(&self, field: &str) -> Result<Option<bool>, ConfigError> {
        match self.lookup(field) {
            None => Ok(None),
            Some((Value::Null, _)) => Ok(None),
            Some((Value::Bool(b), _)) => Ok(Some(*b)),
            Some((other, path)) => Err(self.wrong_type(path, "true or false", other)),
        }
    }

    pub fn str_opt(&self, field: &str) -> Result<Option<&str>, ConfigError> {
        match self.lookup(field) {
            None => Ok(None),
            Some((Value::Null, _)) => Ok(None),
            Some((Value::String(s), _)) => Ok(Some(s.as_str())),
            Some((other, path)) => Err(self.wrong_type(path, "a string", other)),
        }
    }

    /// An array of strings (`layer_types`).
    pub fn str_list_opt(&self, field: &str) -> Result<Option<Vec<&str>>, ConfigError> {
        self.list_opt(field, "an array of strings", |v| v.as_str())
    }

    /// An array of integers (`mlp_only_layers`).
    pub fn u64_list_opt(&self, field: &str) -> Result<Option<Vec<u64>>, ConfigError> {
        self.list_opt(field, "an array of integers", as_u64)
    }

    /// An array whose every item `item` reads; `what` names the type in the error.
    fn list_opt<'a, T>(
        &'a self,
        field: &str,
        what: &'static str,
        item: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<Vec<T>>, ConfigError> {
        let Some((value, path)) = self.lookup(field) else {
            return Ok(None);
        };
        match value {
            Value::Null => Ok(None),
            Value::Array(items) => items
                .iter()
                .map(item)
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.wrong_type(path, what, value)),
            other => Err(self.wrong_type(path, what, other)),
        }
    }

    /// A string inside a nested object, e.g. `quantization_config.quant_method`.
    pub fn nested_str(&self, object: &str, field: &str) -> Option<&str> {
        self.lookup(object)
            .and_then(|(v, _)| v.get(field))
            .and_then(Value::as_str)
    }

    /// An integer inside a nested object, e.g. `quantization_config.bits`.
    pub fn nested_u64(&self, object: &str, field: &str) -> Option<u64> {
        self.lookup(object)
            .and_then(|(v, _)| v.get(field))
            .and_then(as_u64)
    }
}

/// Integers, and floats with no fractional part (some exporters write `4096.0`).
fn as_u64(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f < 9.0e15).then_some(f as u64)
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::ConfigDoc;
    use crate::capacity::error::ConfigError;

    #[test]
    fn prefers_text_config_and_names_the_nested_path() {
        let doc = ConfigDoc::parse(
            "test",
            r#"{"torch_dtype": "bfloat16", "text_config": {"num_hidden_layers": 62}}"#,
        )
        .unwrap();
        assert_eq!(doc.u64_opt("num_hidden_layers").unwrap(), Some(62));
        assert_eq!(doc.str_opt("torch_dtype").unwrap(), Some("bfloat16"));
        match doc.u64_req("hidden_size", "the model width") {
            Err(ConfigError::Missing { field, .. }) => assert_eq!(field, "text_config.hidden_size"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn wrong_types_and_zero_are_errors() {
        let doc =
            ConfigDoc::parse("test", r#"{"a": "x", "b": 0, "c": 4096.0, "d": null}"#).unwrap();
        assert!(matches!(
            doc.u64_opt("a"),
            Err(ConfigError::WrongType { .. })
        ));
        assert!(matches!(
            doc.u64_req("b", "b"),
            Err(ConfigError::Invalid { .. })
        ));
        assert_eq!(doc.u64_opt("c").unwrap(), Some(4096));
        assert_eq!(doc.u64_opt("d").unwrap(), None);
        assert!(!doc.has("d"));
    }

    #[test]
    fn syntax_errors_and_non_objects_are_reported() {
        assert!(matches!(
            ConfigDoc::parse("t", "{"),
            Err(ConfigError::Json { .. })
        ));
        assert!(matches!(
            ConfigDoc::parse("t", "[1]"),
            Err(ConfigError::NotAnObject { .. })
        ));
    }
}
