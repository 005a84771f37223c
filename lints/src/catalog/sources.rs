//! Nondeterministic value sources: calls whose result differs on every execution (random
//! UUIDs, the clock, RNGs, random ids). A key derived from one changes on every delivery.
//!
//! Not sources: name-based UUIDs (`Uuid::new_v5`/`new_v3`), parsing (`Uuid::parse_str`),
//! hashing, seeded RNGs (`StdRng::seed_from_u64`): they are functions of their input.

use crate::names::DefPath;
use crate::util::FastMap;

/// What kind of nondeterminism, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A random UUID or other random id (`Uuid::new_v4`, `Ulid::new`, `nanoid!`).
    RandomId,
    /// The current time (`Utc::now`, `SystemTime::now`, `Instant::now`).
    Clock,
    /// A random number generator or random value (`rand::random`, `thread_rng`, `fastrand`).
    Random,
    /// A source added in configuration.
    Configured,
}

impl SourceKind {
    /// The label at the source: "a random id is made here", "the clock is read here".
    pub fn describe(self) -> &'static str {
        match self {
            SourceKind::RandomId => "a random id is made here, a new one on every run",
            SourceKind::Clock => "the clock is read here, a new value on every run",
            SourceKind::Random => "a random value is drawn here, a new one on every run",
            SourceKind::Configured => "a configured nondeterministic source is called here",
        }
    }
}

/// One catalog entry: a path pattern as [`DefPath::matches`] reads it (`uuid::Uuid::new_v4`),
/// or a whole crate (`fastrand::*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePattern {
    pub pattern: String,
    pub kind: SourceKind,
}

/// Function paths (and a few value paths such as `OsRng`) that produce a fresh value on every
/// call. Looked up by last segment, since a lookup happens for every call of every crate.
#[derive(Debug, Clone)]
pub struct SourceCatalog {
    patterns: Vec<SourcePattern>,
    /// Last segment → indices into `patterns`.
    by_last: FastMap<String, Vec<usize>>,
    /// Crate name → index, for `krate::*` patterns.
    crates: FastMap<String, usize>,
}

const BUILTIN: &[(&str, SourceKind)] = &[
    ("uuid::Uuid::new_v4", SourceKind::RandomId),
    ("uuid::Uuid::now_v7", SourceKind::RandomId),
    ("uuid::Uuid::now_v6", SourceKind::RandomId),
    ("uuid::Uuid::now_v1", SourceKind::RandomId),
    ("uuid::Timestamp::now", SourceKind::Clock),
    ("ulid::Ulid::new", SourceKind::RandomId),
    ("ulid::Ulid::generate", SourceKind::RandomId),
    ("ulid::Generator::generate", SourceKind::RandomId),
    ("nanoid::nanoid", SourceKind::RandomId),
    ("cuid2::create_id", SourceKind::RandomId),
    ("cuid2::cuid", SourceKind::RandomId),
    ("cuid::cuid1", SourceKind::RandomId),
    ("cuid::cuid2", SourceKind::RandomId),
    ("xid::new", SourceKind::RandomId),
    ("svix_ksuid::Ksuid::new", SourceKind::RandomId),
    ("std::time::SystemTime::now", SourceKind::Clock),
    ("std::time::Instant::now", SourceKind::Clock),
    ("tokio::time::Instant::now", SourceKind::Clock),
    ("chrono::Utc::now", SourceKind::Clock),
    ("chrono::Local::now", SourceKind::Clock),
    ("chrono::Utc::today", SourceKind::Clock),
    ("chrono::Local::today", SourceKind::Clock),
    ("time::OffsetDateTime::now_utc", SourceKind::Clock),
    ("time::OffsetDateTime::now_local", SourceKind::Clock),
    ("time::UtcDateTime::now", SourceKind::Clock),
    ("time::Instant::now", SourceKind::Clock),
    ("jiff::Timestamp::now", SourceKind::Clock),
    ("jiff::Zoned::now", SourceKind::Clock),
    ("rand::random", SourceKind::Random),
    ("rand::random_range", SourceKind::Random),
    ("rand::random_bool", SourceKind::Random),
    ("rand::random_iter", SourceKind::Random),
    ("rand::thread_rng", SourceKind::Random),
    ("rand::rng", SourceKind::Random),
    ("rand::rngs::OsRng", SourceKind::Random),
    ("rand::rngs::ThreadRng::default", SourceKind::Random),
    ("rand::rngs::StdRng::from_entropy", SourceKind::Random),
    ("rand::rngs::StdRng::from_os_rng", SourceKind::Random),
    ("rand::rngs::SmallRng::from_entropy", SourceKind::Random),
    ("rand::rngs::SmallRng::from_os_rng", SourceKind::Random),
    ("getrandom::getrandom", SourceKind::Random),
    ("getrandom::fill", SourceKind::Random),
    ("fastrand::*", SourceKind::Random),
];

/// Whether a built-in source pattern starts in crate `krate` (`uuid`, `chrono`, `rand`).
pub fn names_crate(krate: &str) -> bool {
    BUILTIN
        .iter()
        .any(|(p, _)| p.split("::").next() == Some(krate))
}

impl Default for SourceCatalog {
    fn default() -> Self {
        SourceCatalog::from_patterns(
            BUILTIN
                .iter()
                .map(|(p, k)| SourcePattern {
                    pattern: (*p).to_owned(),
                    kind: *k,
                })
                .collect(),
        )
    }
}

impl SourceCatalog {
    fn from_patterns(patterns: Vec<SourcePattern>) -> Self {
        let mut by_last: FastMap<String, Vec<usize>> = FastMap::default();
        let mut crates = FastMap::default();
        for (i, p) in patterns.iter().enumerate() {
            match p.pattern.strip_suffix("::*") {
                Some(krate) => {
                    crates.entry(krate.to_owned()).or_insert(i);
                }
                None => {
                    let last = p.pattern.rsplit("::").next().unwrap_or("").to_owned();
                    by_last.entry(last).or_default().push(i);
                }
            }
        }
        SourceCatalog {
            patterns,
            by_last,
            crates,
        }
    }

    /// Adds configured patterns (`"my_ids::fresh"`, `"snowflake::*"`).
    pub fn with_extra(mut self, extra: &[String]) -> Self {
        self.patterns.extend(extra.iter().map(|p| SourcePattern {
            pattern: p.clone(),
            kind: SourceKind::Configured,
        }));
        SourceCatalog::from_patterns(self.patterns)
    }

    /// The entry `path` (a called function, a macro or a value path) matches.
    pub fn find(&self, path: &DefPath) -> Option<&SourcePattern> {
        if let Some(&i) = path.crate_name().and_then(|k| self.crates.get(k)) {
            return Some(&self.patterns[i]);
        }
        self.by_last
            .get(path.last())?
            .iter()
            .map(|&i| &self.patterns[i])
            .find(|p| matches(path, &p.pattern))
    }
}

fn matches(path: &DefPath, pattern: &str) -> bool {
    match pattern.strip_suffix("::*") {
        Some(krate) => path.crate_name() == Some(krate),
        None => path.matches(pattern),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Krate;

    fn ext(s: &str) -> DefPath {
        let mut parts = s.split("::").map(String::from);
        DefPath {
            krate: Krate::Extern(parts.next().unwrap().into()),
            segments: parts.collect(),
        }
    }

    #[test]
    fn random_and_clock_calls_are_sources_name_based_uuids_are_not() {
        let c = SourceCatalog::default();
        assert_eq!(
            c.find(&ext("uuid::Uuid::new_v4")).map(|p| p.kind),
            Some(SourceKind::RandomId)
        );
        assert!(c.find(&ext("chrono::offset::Utc::now")).is_some());
        assert!(c.find(&ext("fastrand::u64")).is_some());
        assert!(c.find(&ext("uuid::Uuid::new_v5")).is_none());
        assert!(c.find(&ext("uuid::Uuid::parse_str")).is_none());
        assert!(c.find(&ext("rand::rngs::StdRng::seed_from_u64")).is_none());
        let c = c.with_extra(&["snowflake::*".into()]);
        assert!(c.find(&ext("snowflake::next_id")).is_some());
    }
}
