//! Values the walk computes and what it knows of them: the fn ids, the sources and
//! their trails, the facts and the [`Value`] itself.

use super::*;

/// A function of the package: file index and index in [`FileModel::fns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FnId {
    pub file: u32,
    pub index: u32,
}

impl FnId {
    pub fn new(file: usize, index: usize) -> FnId {
        FnId {
            file: file as u32,
            index: index as u32,
        }
    }

    pub fn def<'a>(&self, package: &'a Package) -> (&'a FileModel, &'a FnDef) {
        let file = &package.files[self.file as usize];
        (file, &file.fns[self.index as usize])
    }
}

/// Where a nondeterministic value was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub span: Span,
    /// The call as written, for labels: `Uuid::new_v4()`.
    pub what: String,
    pub kind: SourceKind,
}

/// One step a value took between its source and a sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub span: Span,
    pub note: String,
}

/// The steps a value took, newest last; shared between the copies of a value.
#[derive(Debug, Clone, Default)]
pub struct Trail(pub(super) Option<Arc<TrailNode>>);

#[derive(Debug)]
pub(super) struct TrailNode {
    pub(super) step: Step,
    pub(super) prev: Trail,
    pub(super) len: usize,
}

/// Steps kept per value: enough to show a path, not so many that labels drown the finding.
pub(super) const MAX_STEPS: usize = 6;

impl Trail {
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |n| n.len)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(super) fn push(&self, step: Step) -> Trail {
        if self.len() >= MAX_STEPS {
            return self.clone();
        }
        Trail(Some(Arc::new(TrailNode {
            step,
            prev: self.clone(),
            len: self.len() + 1,
        })))
    }

    /// The steps in order, from the source towards the sink.
    pub fn steps(&self) -> Vec<&Step> {
        let mut out = Vec::new();
        let mut cur = self;
        while let Some(node) = &cur.0 {
            out.push(&node.step);
            cur = &node.prev;
        }
        out.reverse();
        out
    }
}

/// One thing a value is derived from.
#[derive(Debug, Clone)]
pub enum Fact {
    /// A nondeterministic source and the steps from it.
    Nondet { source: Arc<Source>, trail: Trail },
    /// Parameter `index` of the function (not counting `self`), or one of its fields
    /// (`msg.id` of parameter `msg`), so a caller passes only that field's facts.
    Param { index: usize, field: Option<String> },
    /// The result of [`FnFlow::store_events`]`[i]`.
    Op(usize),
}

impl Fact {
    pub(super) fn same(&self, other: &Fact) -> bool {
        match (self, other) {
            (Fact::Nondet { source: a, .. }, Fact::Nondet { source: b, .. }) => a.span == b.span,
            (Fact::Param { index: a, field: f }, Fact::Param { index: b, field: g }) => {
                a == b && f == g
            }
            (Fact::Op(a), Fact::Op(b)) => a == b,
            _ => false,
        }
    }
}

/// Facts kept per value; beyond this a value is already known to be tainted.
pub(in crate::analysis) const MAX_FACTS: usize = 8;

/// What a value is derived from, with per-field values for struct and tuple literals.
#[derive(Debug, Clone, Default)]
pub struct Value {
    pub facts: Vec<Fact>,
    /// `Cmd { key: k, at: now }` keeps `key` and `at` apart, so `cmd.at` does not carry
    /// `k`'s facts. `facts` is always the union of the fields.
    pub fields: Vec<(String, Value)>,
}

impl Value {
    pub(super) fn fact(f: Fact) -> Value {
        Value {
            facts: vec![f],
            fields: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    pub(super) fn add(&mut self, f: Fact) {
        if self.facts.len() < MAX_FACTS && !self.facts.iter().any(|g| g.same(&f)) {
            self.facts.push(f);
        }
    }

    /// Adds `other`'s facts (fields are dropped: the result is a new value).
    pub fn union(&mut self, other: &Value) {
        for f in &other.facts {
            self.add(f.clone());
        }
    }

    pub(super) fn joined(values: impl IntoIterator<Item = Value>) -> Value {
        let mut out = Value::default();
        for v in values {
            out.union(&v);
        }
        out
    }

    /// The value with `step` added to every nondeterministic fact's trail.
    pub(super) fn stepped(mut self, step: impl Fn() -> Step) -> Value {
        if self.nondet().next().is_none() {
            return self;
        }
        let s = step();
        for f in &mut self.facts {
            if let Fact::Nondet { trail, .. } = f {
                *trail = trail.push(s.clone());
            }
        }
        self
    }

    /// The value of field `name`: the field's own value when the struct literal is known,
    /// else the whole value, with parameters narrowed to that field.
    pub fn field(&self, name: &str) -> Value {
        if let Some((_, v)) = self.fields.iter().find(|(n, _)| n == name) {
            return v.clone();
        }
        // Facts another field brought (`job.enqueued_at = now()`) are not this field's.
        let of_other_field = |f: &Fact| {
            self.fields
                .iter()
                .any(|(_, v)| v.facts.iter().any(|g| g.same(f)))
        };
        let facts = self
            .facts
            .iter()
            .filter(|f| !of_other_field(f))
            .map(|f| match f {
                Fact::Param { index, field: None } => Fact::Param {
                    index: *index,
                    field: Some(name.to_owned()),
                },
                other => other.clone(),
            })
            .collect();
        Value {
            facts,
            fields: Vec::new(),
        }
    }

    /// The nondeterministic sources with their trails.
    pub fn nondet(&self) -> impl Iterator<Item = (&Arc<Source>, &Trail)> {
        self.facts.iter().filter_map(|f| match f {
            Fact::Nondet { source, trail } => Some((source, trail)),
            _ => None,
        })
    }

    /// The parameters (and parameter fields) this value is derived from.
    pub fn params(&self) -> impl Iterator<Item = (usize, Option<&str>)> + '_ {
        self.facts.iter().filter_map(|f| match f {
            Fact::Param { index, field } => Some((*index, field.as_deref())),
            _ => None,
        })
    }

    /// The store events whose result this value is derived from.
    pub fn ops(&self) -> impl Iterator<Item = usize> + '_ {
        self.facts.iter().filter_map(|f| match f {
            Fact::Op(i) => Some(*i),
            _ => None,
        })
    }

    pub(super) fn only_ops(&self) -> Value {
        Value {
            facts: self
                .facts
                .iter()
                .filter(|f| matches!(f, Fact::Op(_)))
                .cloned()
                .collect(),
            fields: Vec::new(),
        }
    }
}

/// A value derived from the function's parameters only.
pub(super) fn is_param_value(v: &Value) -> bool {
    !v.facts.is_empty() && v.facts.iter().all(|f| matches!(f, Fact::Param { .. }))
}

pub(super) fn narrow(v: &Value, field: Option<&str>) -> Value {
    match field {
        Some(f) => v.field(f),
        None => v.clone(),
    }
}
