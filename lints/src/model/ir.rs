//! The lowered form of a source file that every analysis and lint reads.
//!
//! `proc_macro2` spans only resolve on the thread that parsed the file, and syn trees are not
//! `Send`, so each file is parsed and lowered on its own worker thread into this tree, whose
//! spans are plain byte ranges. It keeps what an analysis without types can use (paths, calls,
//! method chains, bindings, control flow, string literals, macro arguments) and folds the rest
//! into [`ExprKind::Other`] with its sub-expressions, so no value flow is lost.

use super::Span;
use serde::{Deserialize, Serialize};

/// A path as written, generic arguments dropped: `uuid::Uuid::new_v4`, `Self::check`, `x`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Path {
    pub segments: Vec<String>,
    /// True for `::uuid::Uuid` (an absolute path).
    pub leading_colon: bool,
    pub span: Span,
    /// The type of a qualified path `<Type as Trait>::f` (whose `segments` are `Trait::f`):
    /// the implementation the call picks.
    pub qself: Option<Box<Path>>,
}

impl Path {
    /// The last segment (`new_v4` of `Uuid::new_v4`).
    pub fn last(&self) -> &str {
        self.segments.last().map(String::as_str).unwrap_or("")
    }

    /// A single-segment path: a local variable or a name in scope.
    pub fn as_ident(&self) -> Option<&str> {
        match self.segments.as_slice() {
            [one] if !self.leading_colon => Some(one),
            _ => None,
        }
    }
}

/// A type as written. `&mut Arc<aws_sdk_s3::Client>` is `Ref(Path(Arc<Path(..Client)>))`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Type {
    Path {
        path: Path,
        args: Vec<Type>,
    },
    Ref {
        mutable: bool,
        inner: Box<Type>,
    },
    Tuple(Vec<Type>),
    /// `impl Trait` / `dyn Trait`: the bounds' paths.
    Bounds(Vec<Path>),
    Other,
}

impl Type {
    /// The path of the type behind references and the usual smart pointers and wrappers, so
    /// `&Arc<Client>`, `Option<Box<Client>>` and `Client` all name `Client`.
    pub fn core_path(&self) -> Option<&Path> {
        const WRAPPERS: &[&str] = &[
            "Arc",
            "Rc",
            "Box",
            "Option",
            "Mutex",
            "RwLock",
            "RefCell",
            "Cell",
            "Cow",
            "State",
            "Data",
            "Extension",
        ];
        match self {
            Type::Ref { inner, .. } => inner.core_path(),
            Type::Path { path, args } => {
                if WRAPPERS.contains(&path.last()) && args.len() == 1 {
                    args[0].core_path()
                } else {
                    Some(path)
                }
            }
            // `dyn Store + Send + Sync`, `impl Store`: the trait is all that is known.
            Type::Bounds(bounds) => bounds.iter().find(|b| !is_marker_trait(b.last())),
            _ => None,
        }
    }
}

/// Auto and marker traits that say nothing about what a value does.
pub fn is_marker_trait(name: &str) -> bool {
    matches!(
        name,
        "Send" | "Sync" | "Unpin" | "Sized" | "Copy" | "Clone" | "Debug" | "UnwindSafe"
    )
}

/// A binding pattern. Only the shapes that bind names are kept structurally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pat {
    Ident {
        name: String,
        mutable: bool,
        span: Span,
        sub: Option<Box<Pat>>,
    },
    Tuple(Vec<Pat>),
    /// `Some(x)`, `Ok(v)`, `Event(id, _)`.
    TupleStruct {
        path: Path,
        elems: Vec<Pat>,
    },
    /// `Msg { id, body: b, .. }`: field name and sub-pattern.
    Struct {
        path: Path,
        fields: Vec<(String, Pat)>,
    },
    /// `A | B`.
    Or(Vec<Pat>),
    Ref(Box<Pat>),
    /// `x: T` (closure and fn parameters, `let` with ascription).
    Typed {
        pat: Box<Pat>,
        ty: Box<Type>,
    },
    /// A path (`None`, `Status::Done`) or literal pattern.
    Path(Path),
    Lit(Lit),
    Wild,
    Other,
}

impl Pat {
    /// Every name this pattern binds, with its span.
    pub fn bindings(&self) -> Vec<(&str, Span)> {
        let mut out = Vec::new();
        self.collect_bindings(&mut out);
        out
    }

    fn collect_bindings<'a>(&'a self, out: &mut Vec<(&'a str, Span)>) {
        match self {
            Pat::Ident {
                name, span, sub, ..
            } => {
                out.push((name, *span));
                if let Some(sub) = sub {
                    sub.collect_bindings(out);
                }
            }
            Pat::Tuple(ps) | Pat::Or(ps) | Pat::TupleStruct { elems: ps, .. } => {
                ps.iter().for_each(|p| p.collect_bindings(out))
            }
            Pat::Struct { fields, .. } => fields.iter().for_each(|(_, p)| p.collect_bindings(out)),
            Pat::Ref(p) | Pat::Typed { pat: p, .. } => p.collect_bindings(out),
            Pat::Path(_) | Pat::Lit(_) | Pat::Wild | Pat::Other => {}
        }
    }

    /// The single name bound by `x`, `mut x`, `&x`, `x: T`.
    pub fn simple_name(&self) -> Option<&str> {
        match self {
            Pat::Ident {
                name, sub: None, ..
            } => Some(name),
            Pat::Ref(p) | Pat::Typed { pat: p, .. } => p.simple_name(),
            _ => None,
        }
    }

    /// The ascribed type of `x: T`.
    pub fn ascribed_type(&self) -> Option<&Type> {
        match self {
            Pat::Typed { ty, .. } => Some(ty),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Lit {
    Str(String),
    Int(String),
    Float(String),
    Bool(bool),
    Char(char),
    Other,
}

impl Eq for Lit {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stmt {
    /// `let pat: ty = init else { diverge };`
    Let {
        pat: Box<Pat>,
        init: Option<Expr>,
        diverge: Option<Box<Block>>,
        span: Span,
    },
    /// An expression statement; `semi` is false for a block's trailing value.
    Expr { expr: Expr, semi: bool },
    /// A nested item; nested fns are lowered as their own [`super::FnDef`], so nothing here.
    Item { span: Span },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// An argument of a macro call, lowered when the macro's input parses as comma-separated
/// expressions (`format!`, `vec!`, `println!`, `query!`, `json!`-free macros).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacroCall {
    pub path: Path,
    /// The parsed arguments, with `name = value` arguments as their value. For format-like
    /// macros inline captures (`{order_id}`) of the format string become extra path arguments.
    pub args: Vec<Expr>,
    /// Whether the input parsed as expressions; when false, `args` is empty.
    pub parsed: bool,
}

impl MacroCall {
    /// `join!(a, b)`, `try_join!(..)` (futures, tokio): the argument futures are awaited
    /// here, to completion, and the value is the tuple of their outputs.
    pub fn joins_futures(&self) -> bool {
        matches!(self.path.last(), "join" | "try_join")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arm {
    pub pat: Pat,
    pub guard: Option<Box<Expr>>,
    pub body: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    /// `&&`
    And,
    /// `||`
    Or,
    /// `==`, `!=`, `<`, `>`, `<=`, `>=`
    Compare,
    /// `+`, `-`, `*`, ... (and bit operators)
    Arith(ArithOp),
}

/// Which arithmetic: enough to fold constants (`TTL * 1000`); the rest are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `%` and the bit operators.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExprKind {
    Path(Path),
    Lit(Lit),
    /// `f(args)`; `func` is usually a [`ExprKind::Path`].
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `receiver.method(args)`.
    MethodCall {
        receiver: Box<Expr>,
        method: String,
        method_span: Span,
        args: Vec<Expr>,
    },
    /// Boxed, as the rarer large variants are: every expression is the size of the largest.
    Macro(Box<MacroCall>),
    /// `base.field` or `base.0`.
    Field {
        base: Box<Expr>,
        member: String,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    /// `!x`, `-x`.
    Unary {
        not: bool,
        expr: Box<Expr>,
    },
    /// `*x`.
    Deref(Box<Expr>),
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `&x`, `&mut x`.
    Ref {
        mutable: bool,
        expr: Box<Expr>,
    },
    Cast {
        expr: Box<Expr>,
        ty: Box<Type>,
    },
    Await(Box<Expr>),
    /// `expr?`
    Try(Box<Expr>),
    Block(Block),
    /// `unsafe { }`, `try { }`, labeled blocks: same as a block for the analysis.
    Async {
        block: Block,
        is_move: bool,
    },
    Closure {
        params: Vec<Pat>,
        body: Box<Expr>,
        is_async: bool,
    },
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    /// `let pat = expr` inside an `if`/`while` condition.
    Let {
        pat: Box<Pat>,
        expr: Box<Expr>,
    },
    Match {
        scrutinee: Box<Expr>,
        arms: Vec<Arm>,
    },
    /// `while cond { }` (cond is `None` for `loop`).
    Loop {
        cond: Option<Box<Expr>>,
        body: Block,
    },
    For {
        pat: Box<Pat>,
        iter: Box<Expr>,
        body: Block,
    },
    Return(Option<Box<Expr>>),
    Break(Option<Box<Expr>>),
    Continue,
    /// `lhs = rhs`
    Assign {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `lhs += rhs` and the other compound assignments.
    AssignOp {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Struct {
        path: Box<Path>,
        fields: Vec<(String, Expr)>,
        rest: Option<Box<Expr>>,
    },
    Tuple(Vec<Expr>),
    Array(Vec<Expr>),
    Range {
        start: Option<Box<Expr>>,
        end: Option<Box<Expr>>,
    },
    /// Anything else (and anything past the nesting bound), keeping its sub-expressions.
    Other(Vec<Expr>),
}

impl Expr {
    /// The expression without parentheses, references, derefs, `?` and `.await`, which carry
    /// the same value for the analysis.
    pub fn peel(&self) -> &Expr {
        match &self.kind {
            ExprKind::Ref { expr, .. }
            | ExprKind::Deref(expr)
            | ExprKind::Try(expr)
            | ExprKind::Await(expr) => expr.peel(),
            _ => self,
        }
    }

    /// The method names of a call chain, outermost first: `["send", "name",
    /// "start_execution"]` of `c.start_execution().name(n).send()` (through `?` and `.await`).
    pub fn method_chain(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut cur = self.peel();
        while let ExprKind::MethodCall {
            receiver, method, ..
        } = &cur.kind
        {
            out.push(method.as_str());
            cur = receiver.peel();
        }
        out
    }

    /// The string of a string literal.
    pub fn as_str_lit(&self) -> Option<&str> {
        match &self.peel().kind {
            ExprKind::Lit(Lit::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// The path of a path expression.
    pub fn as_path(&self) -> Option<&Path> {
        match &self.peel().kind {
            ExprKind::Path(p) => Some(p),
            _ => None,
        }
    }

    /// The direct sub-expressions, in evaluation order (blocks' statements included).
    pub fn children(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        for_each_child(self, &mut |e| out.push(e));
        out
    }

    /// Calls `f` on each direct sub-expression, in evaluation order, without allocating.
    pub fn for_each_child<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        for_each_child(self, f);
    }

    /// Visits every pattern that binds names inside this expression: `let` statements (in
    /// blocks and conditions), closure parameters, match arms and `for` loops.
    pub fn walk_pats<'a>(&'a self, f: &mut dyn FnMut(&'a Pat)) {
        self.walk(&mut |e| own_pats(e, f));
    }

    /// Visits this expression and every expression inside it, depth first, pre-order,
    /// including expressions inside blocks, closures and async blocks.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        // The generic visitor inlines the recursion: one dynamic call per expression (`f`),
        // not two more per child through a trampoline closure.
        visit_children(self, &mut |e: &'a Expr| e.walk(f));
    }
}

impl Block {
    /// Visits every expression of the block, depth first, pre-order.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        for stmt in &self.stmts {
            stmt.walk(f);
        }
    }

    /// Visits every pattern that binds names in the block, nested blocks included (see
    /// [`Expr::walk_pats`]).
    pub fn walk_pats<'a>(&'a self, f: &mut dyn FnMut(&'a Pat)) {
        self.let_pats(f);
        for stmt in &self.stmts {
            stmt.walk(&mut |e| own_pats(e, f));
        }
    }

    /// Calls `f` on the expressions of the block's statements, without descending.
    pub fn for_each_expr<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        visit_block(self, f);
    }

    /// Visits every `let` statement of the block and of the blocks nested in it (branches,
    /// loops, closures, async blocks), with its initializer.
    pub fn walk_lets<'a>(&'a self, f: &mut dyn FnMut(&'a Pat, Option<&'a Expr>)) {
        let own = |b: &'a Block, f: &mut dyn FnMut(&'a Pat, Option<&'a Expr>)| {
            for s in &b.stmts {
                if let Stmt::Let { pat, init, .. } = s {
                    f(pat, init.as_ref());
                }
            }
        };
        own(self, f);
        for stmt in &self.stmts {
            stmt.walk(&mut |e| match &e.kind {
                ExprKind::Block(b)
                | ExprKind::Async { block: b, .. }
                | ExprKind::If { then: b, .. }
                | ExprKind::Loop { body: b, .. }
                | ExprKind::For { body: b, .. } => own(b, f),
                _ => {}
            });
        }
    }

    /// The patterns of this block's own `let` statements.
    fn let_pats<'a>(&'a self, f: &mut dyn FnMut(&'a Pat)) {
        for stmt in &self.stmts {
            if let Stmt::Let { pat, .. } = stmt {
                f(pat);
            }
        }
    }

    /// The block's value: its trailing expression without a semicolon.
    pub fn tail(&self) -> Option<&Expr> {
        match self.stmts.last() {
            Some(Stmt::Expr { expr, semi: false }) => Some(expr),
            _ => None,
        }
    }
}

impl Stmt {
    /// Calls `f` on the statement's own expressions (a `let`'s initializer and `else` block,
    /// an expression statement), without descending.
    pub fn for_each_expr<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        visit_stmt(self, f);
    }

    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        match self {
            Stmt::Let { init, diverge, .. } => {
                if let Some(init) = init {
                    init.walk(f);
                }
                if let Some(diverge) = diverge {
                    diverge.walk(f);
                }
            }
            Stmt::Expr { expr, .. } => expr.walk(f),
            Stmt::Item { .. } => {}
        }
    }

    pub fn span(&self) -> Span {
        match self {
            Stmt::Let { span, .. } | Stmt::Item { span } => *span,
            Stmt::Expr { expr, .. } => expr.span,
        }
    }
}

/// The binding patterns an expression introduces itself (not those of its sub-expressions,
/// which [`Expr::walk`] reaches; a block's `let`s are its own, being statements).
fn own_pats<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Pat)) {
    match &e.kind {
        ExprKind::Closure { params, .. } => params.iter().for_each(f),
        ExprKind::Let { pat, .. } => f(pat),
        ExprKind::For { pat, body, .. } => {
            f(pat);
            body.let_pats(f);
        }
        ExprKind::Match { arms, .. } => arms.iter().for_each(|a| f(&a.pat)),
        ExprKind::Block(b)
        | ExprKind::Async { block: b, .. }
        | ExprKind::If { then: b, .. }
        | ExprKind::Loop { body: b, .. } => b.let_pats(f),
        _ => {}
    }
}

fn for_each_child<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    visit_children(e, f);
}

/// A statement's own expressions (see [`Stmt::for_each_expr`]), generic so that walkers
/// inside this module call their visitor directly.
fn visit_stmt<'a, F: FnMut(&'a Expr) + ?Sized>(s: &'a Stmt, f: &mut F) {
    match s {
        Stmt::Let { init, diverge, .. } => {
            if let Some(i) = init {
                f(i);
            }
            if let Some(d) = diverge {
                visit_block(d, f);
            }
        }
        Stmt::Expr { expr, .. } => f(expr),
        Stmt::Item { .. } => {}
    }
}

fn visit_block<'a, F: FnMut(&'a Expr) + ?Sized>(b: &'a Block, f: &mut F) {
    for s in &b.stmts {
        visit_stmt(s, f);
    }
}

/// The direct sub-expressions of `e`, in evaluation order (see [`Expr::for_each_child`]).
pub(crate) fn visit_children<'a, F: FnMut(&'a Expr) + ?Sized>(e: &'a Expr, f: &mut F) {
    let block = |b: &'a Block, f: &mut F| visit_block(b, f);
    match &e.kind {
        ExprKind::Path(_) | ExprKind::Lit(_) | ExprKind::Continue => {}
        ExprKind::Call { func, args } => {
            f(func);
            args.iter().for_each(&mut *f);
        }
        ExprKind::MethodCall { receiver, args, .. } => {
            f(receiver);
            args.iter().for_each(&mut *f);
        }
        ExprKind::Macro(m) => m.args.iter().for_each(&mut *f),
        ExprKind::Field { base, .. } => f(base),
        ExprKind::Index { base, index } => {
            f(base);
            f(index);
        }
        ExprKind::Unary { expr, .. }
        | ExprKind::Deref(expr)
        | ExprKind::Ref { expr, .. }
        | ExprKind::Cast { expr, .. }
        | ExprKind::Await(expr)
        | ExprKind::Try(expr) => f(expr),
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::Assign { lhs, rhs }
        | ExprKind::AssignOp { lhs, rhs } => {
            f(lhs);
            f(rhs);
        }
        ExprKind::Block(b) | ExprKind::Async { block: b, .. } => block(b, f),
        ExprKind::Closure { body, .. } => f(body),
        ExprKind::If { cond, then, els } => {
            f(cond);
            block(then, f);
            if let Some(e) = els {
                f(e);
            }
        }
        ExprKind::Let { expr, .. } => f(expr),
        ExprKind::Match { scrutinee, arms } => {
            f(scrutinee);
            for arm in arms {
                if let Some(g) = &arm.guard {
                    f(g);
                }
                f(&arm.body);
            }
        }
        ExprKind::Loop { cond, body } => {
            if let Some(c) = cond {
                f(c);
            }
            block(body, f);
        }
        ExprKind::For { iter, body, .. } => {
            f(iter);
            block(body, f);
        }
        ExprKind::Return(v) | ExprKind::Break(v) => {
            if let Some(v) = v {
                f(v);
            }
        }
        ExprKind::Struct { fields, rest, .. } => {
            fields.iter().for_each(|(_, v)| f(v));
            if let Some(r) = rest {
                f(r);
            }
        }
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Other(es) => {
            es.iter().for_each(&mut *f)
        }
        ExprKind::Range { start, end } => {
            if let Some(s) = start {
                f(s);
            }
            if let Some(e) = end {
                f(e);
            }
        }
    }
}
