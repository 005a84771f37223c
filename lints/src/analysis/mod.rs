//! The analysis layer lints ask questions of: name resolution, local types, value flow,
//! function summaries, the call graph. Built once per package, on demand.

pub mod chain;
pub mod resolve;
pub mod types;

pub use chain::{Chain, Locals, MethodStep, Step};
pub use resolve::{DefPath, Krate, Resolver};

use crate::model::Package;
pub use types::{TypeEnv, Types};

/// Everything computed once per package that lints share.
#[derive(Debug)]
pub struct Analysis {
    pub resolver: Resolver,
    pub types: Types,
}

impl Analysis {
    pub fn new(package: &Package) -> Analysis {
        let resolver = Resolver::new(package);
        let types = Types::new(package, &resolver);
        Analysis { resolver, types }
    }
}
