//! The analysis layer lints ask questions of: name resolution, local types, value flow,
//! store operations, function summaries. Built once per package, on demand.
//!
//! - [`resolve`]: paths to definitions ([`Resolver`], [`DefPath`]).
//! - [`types`]: local type evidence ([`TypeEnv`]).
//! - [`store_ops`]: is this call a Redis/DynamoDB/SQL read, write or atomic claim, with
//!   which key ([`store_ops::classify`]); [`sql`] reads SQL text.
//! - [`flow`]: value flow inside one function ([`flow::walk`], [`FnFlow`]).
//! - [`summary`]: every function's [`FnSummary`] to a fixed point ([`Summaries`]), reached
//!   with [`Analysis::summaries`].

pub mod chain;
pub mod flow;
pub mod resolve;
pub mod sql;
pub mod store_ops;
pub mod summary;
pub mod types;

pub use chain::{Chain, Locals, MethodStep, Step};
pub use flow::{FnFlow, FnId, KeyDesc, Value};
pub use resolve::{DefPath, Krate, Resolver};
pub use store_ops::{Access, Store, StoreOp};
pub use summary::{FnSummary, StoreAccess, Summaries};

use crate::catalog::Catalog;
use crate::model::Package;
use std::cell::OnceCell;
pub use types::{TypeEnv, Types};

/// Everything computed once per package that lints share.
#[derive(Debug)]
pub struct Analysis {
    pub resolver: Resolver,
    pub types: Types,
    pub catalog: Catalog,
    summaries: OnceCell<Summaries>,
}

impl Analysis {
    /// The analysis with the built-in catalogs.
    pub fn new(package: &Package) -> Analysis {
        Analysis::with_catalog(package, Catalog::default())
    }

    /// The analysis with catalogs extended by configuration
    /// ([`Catalog::from_settings`]).
    pub fn with_catalog(package: &Package, catalog: Catalog) -> Analysis {
        let resolver = Resolver::new(package);
        let types = Types::new(package, &resolver);
        Analysis {
            resolver,
            types,
            catalog,
            summaries: OnceCell::new(),
        }
    }

    /// Every function's summary and flow facts, computed on first use. `package` must be
    /// the package this analysis was built for.
    pub fn summaries(&self, package: &Package) -> &Summaries {
        self.summaries
            .get_or_init(|| Summaries::compute(package, &self.resolver, &self.types, &self.catalog))
    }
}
