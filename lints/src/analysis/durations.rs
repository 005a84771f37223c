//! Durations written as constants: the seconds of a TTL (`EX 3600`, `set_ex(k, v, TTL)`,
//! `Duration::from_secs(60 * 60)`, `chrono::Duration::hours(2)`) or of a redelivery window
//! (`visibility_timeout(300)`), followed through locals, the crate's `const`s and `+ - * /`
//! on them (`MINUTES * 60`, `TTL * 1000`, `WORK * 10` on a `Duration`).
//!
//! Public API: [`int_of`] (an integer constant) and [`millis_of`] (a `Duration` or chrono
//! constant, in milliseconds), with the flow walker's [`OpEnv`] or, outside a walk,
//! [`FnConsts`]. Both answer `None` unless the value is certain: a TTL read
//! from the environment or a config struct is unknown, never guessed.

use super::chain::Locals;
use super::resolve::{DefPath, Krate, Resolver};
use super::store_ops::OpEnv;
use crate::model::ir::{ArithOp, BinOp, Expr, ExprKind, Lit, Path};
use crate::model::{FileModel, FnDef, Package};

/// How deep locals and constants are followed (`let ttl = TTL; .. ttl`).
const MAX_DEPTH: usize = 4;

/// The integer `e` certainly holds: a literal (arithmetic of literals is folded when
/// lowered), a local or `const` bound to one, a cast, `Duration::as_secs()` of a constant
/// `Duration`, `.into()`/`try_into().unwrap()` of one, and `+ - * /` of those
/// (`TTL * 1000`, `const DAY: u64 = HOUR * 24`).
pub fn int_of<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<u64> {
    int_at(env, e, 0)
}

/// The milliseconds a `Duration` (std, tokio, `time`, chrono, `TimeDelta`) certainly holds.
pub fn millis_of<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<u64> {
    millis_at(env, e, 0)
}

fn int_at<'a>(env: &dyn OpEnv<'a>, e: &'a Expr, depth: usize) -> Option<u64> {
    if depth > MAX_DEPTH {
        return None;
    }
    match &e.peel().kind {
        ExprKind::Lit(Lit::Int(digits)) => digits.parse().ok(),
        ExprKind::Cast { expr, .. } => int_at(env, expr, depth + 1),
        ExprKind::Unary { not: false, .. } => None,
        ExprKind::Path(_) => int_at(env, bound(env, e)?, depth + 1),
        ExprKind::Binary {
            op: BinOp::Arith(op),
            lhs,
            rhs,
        } => arith(
            *op,
            int_at(env, lhs, depth + 1)?,
            int_at(env, rhs, depth + 1)?,
        ),
        ExprKind::MethodCall {
            receiver, method, ..
        } => match method.as_str() {
            "as_secs" | "num_seconds" | "whole_seconds" => {
                millis_at(env, receiver, depth + 1).map(|ms| ms / 1000)
            }
            "as_millis" | "num_milliseconds" | "whole_milliseconds" => {
                millis_at(env, receiver, depth + 1)
            }
            "into" | "try_into" | "unwrap" | "expect" | "clone" | "to_owned" => {
                int_at(env, receiver, depth + 1)
            }
            _ => None,
        },
        _ => None,
    }
}

fn millis_at<'a>(env: &dyn OpEnv<'a>, e: &'a Expr, depth: usize) -> Option<u64> {
    if depth > MAX_DEPTH {
        return None;
    }
    match &e.peel().kind {
        ExprKind::Path(_) => millis_at(env, bound(env, e)?, depth + 1),
        ExprKind::Binary {
            op: BinOp::Arith(op),
            lhs,
            rhs,
        } => duration_arith(env, *op, lhs, rhs, depth + 1),
        ExprKind::Call { func, args } => {
            let unit = unit_millis(func.as_path()?.last())?;
            let [n] = args.as_slice() else {
                return None;
            };
            int_at(env, n, depth + 1)?.checked_mul(unit)
        }
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(
            method.as_str(),
            "into" | "clone" | "unwrap" | "expect" | "to_std"
        ) =>
        {
            millis_at(env, receiver, depth + 1)
        }
        _ => None,
    }
}

/// `a op b` on integers, unless it overflows or is not `+ - * /`.
fn arith(op: ArithOp, a: u64, b: u64) -> Option<u64> {
    match op {
        ArithOp::Add => a.checked_add(b),
        ArithOp::Sub => a.checked_sub(b),
        ArithOp::Mul => a.checked_mul(b),
        ArithOp::Div => a.checked_div(b),
        ArithOp::Other => None,
    }
}

/// `TTL * 2`, `2 * TTL`, `TTL / 2` (a `Duration` and an integer), `A + B`, `A - B` (two
/// `Duration`s), in milliseconds.
fn duration_arith<'a>(
    env: &dyn OpEnv<'a>,
    op: ArithOp,
    lhs: &'a Expr,
    rhs: &'a Expr,
    depth: usize,
) -> Option<u64> {
    match op {
        ArithOp::Add | ArithOp::Sub => {
            arith(op, millis_at(env, lhs, depth)?, millis_at(env, rhs, depth)?)
        }
        ArithOp::Mul => match millis_at(env, lhs, depth) {
            Some(ms) => ms.checked_mul(int_at(env, rhs, depth)?),
            None => int_at(env, lhs, depth)?.checked_mul(millis_at(env, rhs, depth)?),
        },
        ArithOp::Div => arith(op, millis_at(env, lhs, depth)?, int_at(env, rhs, depth)?),
        ArithOp::Other => None,
    }
}

/// Milliseconds per unit of a `Duration` constructor (`from_secs`, chrono's `minutes`).
fn unit_millis(ctor: &str) -> Option<u64> {
    Some(match ctor {
        "from_millis" | "milliseconds" | "try_milliseconds" => 1,
        "from_secs" | "seconds" | "try_seconds" => 1000,
        "from_mins" | "minutes" | "try_minutes" => 60_000,
        "from_hours" | "hours" | "try_hours" => 3_600_000,
        "from_days" | "days" | "try_days" => 86_400_000,
        "weeks" | "try_weeks" => 604_800_000,
        _ => return None,
    })
}

/// What the path `e` names: a local's initializer or a crate constant's value.
fn bound<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<&'a Expr> {
    let path = e.peel().as_path()?;
    match path.as_ident() {
        Some(name) => env.local_init(name).or_else(|| env.const_value(path)),
        None => env.const_value(path),
    }
}

/// What [`int_of`] and [`millis_of`] need, for a function read outside a flow walk: its
/// locals with one initializer, the crate's constants, its `use`s.
pub struct FnConsts<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    file: &'a FileModel,
    f: &'a FnDef,
    locals: Locals<'a>,
}

impl<'a> FnConsts<'a> {
    pub fn new(
        package: &'a Package,
        resolver: &'a Resolver,
        file: &'a FileModel,
        f: &'a FnDef,
    ) -> Option<FnConsts<'a>> {
        Some(FnConsts {
            package,
            resolver,
            file,
            f,
            locals: Locals::of_body(f.body.as_ref()?),
        })
    }
}

impl<'a> OpEnv<'a> for FnConsts<'a> {
    fn resolve(&self, path: &Path) -> DefPath {
        self.resolver.resolve(
            self.file.target,
            &self.f.module,
            path,
            self.f.self_ty.as_ref(),
        )
    }

    fn type_of(&self, _: &Expr) -> Option<DefPath> {
        None
    }

    fn string_of(&self, e: &Expr) -> Option<String> {
        if let Some(s) = e.as_str_lit() {
            return Some(s.to_owned());
        }
        let init = bound(self, e)?;
        init.as_str_lit().map(str::to_owned)
    }

    fn depends_on(&self, krate: &str) -> bool {
        self.package.depends_on(krate)
    }

    fn local_init(&self, name: &str) -> Option<&'a Expr> {
        match self.locals.defs(name) {
            [one] => Some(one),
            _ => None,
        }
    }

    fn const_value(&self, path: &Path) -> Option<&'a Expr> {
        let def = self.resolve(path);
        let Krate::Local(target) = def.krate else {
            return None;
        };
        let (_, c) = self.package.const_def(target, &def.segments)?;
        Some(&c.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_folds_only_what_is_certain() {
        assert_eq!(arith(ArithOp::Mul, 5, 60), Some(300));
        assert_eq!(arith(ArithOp::Add, 60, 30), Some(90));
        assert_eq!(arith(ArithOp::Div, 3_600_000, 1000), Some(3600));
        // An underflow, an overflow, a division by zero or `%` is no certain TTL.
        assert_eq!(arith(ArithOp::Sub, 1, 2), None);
        assert_eq!(arith(ArithOp::Mul, u64::MAX, 2), None);
        assert_eq!(arith(ArithOp::Div, 1, 0), None);
        assert_eq!(arith(ArithOp::Other, 7, 3), None);
    }
}
