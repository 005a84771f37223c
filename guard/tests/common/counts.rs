//! A metrics recorder that keeps every counter's total by name and labels
//! (`idem_guard_calls_total{outcome=disabled,prefix=p}`), for tests that assert what the guard
//! counted. Install it with `metrics::set_global_recorder(counts.clone())`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use metrics::{Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata};
use metrics::{Recorder, SharedString, Unit};

#[derive(Default, Clone)]
pub struct Counts(pub Arc<Mutex<HashMap<String, u64>>>);

struct Handle(String, Counts);

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        *self.1 .0.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }
    fn absolute(&self, value: u64) {
        self.1 .0.lock().unwrap().insert(self.0.clone(), value);
    }
}

impl Recorder for Counts {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        Counter::from_arc(Arc::new(Handle(name, self.clone())))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}
