//! Lowering bodies: blocks, statements, patterns and expressions.

use super::*;

pub(super) fn str_lit(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(str_value(s)),
        _ => None,
    }
}

/// `s.value()`, without syn's character-by-character unescaping when the literal is a plain
/// `"..."` with nothing to unescape (doc comments, most messages and keys).
pub(super) fn str_value(s: &syn::LitStr) -> String {
    let repr = s.token().to_string();
    if let Some(body) = repr.strip_prefix('"') {
        // Up to the closing quote, unless an escape or a `\r\n` (read as `\n`) comes first.
        if let Some(end) = body.find(['"', '\\', '\r']) {
            if body.as_bytes()[end] == b'"' {
                return body[..end].to_owned();
            }
        }
    }
    s.value()
}

/// `a op b` of two integer literals, when it is `+`, `-`, `*` or `/` and does not
/// overflow.
pub(super) fn fold_int(op: &syn::BinOp, lhs: &Expr, rhs: &Expr) -> Option<u64> {
    let int = |e: &Expr| match &e.kind {
        ExprKind::Lit(Lit::Int(digits)) => digits.parse::<u64>().ok(),
        _ => None,
    };
    let (a, b) = (int(lhs)?, int(rhs)?);
    match op {
        syn::BinOp::Add(_) => a.checked_add(b),
        syn::BinOp::Sub(_) => a.checked_sub(b),
        syn::BinOp::Mul(_) => a.checked_mul(b),
        syn::BinOp::Div(_) => a.checked_div(b),
        _ => None,
    }
}

pub(super) fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::And(_) => BinOp::And,
        B::Or(_) => BinOp::Or,
        B::Eq(_) | B::Ne(_) | B::Lt(_) | B::Le(_) | B::Gt(_) | B::Ge(_) => BinOp::Compare,
        B::Add(_) => BinOp::Arith(ArithOp::Add),
        B::Sub(_) => BinOp::Arith(ArithOp::Sub),
        B::Mul(_) => BinOp::Arith(ArithOp::Mul),
        B::Div(_) => BinOp::Arith(ArithOp::Div),
        B::Rem(_) | B::BitXor(_) | B::BitAnd(_) | B::BitOr(_) | B::Shl(_) | B::Shr(_) => {
            BinOp::Arith(ArithOp::Other)
        }
        _ => return None,
    })
}

pub(super) fn lit(l: &syn::Lit) -> Lit {
    match l {
        syn::Lit::Str(s) => Lit::Str(str_value(s)),
        syn::Lit::Int(i) => Lit::Int(i.base10_digits().to_owned()),
        syn::Lit::Float(f) => Lit::Float(f.base10_digits().to_owned()),
        syn::Lit::Bool(b) => Lit::Bool(b.value),
        syn::Lit::Char(c) => Lit::Char(c.value()),
        _ => Lit::Other,
    }
}

pub(super) fn member_name(m: &syn::Member) -> String {
    match m {
        syn::Member::Named(id) => unraw(id),
        syn::Member::Unnamed(i) => i.index.to_string(),
    }
}

/// The future an `.await` waits on, through `tracing`'s adapters (`.instrument(span)`,
/// `.in_current_span()`): they change how it is traced, not what it does.
pub(super) fn traced_future(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::MethodCall(m)
            if (m.method == "instrument" && m.args.len() == 1)
                || (m.method == "in_current_span" && m.args.is_empty()) =>
        {
            traced_future(&m.receiver)
        }
        _ => e,
    }
}

impl Lowerer<'_> {
    pub(super) fn pat(&mut self, p: &syn::Pat) -> Pat {
        self.pat_at(p, 0)
    }

    pub(super) fn pat_at(&mut self, p: &syn::Pat, depth: usize) -> Pat {
        if depth >= MAX_DEPTH {
            return Pat::Other;
        }
        let d = depth + 1;
        match p {
            syn::Pat::Ident(pi) => Pat::Ident {
                name: unraw(&pi.ident),
                mutable: pi.mutability.is_some(),
                span: self.range(expr_span::ident_bounds(&pi.ident)),
                sub: pi.subpat.as_ref().map(|(_, s)| Box::new(self.pat_at(s, d))),
            },
            syn::Pat::Tuple(t) => Pat::Tuple(t.elems.iter().map(|p| self.pat_at(p, d)).collect()),
            syn::Pat::TupleStruct(ts) => Pat::TupleStruct {
                path: self.path(&ts.path),
                elems: ts.elems.iter().map(|p| self.pat_at(p, d)).collect(),
            },
            syn::Pat::Struct(s) => Pat::Struct {
                path: self.path(&s.path),
                fields: s
                    .fields
                    .iter()
                    .map(|f| (member_name(&f.member), self.pat_at(&f.pat, d)))
                    .collect(),
            },
            syn::Pat::Or(o) => Pat::Or(o.cases.iter().map(|p| self.pat_at(p, d)).collect()),
            syn::Pat::Reference(r) => Pat::Ref(Box::new(self.pat_at(&r.pat, d))),
            syn::Pat::Paren(pp) => self.pat_at(&pp.pat, d),
            syn::Pat::Type(pt) => Pat::Typed {
                pat: Box::new(self.pat_at(&pt.pat, d)),
                ty: Box::new(self.ty(&pt.ty)),
            },
            syn::Pat::Path(pp) => Pat::Path(self.path(&pp.path)),
            syn::Pat::Lit(l) => Pat::Lit(lit(&l.lit)),
            syn::Pat::Wild(_) | syn::Pat::Rest(_) => Pat::Wild,
            syn::Pat::Guard(g) => self.pat_at(&g.pat, d),
            syn::Pat::Slice(s) => Pat::Tuple(s.elems.iter().map(|p| self.pat_at(p, d)).collect()),
            _ => Pat::Other,
        }
    }

    pub(super) fn block(&mut self, b: &syn::Block, module: &ModulePath, in_test: bool) -> Block {
        let mut stmts = Vec::with_capacity(b.stmts.len());
        for s in &b.stmts {
            match s {
                syn::Stmt::Local(l) => stmts.push(Stmt::Let {
                    pat: Box::new(self.pat(&l.pat)),
                    init: l.init.as_ref().map(|i| self.expr(&i.expr)),
                    diverge: l
                        .init
                        .as_ref()
                        .and_then(|i| i.diverge.as_ref())
                        .map(|(_, e)| {
                            let e = self.expr(e);
                            let span = e.span;
                            Box::new(Block {
                                stmts: vec![Stmt::Expr {
                                    expr: e,
                                    semi: false,
                                }],
                                span,
                            })
                        }),
                    span: match expr_span::let_bounds(l) {
                        Some(r) => self.range(r),
                        None => self.span_of(l),
                    },
                }),
                syn::Stmt::Item(item) => {
                    // Nested fns become functions of the enclosing module.
                    self.item(item, module, &[], in_test, true);
                    stmts.push(Stmt::Item {
                        span: self.item_span(item),
                    });
                }
                syn::Stmt::Expr(e, semi) => stmts.push(Stmt::Expr {
                    expr: self.expr(e),
                    semi: semi.is_some(),
                }),
                syn::Stmt::Macro(m) => {
                    let span = self.span_of(m);
                    let call = self.mac(&m.mac);
                    stmts.push(Stmt::Expr {
                        expr: Expr {
                            kind: ExprKind::Macro(Box::new(call)),
                            span,
                        },
                        semi: m.semi_token.is_some(),
                    });
                }
            }
        }
        Block {
            stmts,
            // A block prints as one brace group: its span is the group's.
            span: self.span(b.brace_token.span.join()),
        }
    }

    pub(super) fn boxed(&mut self, e: &syn::Expr) -> Box<Expr> {
        Box::new(self.expr(e))
    }

    pub(super) fn exprs<'a>(&mut self, es: impl IntoIterator<Item = &'a syn::Expr>) -> Vec<Expr> {
        es.into_iter().map(|e| self.expr(e)).collect()
    }

    pub(super) fn expr(&mut self, e: &syn::Expr) -> Expr {
        self.expr_hinted(e, None, None)
    }

    /// [`Lowerer::expr`] where the enclosing expression's bounds already say where `e` starts
    /// or ends (see [`expr_span::bounds_hinted`]).
    pub(super) fn expr_hinted(
        &mut self,
        e: &syn::Expr,
        lo: Option<usize>,
        hi: Option<usize>,
    ) -> Expr {
        if self.stop() {
            return Expr {
                kind: ExprKind::Other(vec![]),
                span: Span::default(),
            };
        }
        // The span of an expression, as `span_of` gives it, without printing the expression
        // back to tokens where `bounds` knows its shape.
        let bounds = expr_span::bounds_hinted(e, lo, hi);
        let span = match bounds {
            Some(r) => self.range(r),
            None => self.span_of(e),
        };
        if self.depth >= MAX_DEPTH {
            return Expr {
                kind: ExprKind::Other(vec![]),
                span,
            };
        }
        self.depth += 1;
        let kind = self.expr_kind(e, bounds);
        self.depth -= 1;
        Expr { kind, span }
    }

    /// `Trait::method(receiver, args)` for a store trait ([`store_traits`]), and
    /// `<C as Trait>::method(..)`, as the `receiver.method(args)` it stands for: the stores'
    /// rooms read method calls, whichever way the user spelled them. A reference taken for
    /// the receiver (`&mut conn`) is the auto-ref of the method form, so it is dropped.
    pub(super) fn path_form_method(&mut self, c: &syn::ExprCall) -> Option<ExprKind> {
        let syn::Expr::Path(p) = &*c.func else {
            return None;
        };
        let segments = &p.path.segments;
        let method = segments.last()?;
        let trait_at = match &p.qself {
            Some(q) => q.position.checked_sub(1)?,
            None => segments.len().checked_sub(2)?,
        };
        let trait_name = segments.get(trait_at)?.ident.to_string();
        // `Cmds::set(..)`, `<C as Cmds>::get(..)`: an unqualified trait name may be an alias.
        let aliased = || trait_at == 0 && self.imports_method_trait(&trait_name);
        if !store_traits::is_method_trait(&trait_name) && !aliased() {
            return None;
        }
        let (first, rest) = (c.args.first()?, c.args.iter().skip(1));
        let receiver = match first {
            syn::Expr::Reference(r) => &*r.expr,
            other => other,
        };
        Some(ExprKind::MethodCall {
            receiver: self.boxed(receiver),
            method: unraw(&method.ident),
            method_span: self.range(expr_span::ident_bounds(&method.ident)),
            args: self.exprs(rest),
        })
    }

    /// Whether `name` is a store trait imported under another name in this file (`use
    /// redis::AsyncCommands as Cmds;`). The imports above the call are known by then, which
    /// is where they are written.
    pub(super) fn imports_method_trait(&self, name: &str) -> bool {
        self.model.uses.iter().any(|u| {
            !u.glob
                && u.alias == name
                && u.path
                    .last()
                    .is_some_and(|t| store_traits::is_method_trait(t))
        })
    }

    /// The child that starts where its parent (bounds `b`) starts.
    pub(super) fn boxed_lo(&mut self, e: &syn::Expr, b: Option<(usize, usize)>) -> Box<Expr> {
        Box::new(self.expr_hinted(e, b.map(|b| b.0), None))
    }

    /// The child that ends where its parent (bounds `b`) ends.
    pub(super) fn boxed_hi(&mut self, e: &syn::Expr, b: Option<(usize, usize)>) -> Box<Expr> {
        Box::new(self.expr_hinted(e, None, b.map(|b| b.1)))
    }

    /// A block inside an expression, lowered in the file's module: items inside expressions
    /// are rare, and lowered as part of the enclosing fn's module.
    pub(super) fn inner_block(&mut self, b: &syn::Block) -> Block {
        let module = ModulePath::clone(&self.module);
        self.block(b, &module, false)
    }

    /// `bounds`: `e`'s, when known without printing (its children's hints).
    pub(super) fn expr_kind(&mut self, e: &syn::Expr, bounds: Option<(usize, usize)>) -> ExprKind {
        let b = bounds;
        match e {
            syn::Expr::Path(p) => ExprKind::Path(self.expr_path(p, b)),
            syn::Expr::Lit(l) => ExprKind::Lit(lit(&l.lit)),
            syn::Expr::Call(c) => match self.path_form_method(c) {
                Some(method_call) => method_call,
                None => ExprKind::Call {
                    func: self.boxed_lo(&c.func, b),
                    args: self.exprs(&c.args),
                },
            },
            syn::Expr::MethodCall(m) => ExprKind::MethodCall {
                receiver: self.boxed_lo(&m.receiver, b),
                method: unraw(&m.method),
                method_span: self.range(expr_span::ident_bounds(&m.method)),
                args: self.exprs(&m.args),
            },
            syn::Expr::Macro(m) => ExprKind::Macro(Box::new(self.mac(&m.mac))),
            syn::Expr::Field(f) => ExprKind::Field {
                base: self.boxed_lo(&f.base, b),
                member: member_name(&f.member),
            },
            syn::Expr::Index(i) => ExprKind::Index {
                base: self.boxed_lo(&i.expr, b),
                index: self.boxed(&i.index),
            },
            syn::Expr::Unary(u) => match u.op {
                syn::UnOp::Deref(_) => ExprKind::Deref(self.boxed_hi(&u.expr, b)),
                syn::UnOp::Not(_) => ExprKind::Unary {
                    not: true,
                    expr: self.boxed_hi(&u.expr, b),
                },
                _ => ExprKind::Unary {
                    not: false,
                    expr: self.boxed_hi(&u.expr, b),
                },
            },
            syn::Expr::Binary(bin) => {
                let lhs = self.boxed_lo(&bin.left, b);
                let rhs = self.boxed_hi(&bin.right, b);
                match (fold_int(&bin.op, &lhs, &rhs), bin_op(&bin.op)) {
                    // `60 * 60 * 24`: one literal, so a TTL written so reads as a number.
                    (Some(n), _) => ExprKind::Lit(Lit::Int(n.to_string())),
                    (None, Some(op)) => ExprKind::Binary { op, lhs, rhs },
                    (None, None) => ExprKind::AssignOp { lhs, rhs },
                }
            }
            syn::Expr::Reference(r) => ExprKind::Ref {
                mutable: r.mutability.is_some(),
                expr: self.boxed_hi(&r.expr, b),
            },
            syn::Expr::RawAddr(r) => ExprKind::Ref {
                mutable: false,
                expr: self.boxed(&r.expr),
            },
            syn::Expr::Cast(c) => ExprKind::Cast {
                expr: self.boxed_lo(&c.expr, b),
                ty: Box::new(self.ty(&c.ty)),
            },
            syn::Expr::Await(a) => ExprKind::Await(self.boxed_lo(traced_future(&a.base), b)),
            syn::Expr::Try(t) => ExprKind::Try(self.boxed_lo(&t.expr, b)),
            syn::Expr::Paren(p) => self.expr(&p.expr).kind,
            syn::Expr::Group(g) => self.expr(&g.expr).kind,
            syn::Expr::Block(blk) => ExprKind::Block(self.inner_block(&blk.block)),
            syn::Expr::Unsafe(u) => ExprKind::Block(self.inner_block(&u.block)),
            syn::Expr::TryBlock(t) => ExprKind::Block(self.inner_block(&t.block)),
            syn::Expr::Const(c) => ExprKind::Block(self.inner_block(&c.block)),
            syn::Expr::Async(a) => ExprKind::Async {
                block: self.inner_block(&a.block),
                is_move: a.capture.is_some(),
            },
            syn::Expr::Closure(c) => ExprKind::Closure {
                params: c.inputs.iter().map(|p| self.pat(p)).collect(),
                body: self.boxed(&c.body),
                is_async: c.asyncness.is_some(),
            },
            syn::Expr::If(i) => ExprKind::If {
                cond: self.boxed(&i.cond),
                then: self.inner_block(&i.then_branch),
                els: i.else_branch.as_ref().map(|(_, e)| self.boxed_hi(e, b)),
            },
            syn::Expr::Let(l) => ExprKind::Let {
                pat: Box::new(self.pat(&l.pat)),
                expr: self.boxed_hi(&l.expr, b),
            },
            syn::Expr::Match(m) => ExprKind::Match {
                scrutinee: self.boxed(&m.expr),
                arms: m.arms.iter().map(|a| self.arm(a)).collect(),
            },
            syn::Expr::While(w) => ExprKind::Loop {
                cond: Some(self.boxed(&w.cond)),
                body: self.inner_block(&w.body),
            },
            syn::Expr::Loop(l) => ExprKind::Loop {
                cond: None,
                body: self.inner_block(&l.body),
            },
            syn::Expr::ForLoop(f) => ExprKind::For {
                pat: Box::new(self.pat(&f.pat)),
                iter: self.boxed(&f.expr),
                body: self.inner_block(&f.body),
            },
            syn::Expr::Return(r) => ExprKind::Return(r.expr.as_ref().map(|e| self.boxed_hi(e, b))),
            syn::Expr::Break(b) => ExprKind::Break(b.expr.as_ref().map(|e| self.boxed(e))),
            syn::Expr::Continue(_) => ExprKind::Continue,
            syn::Expr::Assign(a) => ExprKind::Assign {
                lhs: self.boxed_lo(&a.left, b),
                rhs: self.boxed_hi(&a.right, b),
            },
            syn::Expr::Struct(s) => ExprKind::Struct {
                path: Box::new(self.path(&s.path)),
                fields: s
                    .fields
                    .iter()
                    .map(|f| (member_name(&f.member), self.expr(&f.expr)))
                    .collect(),
                rest: s.rest.as_ref().map(|r| self.boxed(r)),
            },
            syn::Expr::Tuple(t) => ExprKind::Tuple(self.exprs(&t.elems)),
            syn::Expr::Array(a) => ExprKind::Array(self.exprs(&a.elems)),
            syn::Expr::Repeat(r) => ExprKind::Array(vec![self.expr(&r.expr)]),
            syn::Expr::Range(r) => ExprKind::Range {
                start: r.start.as_ref().map(|e| self.boxed_lo(e, b)),
                end: r.end.as_ref().map(|e| self.boxed_hi(e, b)),
            },
            _ => ExprKind::Other(vec![]),
        }
    }

    pub(super) fn arm(&mut self, a: &syn::Arm) -> Arm {
        let guard = match &a.pat {
            syn::Pat::Guard(g) => Some(Box::new(self.expr(&g.guard))),
            _ => None,
        };
        Arm {
            pat: self.pat(&a.pat),
            guard,
            body: self.expr(&a.body),
        }
    }
}
