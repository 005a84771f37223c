//! Tables the lints match code against. Data, not logic: each table says where it comes from
//! and how it is regenerated.

pub mod tokens;
