//! The walker's calls: fns and methods of the crate, store operations, key sinks,
//! effects and the markers a write records.

use super::*;

/// Whether a repeat of the write fails with an error (a conditional DynamoDB write, a
/// key-only insert), so that `?` on it stops a second delivery.
pub(super) fn fails_out(a: &StoreAccess) -> bool {
    a.access == Access::Claim && a.shape.fails_when_taken || a.shape.key_only
}

impl<'a> Walker<'a, '_> {
    // ------------------------------------------------------------ recording

    pub(super) fn key_use(
        &mut self,
        sink: SinkKind,
        span: Span,
        value: Value,
        via: Option<(FnId, Span)>,
    ) {
        if value.nondet().next().is_some() || value.params().next().is_some() {
            self.out.key_uses.push(KeyUse {
                sink,
                span,
                value,
                via,
            });
        }
    }

    pub(super) fn event(&mut self, access: StoreAccess, span: Span, via: Option<FnId>) -> usize {
        self.out.store_events.push(StoreEvent {
            access,
            span,
            via,
            checked: false,
            tried: false,
        });
        self.out.store_events.len() - 1
    }

    pub(super) fn mark_checked(&mut self, v: &Value) {
        for i in v.ops().collect::<Vec<_>>() {
            self.out.store_events[i].checked = true;
        }
    }

    pub(super) fn effect(&mut self, span: Span) {
        self.out.effects.push(Effect { span });
    }

    pub(super) fn eval_call(&mut self, e: &'a Expr, func: &'a Expr, args: &'a [Expr]) -> Value {
        let Some(path) = func.as_path() else {
            let mut v = self.eval(func);
            for a in self.eval_args(args) {
                v.union(&a);
            }
            return v;
        };
        let arg_vals = self.eval_args(args);
        if let Some(name) = path.as_ident() {
            if let Some(closure) = self.vals.get(name) {
                let mut v = closure.clone();
                v.fields.clear();
                return v;
            }
        }
        let def = self.resolve(path);
        if let Some(src) = self.cx.catalog.sources.find(&def) {
            return self.source(e.span, &format!("{}()", path.segments.join("::")), src.kind);
        }
        if let (Some(strategy), [key]) = (self.cx.catalog.sinks.keyed_strategy(&def), args) {
            self.key_use(
                SinkKind::TokenSetter(strategy),
                key.span,
                arg_vals[0].clone(),
                None,
            );
        }
        if let Some(op) = self.named_op(e, None, path.last(), args) {
            return self.store_op(op);
        }
        if self.callee(e).is_some() {
            return self.apply_all(e, None, args, arg_vals);
        }
        // A tuple struct or variant keeps its fields apart; `Some`/`Ok`/wrappers pass through.
        let mut out = Value::joined(arg_vals.iter().cloned());
        if path.last().starts_with(char::is_uppercase) && arg_vals.len() > 1 {
            out.fields = arg_vals
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect();
        }
        out
    }

    /// A check or mark known by name (`dedupe.is_processed(&id)`) whose body is not
    /// visible: no crate fn, or a trait method without a default body.
    pub(super) fn named_op(
        &self,
        e: &'a Expr,
        receiver: Option<&'a Expr>,
        name: &str,
        args: &'a [Expr],
    ) -> Option<StoreOp<'a>> {
        let names = &self.cx.catalog.store_names;
        names.find(name)?;
        let visible = self
            .callee(e)
            .is_some_and(|id| id.def(self.cx.package).1.body.is_some());
        if visible {
            return None;
        }
        store_ops::named_op(self, names, receiver, name, args, e.span)
    }

    /// The crate fn the call `e` runs, from the call graph.
    pub(super) fn callee(&self, e: &Expr) -> Option<FnId> {
        self.cx
            .graph
            .call_at(self.id, e.span)
            .filter(|c| c.kind != CallKind::Value)
            .map(|c| c.callee)
    }

    pub(super) fn eval_method(
        &mut self,
        e: &'a Expr,
        receiver: &'a Expr,
        method: &'a str,
        method_span: Span,
        args: &'a [Expr],
    ) -> Value {
        let rv = self.eval(receiver);
        let saved = self.closure_arg.replace(rv.clone());
        let arg_vals = self.eval_args(args);
        self.closure_arg = saved;
        if let Some(op) = store_ops::classify(self, e) {
            return self.store_op(op);
        }
        // A source method on a typed receiver: `generator.generate()` of a `ulid::Generator`.
        if let Some(ty) = self.types.type_of(receiver).filter(|t| !t.is_local()) {
            if let Some(src) = self.cx.catalog.sources.find(&ty.child(method)) {
                return self.source(e.span, &format!("{}::{method}()", ty.last()), src.kind);
            }
        }
        self.method_sinks(receiver, method, method_span, args, &arg_vals);
        if APPENDERS.contains(&method) {
            // `key.push_str(&id)`: the receiver now holds the argument too.
            self.append_to(receiver, Value::joined(arg_vals.iter().cloned()));
        }
        if let Some(op) = self.named_op(e, Some(receiver), method, args) {
            return self.store_op(op);
        }
        if self.callee(e).is_some() {
            return self.apply_all(e, Some(rv), args, arg_vals);
        }
        let mut out = rv;
        out.fields.clear();
        if FALLBACK_METHODS.contains(&method) {
            // `given.unwrap_or_else(|| Uuid::new_v4())`: a default for a missing value is
            // deliberate; only what the receiver carries flows as the value.
            for a in &arg_vals {
                let mut a = a.clone();
                a.facts.retain(|f| !matches!(f, Fact::Nondet { .. }));
                out.union(&a);
            }
        } else if !LOOKUP_METHODS.contains(&method) && !method.starts_with("is_") {
            for a in &arg_vals {
                out.union(a);
            }
        }
        out
    }

    /// Token setters, `Idempotency-Key` headers and key-named builder setters.
    pub(super) fn method_sinks(
        &mut self,
        receiver: &'a Expr,
        method: &str,
        method_span: Span,
        args: &'a [Expr],
        vals: &[Value],
    ) {
        let sinks = &self.cx.catalog.sinks;
        if args.len() == 1 {
            if let Some(token) = sinks.token_setter(method) {
                self.key_use(
                    SinkKind::TokenSetter(token.to_owned()),
                    args[0].span,
                    vals[0].clone(),
                    None,
                );
                return;
            }
            if sinks.is_step_functions_name(method, &receiver.method_chain()) {
                self.key_use(
                    SinkKind::TokenSetter("name".to_owned()),
                    args[0].span,
                    vals[0].clone(),
                    None,
                );
                return;
            }
            if sinks.is_key_name(method) {
                self.key_use(
                    SinkKind::KeyName(method.to_owned()),
                    method_span.to(args[0].span),
                    vals[0].clone(),
                    None,
                );
                return;
            }
        }
        if args.len() == 2 && matches!(method, "header" | "insert" | "append") {
            if let Some(h) = self.header_name(&args[0]) {
                if sinks.is_idempotency_header(&h) {
                    self.key_use(SinkKind::Header(h), args[1].span, vals[1].clone(), None);
                }
            }
        }
    }

    /// Element `part` of a tuple argument: `(FIND, INSERT)` written at the call, or a local
    /// bound to one.
    pub(super) fn tuple_element(&self, arg: &'a Expr, part: &str) -> Option<&'a Expr> {
        let i: usize = part.parse().ok()?;
        let e = arg.peel();
        let tuple = match e.as_path().and_then(Path::as_ident) {
            Some(local) => self.local_init(local)?.peel(),
            None => e,
        };
        match &tuple.kind {
            ExprKind::Tuple(elems) => elems.get(i),
            _ => None,
        }
    }

    /// `"Idempotency-Key"`, `HeaderName::from_static("idempotency-key")`, a local bound to
    /// either.
    pub(super) fn header_name(&self, e: &Expr) -> Option<String> {
        if let Some(s) = self.string_of(e) {
            return Some(s);
        }
        match &e.peel().kind {
            ExprKind::Call { func, args } if args.len() == 1 => {
                let p = func.as_path()?;
                matches!(p.last(), "from_static" | "from_str" | "from_bytes")
                    .then(|| self.string_of(&args[0]))
                    .flatten()
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } if matches!(method.as_str(), "parse" | "try_into" | "into") => {
                self.header_name(receiver)
            }
            _ => None,
        }
    }

    /// Uses a callee's summary at a call site.
    /// Applies the summary of every crate fn call `e` may run (each production implementation
    /// of a trait method): the value it returns is any of theirs.
    pub(super) fn apply_all(
        &mut self,
        e: &'a Expr,
        receiver: Option<Value>,
        args: &'a [Expr],
        arg_vals: Vec<Value>,
    ) -> Value {
        let graph = self.cx.graph;
        let ids: Vec<FnId> = graph
            .calls_at(self.id, e.span)
            .iter()
            .filter(|c| c.kind != CallKind::Value)
            .map(|c| c.callee)
            .collect();
        let Some((&last, rest)) = ids.split_last() else {
            return Value::default();
        };
        let mut out = Value::default();
        for &id in rest {
            out.union(&self.apply(id, e, receiver.clone(), args, arg_vals.clone()));
        }
        let v = self.apply(last, e, receiver, args, arg_vals);
        if rest.is_empty() {
            return v;
        }
        out.union(&v);
        out
    }

    pub(super) fn apply(
        &mut self,
        id: FnId,
        call: &'a Expr,
        receiver: Option<Value>,
        args: &'a [Expr],
        arg_vals: Vec<Value>,
    ) -> Value {
        self.out.calls.push(CallSite {
            callee: id,
            span: call.span,
        });
        let mut s = self.callees.summary(id);
        let (_, callee) = id.def(self.cx.package);
        let name = callee.display_name();
        // Arguments in parameter order; for `Type::method(x, ..)` called as a path with a
        // receiver argument, the first argument is `self`.
        let shift =
            usize::from(receiver.is_none() && callee.self_kind != crate::model::SelfKind::None);
        let param_arg = |i: usize| i + shift;
        // A helper given its SQL text as an argument: walked again with that text, so its
        // store operations are known at this call.
        if !s.text_params.is_empty() {
            let texts: Vec<TextArg> = s
                .text_params
                .iter()
                .filter_map(|slot| {
                    let arg = args.get(param_arg(slot.param))?;
                    let text = match &slot.part {
                        None => self.string_of(arg)?,
                        Some(part) => self.string_of(self.tuple_element(arg, part)?)?,
                    };
                    crate::analysis::sql::looks_like_sql(&text).then(|| TextArg {
                        slot: slot.clone(),
                        text,
                    })
                })
                .collect();
            if !texts.is_empty() {
                if self.rewalk_depth < 2 {
                    let flow = walk_bound(self.cx, id, self.callees, &texts, self.rewalk_depth + 1);
                    s = Arc::new(FnSummary::from_flow(&flow));
                }
                let call = TextCall { callee: id, texts };
                if !self.out.text_calls.contains(&call) {
                    self.out.text_calls.push(call);
                }
            }
        }
        let mut out = Value::default();
        for (src, trail) in &s.ret_nondet {
            out.add(Fact::Nondet {
                source: src.clone(),
                trail: trail.push(Step {
                    span: call.span,
                    note: format!("returned by `{name}`"),
                }),
            });
        }
        for (p, field) in &s.ret_params {
            if let Some(v) = arg_vals.get(param_arg(*p)) {
                out.union(&narrow(v, field.as_deref()));
            }
        }
        for ps in &s.param_sinks {
            let i = param_arg(ps.param);
            if let (Some(v), Some(a)) = (arg_vals.get(i), args.get(i)) {
                let v = narrow(v, ps.field.as_deref());
                self.key_use(ps.sink.clone(), a.span, v, Some((id, ps.span)));
            }
        }
        if !s.accesses.is_empty() || s.ret_access.is_some() {
            let descs: Vec<Option<KeyDesc>> = (0..callee.params.len())
                .map(|p| args.get(param_arg(p)).and_then(|a| self.describe(a)))
                .collect();
            for a in &s.accesses {
                let tried = s.tried.contains(a);
                let a = a.clone().instantiate(&descs);
                let i = self.event(a, call.span, Some(id));
                // The helper's error is this write's: the call's own `?` tests it.
                if tried {
                    out.add(Fact::Op(i));
                }
            }
            if let Some(a) = &s.ret_access {
                let a = a.clone().instantiate(&descs);
                let i = self.event(a, call.span, Some(id));
                out.add(Fact::Op(i));
            }
        }
        if s.has_effects {
            self.effect(call.span);
        }
        out
    }

    pub(super) fn store_op(&mut self, op: StoreOp<'a>) -> Value {
        let key_vals: Vec<Value> = op.keys.iter().map(|k| self.eval_quiet(k)).collect();
        let key = match op.keys.as_slice() {
            [one] => self.describe(one),
            [] => None,
            many => {
                let parts: Option<Vec<KeyDesc>> = many.iter().map(|k| self.describe(k)).collect();
                parts.map(|p| KeyDesc::combine("key", &p))
            }
        };
        let guard_key = op.keys_certain
            && (op.access == Access::Claim || op.dedupe_table && op.access.is_write());
        if guard_key {
            for (k, v) in op.keys.iter().zip(key_vals) {
                self.key_use(SinkKind::GuardKey(op.command.clone()), k.span, v, None);
            }
        }
        // One rule for every store: a write marks when what it stores records that the
        // work happened: markers (a literal, a status, a timestamp, the message's id), with
        // who or where beside them (the account, the worker's host), in any shape (a
        // document, a list). A value the function computed or was handed as data (a
        // rendered page, a user) with no marker makes it a cache or a business write.
        let kinds: Vec<Option<bool>> = op.values.iter().map(|v| self.record(v, 0)).collect();
        let value_is_marker =
            kinds.iter().all(Option::is_some) && (kinds.is_empty() || kinds.contains(&Some(true)));
        let columns = op
            .columns
            .iter()
            .map(|(c, v)| (c.clone(), v.and_then(|v| self.describe(v))))
            .collect();
        let access = StoreAccess {
            columns,
            store: op.store,
            access: op.access,
            command: op.command,
            table: op.table,
            key,
            key_span: op.keys.first().map(|k| k.span),
            value_is_marker,
            locking: op.locking,
            dedupe_table: op.dedupe_table,
            shape: op.shape,
            span: op.span,
        };
        let i = self.event(access, op.span, None);
        Value::fact(Fact::Op(i))
    }

    /// A value that only marks presence: a literal, `true`, a constant, a timestamp, a
    /// status string. Writing one is a marker write; writing computed data is caching.
    pub(super) fn is_marker(&self, e: &Expr) -> bool {
        match &e.peel().kind {
            ExprKind::Lit(_) | ExprKind::Tuple(_) => true,
            ExprKind::Path(p) => {
                p.segments.len() > 1 || p.last().chars().all(|c| !c.is_lowercase())
            }
            ExprKind::Call { func, args } => {
                let Some(path) = func.as_path() else {
                    return false;
                };
                let clock = self
                    .cx
                    .catalog
                    .sources
                    .find(&self.resolve(path))
                    .is_some_and(|s| s.kind == SourceKind::Clock);
                clock
                    || MARKER_WRAPPERS.contains(&path.last())
                        && args.iter().all(|a| self.is_marker(a))
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } => {
                CONVERSIONS.contains(&method.as_str()) && self.is_marker(receiver)
                    || matches!(
                        method.as_str(),
                        "timestamp" | "timestamp_millis" | "to_rfc3339"
                    )
            }
            ExprKind::Macro(m) => {
                m.path.last() == "format" && m.args.iter().all(|a| self.is_marker(a))
            }
            _ => false,
        }
    }

    /// What a value a write stores is: `Some(true)` a marker (a literal, a constant, a
    /// timestamp, a status, the message's id: `order.id`), `Some(false)` who or where (a
    /// parameter, `self`, an environment variable), `None` a computed result; a document,
    /// collection or slice (`doc! { "at": now, "by": &host }`, `&b"done"[..]`) is what its
    /// parts are.
    pub(super) fn record(&self, e: &Expr, depth: usize) -> Option<bool> {
        if self.is_marker(e) || store_ops::is_key_like(e) {
            return Some(true);
        }
        let parts: Vec<&Expr> = match &e.peel().kind {
            _ if depth >= 4 => Vec::new(),
            // A document's field names are not what it stores.
            ExprKind::Macro(m) if m.parsed && DOC_MACROS.contains(&m.path.last()) => {
                m.args.iter().skip(1).step_by(2).collect()
            }
            ExprKind::Macro(m) if m.parsed => m.args.iter().collect(),
            ExprKind::Array(items) => items.iter().collect(),
            ExprKind::Index { base, .. } => vec![&**base],
            // `let update = doc! { .. }; ..replace_one(filter, update, None)`.
            ExprKind::Path(p) => p
                .as_ident()
                .and_then(|n| self.local_init(n))
                .into_iter()
                .collect(),
            ExprKind::Struct {
                fields, rest: None, ..
            } => fields.iter().map(|(_, v)| v).collect(),
            // `AttributeValue::S(order.id.clone())`, `order.id.to_string()`.
            ExprKind::Call { func, args }
                if func
                    .as_path()
                    .is_some_and(|p| MARKER_WRAPPERS.contains(&p.last())) =>
            {
                args.iter().collect()
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } if CONVERSIONS.contains(&method.as_str()) => vec![&**receiver],
            _ => Vec::new(),
        };
        if !parts.is_empty() {
            let kinds: Option<Vec<bool>> =
                parts.iter().map(|p| self.record(p, depth + 1)).collect();
            if let Some(kinds) = kinds {
                return Some(kinds.contains(&true));
            }
        }
        self.is_context(e, 0).then_some(false)
    }

    /// A value that says who or where rather than what was computed: a parameter, `self` or
    /// one of their fields, a local bound to one, an environment variable (not a local bound
    /// to a call's result).
    pub(super) fn is_context(&self, e: &Expr, depth: usize) -> bool {
        match &e.peel().kind {
            ExprKind::Lit(_) => true,
            ExprKind::Path(p) => match p.as_ident() {
                Some(name) => match self.local_init(name) {
                    Some(init) => depth < 4 && self.is_context(init, depth + 1),
                    None => name == "self" || self.vals.get(name).is_some_and(is_param_value),
                },
                None => true,
            },
            ExprKind::Field { base, .. } => self.is_context(base, depth),
            ExprKind::MethodCall {
                receiver, method, ..
            } => CONVERSIONS.contains(&method.as_str()) && self.is_context(receiver, depth),
            ExprKind::Call { func, args } => func.as_path().is_some_and(|path| {
                let def = self.resolve(path);
                ENV_READS.iter().any(|r| def.matches(r))
                    || MARKER_WRAPPERS.contains(&path.last())
                        && args.iter().all(|a| self.is_context(a, depth))
            }),
            ExprKind::Macro(m) => {
                m.path.last() == "format" && m.args.iter().all(|a| self.is_context(a, depth))
            }
            _ => false,
        }
    }
}
