//! The walker's statements, blocks, bindings and patterns, assignments, and the
//! branches (`if`, `match`, `let .. else`) with what their conditions say.

use super::*;

/// The name a text bound to parameter pattern `pat` (or to its tuple element `part`) is
/// known by in the walk: `sql`; `queries.1` for `queries: (&str, &str)`; `insert` for
/// `(find, insert): (&str, &str)`.
pub(super) fn text_name(pat: &Pat, part: Option<&str>) -> Option<String> {
    if let Some(name) = pat.simple_name() {
        return Some(match part {
            None => name.to_owned(),
            Some(part) => format!("{name}.{part}"),
        });
    }
    let i: usize = part?.parse().ok()?;
    match peel_pat(pat) {
        Pat::Tuple(ps) => ps.get(i)?.simple_name().map(str::to_owned),
        _ => None,
    }
}

pub(super) fn peel_pat(pat: &Pat) -> &Pat {
    match pat {
        Pat::Ref(p) | Pat::Typed { pat: p, .. } => peel_pat(p),
        other => other,
    }
}

/// The text slots of parameter `index` (pattern `pat`) among the names asked for as text
/// and not known.
pub(super) fn text_params_of(index: usize, pat: &Pat, unknown: &[String]) -> Vec<TextParam> {
    let slot = |part: Option<String>| TextParam { param: index, part };
    if let Some(name) = pat.simple_name() {
        return unknown
            .iter()
            .filter_map(|u| match u.strip_prefix(name) {
                Some("") => Some(slot(None)),
                Some(rest) => {
                    let part = rest.strip_prefix('.')?;
                    part.parse::<usize>()
                        .ok()
                        .map(|_| slot(Some(part.to_owned())))
                }
                None => None,
            })
            .collect();
    }
    match peel_pat(pat) {
        Pat::Tuple(ps) => ps
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.simple_name()
                    .is_some_and(|n| unknown.iter().any(|u| u == n))
            })
            .map(|(i, _)| slot(Some(i.to_string())))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn restore<V>(map: &mut PathMap<String, V>, name: &str, old: Option<V>) {
    match old {
        Some(v) => {
            map.insert(name.to_owned(), v);
        }
        None => {
            map.remove(name);
        }
    }
}

pub(super) fn pat_span(p: &Pat) -> Option<Span> {
    match p {
        Pat::Ident { span, .. } => Some(*span),
        Pat::Typed { pat, .. } | Pat::Ref(pat) => pat_span(pat),
        _ => None,
    }
}

/// Whether a pattern matches when the store had the key: `Some(_)`, `Ok(Some(_))`, `true`.
pub(super) fn pat_presence(p: &Pat) -> Option<bool> {
    match p {
        Pat::TupleStruct { path, elems } => match path.last() {
            "Some" => Some(true),
            "Ok" => elems.first().and_then(pat_presence).or(Some(true)),
            _ => None,
        },
        Pat::Path(path) if path.last() == "None" => Some(false),
        // syn reads a bare `None` in a pattern as a binding named `None`.
        Pat::Ident {
            name, sub: None, ..
        } if name == "None" => Some(false),
        Pat::Lit(Lit::Bool(b)) => Some(*b),
        Pat::Ident { .. } | Pat::Wild => None,
        Pat::Typed { pat, .. } | Pat::Ref(pat) => pat_presence(pat),
        _ => None,
    }
}

/// Helper and variable names that are true when the key is new: `is_new`, `first_time`.
pub(super) fn negative_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "new",
        "first",
        "missing",
        "absent",
        "unseen",
        "not_",
        "fresh",
        "available",
    ]
    .iter()
    .any(|w| n.contains(w))
}

impl<'a> Walker<'a, '_> {
    // ------------------------------------------------------------ bindings and scopes

    pub(super) fn save(&mut self, name: &str) {
        let scope = self.scopes.last_mut().expect("a scope is open");
        if scope.iter().any(|(n, ..)| n == name) {
            return;
        }
        scope.push((
            name.to_owned(),
            self.vals.get(name).cloned(),
            self.descs.get(name).cloned(),
            self.strs.get(name).cloned(),
            self.bound_at.get(name).copied(),
        ));
    }

    pub(super) fn bind_name(
        &mut self,
        name: &str,
        v: Value,
        desc: Option<DescSrc<'a>>,
        s: Option<String>,
    ) {
        self.save(name);
        self.vals.insert(name.to_owned(), v);
        self.bound_at.insert(name.to_owned(), self.branch_depth);
        match desc {
            Some(d) => self.descs.insert(name.to_owned(), d),
            None => self.descs.remove(name),
        };
        match s {
            Some(s) => self.strs.insert(name.to_owned(), s),
            None => self.strs.remove(name),
        };
        if self.part_texts {
            // `queries.1` was the parameter's element; this `queries` is another value.
            self.strs.retain(|k, _| {
                k.strip_prefix(name)
                    .is_none_or(|rest| !rest.starts_with('.'))
            });
        }
    }

    /// Binds every name of `pat` ([`bind_pattern`]) to its part of `v`: its description and
    /// text follow the parts that keep them (the one field of `Some(x)`, a named field, a
    /// tuple element; only a tuple's first element keeps a text, sea-query's `(sql, values)`).
    pub(super) fn bind_pat(
        &mut self,
        pat: &'a Pat,
        v: Value,
        desc: Option<DescSrc<'a>>,
        s: Option<String>,
    ) {
        let mut names = Vec::new();
        bind_pattern(pat, &mut |b, trail| names.push((b, trail.to_vec())));
        let whole = match &desc {
            Some(DescSrc::Expr(e)) => Some(*e),
            _ => None,
        };
        for (b, trail) in names {
            let (mut v, mut desc, mut s) = (v.clone(), desc.clone(), s.clone());
            // A pattern in the shape of its expression (`let (key, _) = (format!(..), 60)`)
            // binds each name to its own part: the same key as `let key = format!(..)`.
            let part = whole
                .filter(|_| takes_parts(&trail))
                .and_then(|e| part_of(e, &trail));
            if let Some(part) = part {
                v = self.value_of_part(v, &trail);
                // As for `let mut q = Query::insert()..;`: a builder changed later is not
                // the statement run.
                let text = if b.mutable
                    && super::super::query_builders::sea_query_sql(self, part).is_some()
                {
                    None
                } else {
                    self.string_of(part)
                };
                self.bind_part(b, v, Some(DescSrc::Expr(part)), text);
                continue;
            }
            for hop in trail {
                match hop {
                    Hop::Typed(_) | Hop::Deref => {}
                    Hop::Unwrap(_) | Hop::Alt => s = None,
                    Hop::Sub => (desc, s) = (None, None),
                    Hop::Elem(i) => {
                        let part = i.to_string();
                        desc = self.part_desc(desc.as_ref(), &part);
                        v = v.field(&part);
                        if i != 0 {
                            s = None;
                        }
                    }
                    Hop::Variant(_, i) => {
                        v = v.field(&i.to_string());
                        (desc, s) = (None, None);
                    }
                    Hop::Field(_, name) => {
                        desc = self.part_desc(desc.as_ref(), name);
                        v = v.field(name);
                        s = None;
                    }
                }
            }
            self.bind_part(b, v, desc, s);
        }
    }

    /// The value of the part of `v` the hops take.
    pub(super) fn value_of_part(&self, mut v: Value, trail: &[Hop<'_>]) -> Value {
        for hop in trail {
            match *hop {
                Hop::Elem(i) | Hop::Variant(_, i) => v = v.field(&i.to_string()),
                Hop::Field(_, name) => v = v.field(name),
                _ => {}
            }
        }
        v
    }

    pub(super) fn bind_part(
        &mut self,
        b: Binding<'a>,
        v: Value,
        desc: Option<DescSrc<'a>>,
        s: Option<String>,
    ) {
        if self.cx.catalog.sinks.is_key_name(b.name) {
            self.key_use(
                SinkKind::KeyName(b.name.to_owned()),
                b.span,
                v.clone(),
                None,
            );
        }
        self.bind_name(b.name, v, desc, s);
    }

    /// The description of field `part` of a destructured value.
    pub(super) fn part_desc(&self, whole: Option<&DescSrc<'a>>, part: &str) -> Option<DescSrc<'a>> {
        let d = match whole? {
            DescSrc::Desc(d) => d.clone(),
            DescSrc::Expr(e) => self.describe(e)?,
        };
        Some(DescSrc::Desc(KeyDesc::root(format!("{}.{part}", d.text))))
    }

    /// The body a `return` here leaves.
    pub(super) fn body_or(&self, fallback: Span) -> Span {
        self.bodies.last().copied().unwrap_or(fallback)
    }

    pub(super) fn enter_block(&mut self, span: Span) {
        self.scopes.push(Vec::new());
        self.blocks.push(span);
    }

    pub(super) fn exit_block(&mut self) {
        self.blocks.pop();
        if let Some(saved) = self.scopes.pop() {
            for (name, v, d, s, at) in saved.into_iter().rev() {
                restore(&mut self.vals, &name, v);
                restore(&mut self.bound_at, &name, at);
                restore(&mut self.descs, &name, d);
                restore(&mut self.strs, &name, s);
            }
        }
    }

    /// `x = v`: replaces `x` outside branches and in the branch that bound it, adds to it
    /// inside a branch below that.
    pub(super) fn assign(&mut self, lhs: &'a Expr, v: Value) {
        match &lhs.peel().kind {
            ExprKind::Path(p) => {
                if let Some(name) = p.as_ident() {
                    if self.cx.catalog.sinks.is_key_name(name) {
                        self.key_use(
                            SinkKind::KeyName(name.to_owned()),
                            lhs.span,
                            v.clone(),
                            None,
                        );
                    }
                    let own_branch = self.bound_at.get(name) == Some(&self.branch_depth);
                    if self.branch_depth == 0 || own_branch {
                        self.vals.insert(name.to_owned(), v);
                        self.descs.remove(name);
                    } else {
                        self.vals.entry(name.to_owned()).or_default().union(&v);
                    }
                }
            }
            ExprKind::Field { base, member } => {
                if self.cx.catalog.sinks.is_key_name(member) {
                    self.key_use(SinkKind::KeyName(member.clone()), lhs.span, v.clone(), None);
                }
                if let Some(name) = base.as_path().and_then(Path::as_ident) {
                    let entry = self.vals.entry(name.to_owned()).or_default();
                    entry.union(&v);
                    match entry.fields.iter_mut().find(|(n, _)| n == member) {
                        Some((_, fv)) => fv.union(&v),
                        None => entry.fields.push((member.clone(), v)),
                    }
                }
            }
            ExprKind::Index { base, .. } => self.assign(base, v),
            _ => {}
        }
    }

    /// Adds `v` to the local a receiver expression names (`key`, `&mut key`, `self.key`).
    pub(super) fn append_to(&mut self, dest: &'a Expr, v: Value) {
        if v.is_empty() {
            return;
        }
        let keep = self.branch_depth;
        self.branch_depth += 1;
        self.assign(dest, v);
        self.branch_depth = keep;
    }

    // ------------------------------------------------------------ statements and blocks

    pub(super) fn eval_block(&mut self, b: &'a Block) -> Value {
        self.enter_block(b.span);
        let mut last = Value::default();
        for (i, stmt) in b.stmts.iter().enumerate() {
            let is_tail = i + 1 == b.stmts.len();
            match stmt {
                Stmt::Let {
                    pat,
                    init,
                    diverge,
                    span,
                } => self.eval_let(pat, init.as_ref(), diverge.as_deref(), *span),
                Stmt::Expr { expr, semi } => {
                    let v = self.eval(expr);
                    if *semi {
                        self.statement_effect(expr);
                    } else if is_tail {
                        last = v;
                    }
                }
                Stmt::Item { .. } => {}
            }
        }
        self.exit_block();
        last
    }

    pub(super) fn eval_let(
        &mut self,
        pat: &'a Pat,
        init: Option<&'a Expr>,
        diverge: Option<&'a Block>,
        span: Span,
    ) {
        let Some(init) = init else {
            if let Some(name) = pat.simple_name() {
                self.bind_name(name, Value::default(), None, None);
            }
            return;
        };
        let mut v = self.eval(init);
        if let Some(block) = diverge {
            self.let_else_decision(pat, &v, init, block);
        }
        let desc = Some(DescSrc::Expr(init));
        let mut s = self.string_of(init);
        // `let mut q = Query::insert()..;` may be changed later (`q.on_conflict(..);`): the
        // statement built so far is not the one run.
        if matches!(pat, Pat::Ident { mutable: true, .. })
            && super::super::query_builders::sea_query_sql(self, init).is_some()
        {
            s = None;
        }
        if let Some(name) = pat.simple_name() {
            let direct = v
                .nondet()
                .all(|(src, trail)| trail.is_empty() && span.contains(src.span));
            if !direct {
                let pspan = pat_span(pat).unwrap_or(span);
                v = v.stepped(|| Step {
                    span: pspan,
                    note: format!("assigned to `{name}` here"),
                });
            }
        }
        self.types.bind_let(pat, Some(init));
        self.bind_pat(pat, v, desc, s);
    }

    /// `let Some(x) = read else { return }`: diverges when the pattern fails.
    pub(super) fn let_else_decision(
        &mut self,
        pat: &Pat,
        v: &Value,
        init: &Expr,
        block: &'a Block,
    ) {
        if v.ops().next().is_none() {
            return;
        }
        let ops: Vec<usize> = v.ops().collect();
        self.mark_checked(v);
        self.branch_depth += 1;
        self.eval_block(block);
        self.branch_depth -= 1;
        let when_present = pat_presence(pat).map(|p| !p);
        self.out.decisions.push(Decision {
            span: init.span,
            ops,
            branches: vec![Branch {
                span: block.span,
                diverges: true,
                returns: returns(block),
                when_present,
            }],
            block: self.blocks.last().copied().unwrap_or(block.span),
            body: self.body_or(block.span),
        });
    }

    /// Calls made as statements, for their effect.
    pub(super) fn statement_effect(&mut self, expr: &Expr) {
        let e = expr.peel();
        match &e.kind {
            ExprKind::Call { .. } => self.effect(e.span),
            ExprKind::MethodCall { method, .. }
                if !LOCAL_MUTATIONS.contains(&method.as_str())
                    && !CONVERSIONS.contains(&method.as_str()) =>
            {
                self.effect(e.span)
            }
            _ => {}
        }
    }

    pub(super) fn eval_if(
        &mut self,
        cond: &'a Expr,
        then: &'a Block,
        els: Option<&'a Expr>,
    ) -> Value {
        let cv = self.eval(cond);
        let ops: Vec<usize> = cv.ops().collect();
        self.branch_depth += 1;
        let tv = self.eval_block(then);
        let ev = els.map(|e| self.eval(e)).unwrap_or_default();
        self.branch_depth -= 1;
        if !ops.is_empty() {
            self.mark_checked(&cv);
            let polarity = self.presence(cond);
            let mut branches = vec![Branch {
                span: then.span,
                diverges: diverges(then),
                returns: returns(then),
                when_present: polarity,
            }];
            if let Some(e) = els {
                let block = match &e.kind {
                    ExprKind::Block(b) => Some(b),
                    _ => None,
                };
                branches.push(Branch {
                    span: e.span,
                    diverges: block.is_some_and(diverges),
                    returns: block.is_some_and(returns),
                    when_present: polarity.map(|p| !p),
                });
            }
            self.out.decisions.push(Decision {
                span: cond.span,
                ops,
                branches,
                block: self.blocks.last().copied().unwrap_or(cond.span),
                body: self.body_or(cond.span),
            });
        }
        // The value an `if` on a read yields tells whether the key was there (`if let
        // Some(b) = read { Some(parse(b)) } else { None }`), whatever the branches compute.
        Value::joined([tv, ev, cv.only_ops()])
    }

    pub(super) fn eval_match(
        &mut self,
        scrutinee: &'a Expr,
        arms: &'a [crate::model::ir::Arm],
    ) -> Value {
        let sv = self.eval(scrutinee);
        let sd = Some(DescSrc::Expr(scrutinee));
        let ops: Vec<usize> = sv.ops().collect();
        let mut out = Value::default();
        let mut branches = Vec::new();
        self.branch_depth += 1;
        for arm in arms {
            self.enter_block(arm.body.span);
            self.types.bind_tested(&arm.pat, scrutinee);
            self.bind_pat(&arm.pat, sv.clone(), sd.clone(), None);
            if let Some(g) = &arm.guard {
                self.eval(g);
            }
            let v = self.eval(&arm.body);
            self.exit_block();
            out.union(&v);
            branches.push(Branch {
                span: arm.body.span,
                diverges: expr_diverges(&arm.body),
                returns: expr_leaves(&arm.body, Leaves::Body),
                // `match !done { true => .. }`: a bool pattern takes the scrutinee's polarity.
                when_present: match &arm.pat {
                    Pat::Lit(Lit::Bool(b)) => {
                        self.presence(scrutinee).map(|p| p == *b).or(Some(*b))
                    }
                    pat => pat_presence(pat),
                },
            });
        }
        self.branch_depth -= 1;
        // As for `if`: the arm taken tells whether the key was there.
        out.union(&sv.only_ops());
        if !ops.is_empty() {
            self.mark_checked(&sv);
            self.out.decisions.push(Decision {
                span: scrutinee.span,
                ops,
                branches,
                block: self.blocks.last().copied().unwrap_or(scrutinee.span),
                body: self.body_or(scrutinee.span),
            });
        }
        out
    }

    /// Whether `cond` is true when the store had the key.
    pub(super) fn presence(&self, cond: &Expr) -> Option<bool> {
        self.presence_at(cond, 0)
    }

    pub(super) fn presence_at(&self, cond: &Expr, depth: usize) -> Option<bool> {
        if depth > MAX_DESC_DEPTH {
            return None;
        }
        let d = depth + 1;
        match &cond.kind {
            ExprKind::Unary { not: true, expr } => self.presence_at(expr, d).map(|p| !p),
            ExprKind::Let { pat, .. } => pat_presence(pat),
            // `if other || seen { return }`: the branch runs whenever the key was there, so
            // what follows runs only when it was not.
            ExprKind::Binary {
                op: BinOp::Or,
                lhs,
                rhs,
            } => match (self.presence_at(lhs, d), self.presence_at(rhs, d)) {
                (Some(true), other) | (other, Some(true)) if other != Some(false) => Some(true),
                _ => None,
            },
            // `count > 0` and `count == 0` are folded into one comparison operator by the IR,
            // so a comparison claims no polarity.
            ExprKind::Binary { .. } => None,
            ExprKind::MethodCall {
                receiver, method, ..
            } => match method.as_str() {
                "is_some" | "is_ok" => Some(true),
                "is_none" | "is_empty" => Some(false),
                "unwrap_or" | "unwrap_or_default" | "unwrap" | "expect" => {
                    self.presence_at(receiver, d)
                }
                m => Some(!negative_name(m)),
            },
            // `let skip = !conn.exists(&k).await?; if skip {..}`: a local holding a negated
            // or combined check has that check's polarity, not its name's.
            ExprKind::Path(p) => match p.as_ident().and_then(|n| self.local_init(n)) {
                Some(
                    init @ Expr {
                        kind:
                            ExprKind::Unary { not: true, .. } | ExprKind::Binary { op: BinOp::Or, .. },
                        ..
                    },
                ) => self.presence_at(init, d),
                _ => Some(!negative_name(p.last())),
            },
            ExprKind::Call { func, .. } => Some(!negative_name(func.as_path()?.last())),
            ExprKind::Try(e) | ExprKind::Await(e) => self.presence_at(e, d),
            ExprKind::Match { scrutinee, arms } if is_try_match(arms) => {
                self.presence_at(scrutinee, d)
            }
            _ => None,
        }
    }
}
