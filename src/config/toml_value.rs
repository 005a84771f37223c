//! TOML values as JSON, the form `Settings::set` takes lint settings in.

use toml::de::DeValue;

pub fn to_json(value: &DeValue<'_>) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map(J::from)
            .unwrap_or_else(|_| J::String(i.as_str().to_string())),
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(J::Number)
            .unwrap_or_else(|| J::String(f.as_str().to_string())),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Array(items) => J::Array(items.iter().map(|v| to_json(v.get_ref())).collect()),
        DeValue::Table(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.get_ref().to_string(), to_json(v.get_ref())))
                .collect(),
        ),
    }
}
