//! Store operations as data: for each store crate family, which calls read, write, claim
//! (and how the claim's answer is tested), increment, delete, expire, or open and end a
//! transaction, and which argument is the key, the value and the TTL. One file per family;
//! the engine (`analysis::store_ops`) reads these rows and keeps the machinery (following
//! receivers, builders and locals, reading SQL text).
//!
//! Every table is a `const` slice of typed rows, and each family's unit test checks its
//! rows' invariants ([`check_rows`]), so a malformed row fails `cargo test`, not a user.

pub mod dynamodb;
pub mod kv;
pub mod mongodb;
pub mod redis;
pub mod sql;

/// How a claim tells its caller it won.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimTest {
    /// By its answer: a `bool`, a count of what it added, an `Option` or a `Result` the
    /// caller branches on (`set_nx`, `SADD`, `compare_and_swap`'s inner `Result`).
    Answer,
    /// By failing when the key is taken: an `Err` that a `?` or a `match` tests (a
    /// conditional `put_item`, a duplicate-key insert, JetStream KV `create`).
    FailsWhenTaken,
}

/// What an operation does to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read,
    /// An unconditional write.
    Write,
    /// An overwrite that cannot tell whether the key existed.
    Upsert,
    /// An atomic conditional write that tells the caller whether it won.
    Claim(ClaimTest),
    /// A write that adds to what is stored (a counter, a list, a stream).
    Increment,
    Delete,
    /// Gives a stored key a TTL ([`Ttl`] says which argument).
    Expire,
    TxBegin,
    TxCommit,
    TxRollback,
}

impl OpKind {
    /// Kinds that store something under the key.
    pub fn writes(self) -> bool {
        matches!(
            self,
            OpKind::Write | OpKind::Upsert | OpKind::Claim(_) | OpKind::Increment
        )
    }
}

/// Where an operation's TTL comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// The operation says nothing of expiry.
    Unsaid,
    /// It never expires (`SETNX`).
    Never,
    /// Seconds in argument `n`.
    Secs(usize),
    /// Milliseconds in argument `n`.
    Millis(usize),
    /// An absolute time (`EXPIREAT`): expires, when is not a constant.
    At,
    /// In options among the arguments after the value (`EX 60`, `SetOptions`,
    /// `Expiration::EX(60)`), else never for a claim.
    Options,
}

/// One method of a store client: `receiver.method(args)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodRow {
    pub method: &'static str,
    pub op: OpKind,
    /// Index of the key argument (`None` for transaction methods).
    pub key: Option<usize>,
    /// Index of the value argument, for writes.
    pub value: Option<usize>,
    pub ttl: Ttl,
    /// Whether an `NX` option among the arguments makes the write a claim.
    pub nx_option: bool,
    /// The number of arguments the call must have (min, max), when the name is shared with
    /// other APIs (`get` with one argument is a Redis `GET`, not `HashMap::get`'s cousin).
    pub arity: (usize, usize),
    /// A name no other common API has: evidence of the store on its own, given the
    /// package depends on the family's crate.
    pub unique: bool,
}

impl MethodRow {
    /// A row with the defaults: any arity, no value, no TTL, no `NX`, not unique.
    pub const fn new(method: &'static str, op: OpKind, key: usize) -> MethodRow {
        MethodRow {
            method,
            op,
            key: Some(key),
            value: None,
            ttl: Ttl::Unsaid,
            nx_option: false,
            arity: (0, usize::MAX),
            unique: false,
        }
    }
    pub const fn value(mut self, i: usize) -> MethodRow {
        self.value = Some(i);
        self
    }
    pub const fn ttl(mut self, t: Ttl) -> MethodRow {
        self.ttl = t;
        self
    }
    pub const fn nx(mut self) -> MethodRow {
        self.nx_option = true;
        self
    }
    pub const fn arity(mut self, min: usize, max: usize) -> MethodRow {
        self.arity = (min, max);
        self
    }
    pub const fn unique(mut self) -> MethodRow {
        self.unique = true;
        self
    }
    /// A transaction method: no key.
    pub const fn tx(method: &'static str, op: OpKind) -> MethodRow {
        MethodRow {
            key: None,
            ..MethodRow::new(method, op, 0)
        }
    }
    /// Whether a call with `n` arguments fits the row.
    pub fn fits(&self, n: usize) -> bool {
        (self.arity.0..=self.arity.1).contains(&n) && self.key.is_none_or(|k| k < n)
    }
}

/// The invariants every method row keeps; each family's test calls it on its tables.
pub fn check_rows(rows: &[MethodRow]) {
    for (i, r) in rows.iter().enumerate() {
        let name = r.method;
        assert!(
            rows[..i]
                .iter()
                .all(|o| !o.method.eq_ignore_ascii_case(name)),
            "{name}: two rows for one method"
        );
        if let Some(problem) = r.problem() {
            panic!("row {i} ({name}): {problem}");
        }
    }
}

impl MethodRow {
    /// What is wrong with the row on its own, if anything: the invariants the built-in
    /// tables are tested for and a user's row ([`StoreModels`]) is refused for.
    pub fn problem(&self) -> Option<&'static str> {
        let r = self;
        let tx = matches!(
            r.op,
            OpKind::TxBegin | OpKind::TxCommit | OpKind::TxRollback
        );
        let ttl_arg = match r.ttl {
            Ttl::Secs(i) | Ttl::Millis(i) => Some(i),
            _ => None,
        };
        Some(if r.method.is_empty() {
            "empty method name"
        } else if r.key.is_none() != tx {
            "a key exactly when not a transaction step"
        } else if r.value.is_some() && !r.op.writes() {
            "a value argument on an operation that stores none"
        } else if r.value.is_some() && r.value == r.key {
            "the value is the key"
        } else if ttl_arg.is_some() && (ttl_arg == r.key || ttl_arg == r.value) {
            "the TTL is the key or value"
        } else if !(r.ttl == Ttl::Unsaid || r.op.writes() || r.op == OpKind::Expire) {
            "a TTL on an operation that stores nothing"
        } else if r.nx_option && r.op != OpKind::Write {
            "NX turns only a plain write into a claim"
        } else if r.arity.0 > r.arity.1 {
            "empty arity"
        } else if r.key.is_some_and(|k| k >= r.arity.1) {
            "the key argument is beyond the arity"
        } else {
            return None;
        })
    }
}

/// A method of a type of the user's own crate that is a store operation, declared in
/// `idem-lint.toml` (`[[models.store]]`): a wrapper whose body the engine cannot see into
/// or would not read as the operation it is (`MyKv::claim(key)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeRow {
    /// The receiver's type: its name (`MyKv`) or a path ending in it (`store::MyKv`).
    pub ty: &'static str,
    pub row: MethodRow,
}

/// Who a key-value method row belongs to.
#[derive(Debug, Clone, Copy)]
pub enum KvOwner {
    /// A built-in family, recognised by its crates and receiver names.
    Family(&'static kv::KvFamily),
    /// A user's type, recognised by the receiver's type alone.
    Type(&'static str),
}

/// The store rows of the key-value kind the engine asks (`analysis::kv_store`): the
/// built-in families ([`kv::FAMILIES`]), then the user's typed rows, in that order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreModels {
    pub typed: Vec<TypeRow>,
}

impl StoreModels {
    /// The built-in rows alone.
    pub fn built_in() -> &'static StoreModels {
        static NONE: StoreModels = StoreModels { typed: Vec::new() };
        &NONE
    }

    /// The rows for a call of `method` with `n` arguments: per owner, the first that fits.
    pub fn kv_rows<'s>(
        &'s self,
        method: &'s str,
        n: usize,
    ) -> impl Iterator<Item = (KvOwner, &'s MethodRow)> + 's {
        let families = kv::FAMILIES.iter().filter_map(move |f| {
            let row = f.methods.iter().find(|r| r.method == method && r.fits(n))?;
            Some((KvOwner::Family(f), row))
        });
        let typed = self
            .typed
            .iter()
            .filter(move |t| t.row.method == method && t.row.fits(n))
            .map(|t| (KvOwner::Type(t.ty), &t.row));
        families.chain(typed)
    }

    /// The user's rows that give a key a TTL ([`OpKind::Expire`]).
    pub fn expires(&self) -> impl Iterator<Item = &TypeRow> {
        self.typed.iter().filter(|t| t.row.op == OpKind::Expire)
    }
}
