//! The walker's expressions: paths, sources, `?`, `.await`, macros.

use super::*;

/// The name a value is written with: `table_name` of `&self.table_name`, `private_table`
/// of `schema.private_table("jobs")`.
pub(super) fn value_name(e: &Expr) -> String {
    match &e.peel().kind {
        ExprKind::Path(p) => p.last().to_owned(),
        ExprKind::Field { member, .. } => member.clone(),
        ExprKind::MethodCall {
            receiver, method, ..
        } if CONVERSIONS.contains(&method.as_str()) => value_name(receiver),
        ExprKind::MethodCall { method, .. } => method.clone(),
        _ => String::new(),
    }
}

impl<'a> Walker<'a, '_> {
    // ------------------------------------------------------------ expressions

    pub(super) fn eval(&mut self, e: &'a Expr) -> Value {
        match &e.kind {
            ExprKind::Path(p) => self.eval_path(p, e.span),
            ExprKind::Lit(_) | ExprKind::Continue => Value::default(),
            ExprKind::Call { func, args } => self.eval_call(e, func, args),
            ExprKind::MethodCall {
                receiver,
                method,
                method_span,
                args,
            } => self.eval_method(e, receiver, method, *method_span, args),
            ExprKind::Macro(m) => self.eval_macro(e, m),
            ExprKind::Field { base, member } => self.eval(base).field(member),
            ExprKind::Index { base, index } => {
                self.eval(index);
                self.eval(base)
            }
            ExprKind::Unary { expr, .. }
            | ExprKind::Deref(expr)
            | ExprKind::Ref { expr, .. }
            | ExprKind::Cast { expr, .. } => self.eval(expr),
            // `async move { .. }.await` runs its block now, exactly once: its assignments
            // replace values as the function body's do.
            ExprKind::Await(inner) => self.eval_await(inner),
            ExprKind::Try(inner) => self.eval_try(inner),
            // `match x { Ok(v) => v, Err(e) => return Err(e.into()) }` is `x?` written out.
            ExprKind::Match { scrutinee, arms } if is_try_match(arms) => self.eval_try(scrutinee),
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.eval(lhs);
                let r = self.eval(rhs);
                match op {
                    BinOp::Arith(_) => Value::joined([l, r]),
                    // A comparison or a boolean carries only which reads it depends on.
                    _ => Value::joined([l.only_ops(), r.only_ops()]),
                }
            }
            ExprKind::Block(b) => self.eval_block(b),
            ExprKind::Async { block, .. } => {
                self.branch_depth += 1;
                self.bodies.push(block.span);
                let v = self.eval_block(block);
                self.bodies.pop();
                self.branch_depth -= 1;
                v
            }
            ExprKind::Closure { params, body, .. } => {
                let arg = self.closure_arg.take().unwrap_or_default();
                self.enter_block(body.span);
                for p in params {
                    self.bind_pat(p, arg.clone(), None, None);
                    self.types.bind_let(p, None);
                }
                self.branch_depth += 1;
                self.bodies.push(body.span);
                let v = self.eval(body);
                self.bodies.pop();
                self.branch_depth -= 1;
                self.exit_block();
                v
            }
            ExprKind::If { cond, then, els } => self.eval_if(cond, then, els.as_deref()),
            ExprKind::Let { pat, expr } => {
                let v = self.eval(expr);
                self.types.bind_tested(pat, expr);
                self.bind_pat(pat, v.clone(), Some(DescSrc::Expr(expr)), None);
                v.only_ops()
            }
            ExprKind::Match { scrutinee, arms } => self.eval_match(scrutinee, arms),
            ExprKind::Loop { cond, body } => {
                if let Some(c) = cond {
                    self.eval(c);
                }
                self.branch_depth += 1;
                self.eval_block(body);
                self.branch_depth -= 1;
                Value::default()
            }
            ExprKind::For { pat, iter, body } => {
                let v = self.eval(iter);
                self.enter_block(body.span);
                self.bind_pat(pat, v, None, None);
                self.branch_depth += 1;
                self.eval_block(body);
                self.branch_depth -= 1;
                self.exit_block();
                Value::default()
            }
            ExprKind::Return(v) | ExprKind::Break(v) => {
                if let Some(v) = v {
                    let val = self.eval(v);
                    if matches!(e.kind, ExprKind::Return(_)) {
                        self.out.ret.union(&val);
                    }
                }
                Value::default()
            }
            ExprKind::Assign { lhs, rhs } => {
                let v = self.eval(rhs);
                self.assign(lhs, v);
                Value::default()
            }
            ExprKind::AssignOp { lhs, rhs } => {
                let v = self.eval(rhs);
                let keep = self.branch_depth;
                self.branch_depth += 1;
                self.assign(lhs, v);
                self.branch_depth = keep;
                Value::default()
            }
            ExprKind::Struct { fields, rest, .. } => {
                let mut out = Value::default();
                for (name, fe) in fields {
                    let fv = self.eval(fe);
                    if self.cx.catalog.sinks.is_key_name(name) {
                        self.key_use(SinkKind::KeyName(name.clone()), fe.span, fv.clone(), None);
                    }
                    out.union(&fv);
                    out.fields.push((name.clone(), fv));
                }
                if let Some(r) = rest {
                    let rv = self.eval(r);
                    out.union(&rv);
                }
                out
            }
            ExprKind::Tuple(items) => {
                let mut out = Value::default();
                for (i, it) in items.iter().enumerate() {
                    let v = self.eval(it);
                    out.union(&v);
                    out.fields.push((i.to_string(), v));
                }
                out
            }
            ExprKind::Array(items) | ExprKind::Other(items) => {
                let vs: Vec<Value> = items.iter().map(|i| self.eval(i)).collect();
                Value::joined(vs)
            }
            ExprKind::Range { start, end } => {
                let mut out = Value::default();
                for x in [start, end].into_iter().flatten() {
                    let v = self.eval(x);
                    out.union(&v);
                }
                out
            }
        }
    }

    pub(super) fn eval_path(&mut self, p: &Path, span: Span) -> Value {
        if let Some(name) = p.as_ident() {
            if let Some(v) = self.vals.get(name) {
                return v.clone();
            }
        }
        // A value path can itself be a source (`OsRng`).
        if p.segments.len() > 1 || p.last().starts_with(char::is_uppercase) {
            let def = self.resolve(p);
            if let Some(src) = self.cx.catalog.sources.find(&def) {
                return self.source(span, &p.segments.join("::"), src.kind);
            }
        }
        Value::default()
    }

    pub(super) fn source(&self, span: Span, what: &str, kind: SourceKind) -> Value {
        Value::fact(Fact::Nondet {
            source: Arc::new(Source {
                span,
                what: what.to_owned(),
                kind,
            }),
            trail: Trail::default(),
        })
    }

    pub(super) fn eval_args(&mut self, args: &'a [Expr]) -> Vec<Value> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    /// The value of an expression already walked as part of the operation: events it
    /// records again are dropped, and so are facts about them.
    pub(super) fn eval_quiet(&mut self, e: &'a Expr) -> Value {
        let saved = std::mem::take(&mut self.out);
        let mut v = self.eval(e);
        self.out = saved;
        v.facts.retain(|f| !matches!(f, Fact::Op(_)));
        v
    }

    /// `inner?`: a conditional DynamoDB write fails when the item exists, and so does a
    /// key-only insert into a dedupe table: `?` stops there.
    pub(super) fn eval_try(&mut self, inner: &'a Expr) -> Value {
        let v = self.eval(inner);
        let dynamo_claims: Vec<usize> = v
            .ops()
            .filter(|&i| fails_out(&self.out.store_events[i].access))
            .collect();
        for i in dynamo_claims {
            self.out.store_events[i].checked = true;
            self.out.store_events[i].tried = true;
        }
        v
    }

    /// `inner.await`. `async move { .. }.await` runs its block now, exactly once: its
    /// assignments replace values as the function body's do.
    pub(super) fn eval_await(&mut self, inner: &'a Expr) -> Value {
        if let ExprKind::Async { block, .. } = &inner.kind {
            self.bodies.push(block.span);
            let v = self.eval_block(block);
            self.bodies.pop();
            return v;
        }
        let before = self.out.store_events.len();
        let mut v = self.eval(inner);
        let call = inner.peel();
        if matches!(
            call.kind,
            ExprKind::Call { .. } | ExprKind::MethodCall { .. }
        ) {
            // A store operation awaited is not an effect; a call whose arguments carry what a
            // store read earlier (`wallet.credit(CreditRequest { memo: row.name, .. })`) is.
            if !v.ops().any(|i| i >= before) {
                self.effect(inner.span);
            }
            // What an awaited call of another crate returns comes from the outside
            // world (a response, rows read back), not from the arguments it was sent.
            let crate_call = self.out.calls.last().is_some_and(|c| c.span == call.span);
            if !crate_call {
                v.facts.retain(|f| matches!(f, Fact::Op(_)));
                v.fields.clear();
            }
        }
        v
    }

    pub(super) fn eval_macro(&mut self, e: &'a Expr, m: &'a MacroCall) -> Value {
        let name = m.path.last();
        let def = self.resolve(&m.path);
        if let Some(src) = self.cx.catalog.sources.find(&def) {
            return self.source(
                e.span,
                &format!("{}!()", m.path.segments.join("::")),
                src.kind,
            );
        }
        if m.joins_futures() {
            // Each future is awaited here; the value is the tuple of their outputs.
            let mut out = Value::default();
            for (i, a) in m.args.iter().enumerate() {
                let v = self.eval_await(a);
                out.union(&v);
                out.fields.push((i.to_string(), v));
            }
            return out;
        }
        let vals = self.eval_args(&m.args);
        if matches!(name, "write" | "writeln") {
            // `write!(key, "{}", id)` writes into its first argument.
            if let Some(dest) = m.args.first() {
                self.append_to(dest, Value::joined(vals.iter().skip(1).cloned()));
            }
        }
        if FORMAT_MACROS.contains(&name) {
            let v = Value::joined(vals);
            return v.stepped(|| Step {
                span: e.span,
                note: format!("formatted into a string by `{name}!` here"),
            });
        }
        if name.starts_with("query") {
            return Value::joined(vals);
        }
        Value::default()
    }
}
