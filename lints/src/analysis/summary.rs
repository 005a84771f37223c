//! Function summaries for every fn and method of the package, computed once, to a fixed
//! point, and used at call sites instead of re-analysing callees.
//!
//! Public API:
//! - [`Summaries::compute`] (reached as `cx.analysis().summaries(cx.package)`) walks every
//!   function with [`crate::analysis::flow::walk`], callees first: fns no call cycle reaches
//!   bottom-up in parallel layers, then the rest a strongly connected component of the call
//!   graph at a time (independent components in parallel), each to its own fixed point:
//!   functions in a cycle, or that read a summary not final yet, are walked again until no
//!   summary changes.
//! - [`Summaries::summary`]`(id) -> &FnSummary` and [`Summaries::flow`]`(id) -> &FnFlow`
//!   (the facts of the function's final walk: key uses, store events, decisions, effects,
//!   resolved calls); [`Summaries::ids`] lists every function.
//! - [`FnSummary`]: does the function return a nondeterministic value (and from where),
//!   which parameters flow into its return value and into key sinks, which stores it reads
//!   and writes with which keys ([`StoreAccess`], keys as [`KeyDesc`] with parameter
//!   placeholders), whether it is a guard (an atomic claim whose result is checked or
//!   returned), whether it has effects.

use super::callgraph::CallGraph;
use super::flow::{
    self, Callees, FlowCx, FnFlow, FnId, KeyDesc, Source, StoreEvent, TextCall, TextParam, Trail,
};
use super::resolve::Resolver;
use super::store_ops::{Access, Store, WriteShape};
use super::types::Types;
use super::{FastMap, FastSet};
use crate::catalog::{Catalog, SinkKind};
use crate::model::{Package, Span};
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A store access as a summary states it (and as [`flow::StoreEvent`] records it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreAccess {
    pub store: Store,
    pub access: Access,
    /// `SET NX`, `exists`, `put_item`, `INSERT INTO processed`.
    pub command: String,
    pub table: Option<String>,
    /// How the key is derived; parameters of the function that performs it appear as
    /// `$0$`, `$1$`... and are replaced by the arguments at a call site.
    pub key: Option<KeyDesc>,
    /// The key expression in the function that performs the operation.
    pub key_span: Option<Span>,
    /// Every written value is a marker (literal, constant, timestamp), not computed data.
    pub value_is_marker: bool,
    /// A read holding a lock (`SELECT .. FOR UPDATE`).
    pub locking: bool,
    /// A write into a table named like a dedupe table, or a read by a dedupe-named column
    /// ([`super::store_ops::StoreOp::dedupe_table`]).
    pub dedupe_table: bool,
    /// What the write records (a done status, an increment).
    pub shape: WriteShape,
    /// The operation itself (in the function that performs it).
    pub span: Span,
    /// SQL columns with how each one's value is derived ([`super::store_ops::StoreOp::columns`]):
    /// an `INSERT`'s columns, or the `col = value` equalities a statement looks rows up by.
    pub columns: Vec<(String, Option<KeyDesc>)>,
}

impl StoreAccess {
    /// [`StoreAccess::key`] and the column values with a helper's parameters replaced by
    /// the arguments of a call.
    pub fn instantiate(mut self, args: &[Option<KeyDesc>]) -> StoreAccess {
        self.key = self.key.map(|k| k.instantiate(args));
        for (_, v) in &mut self.columns {
            *v = v.take().map(|k| k.instantiate(args));
        }
        self
    }

    /// How the value given to column `column` is derived, when the statement names it.
    pub fn column_value(&self, column: &str) -> Option<&KeyDesc> {
        self.columns
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(column))
            .and_then(|(_, v)| v.as_ref())
    }

    /// Whether running the write twice leaves a different state than running it once: an
    /// increment, or a plain `INSERT` (a second row, or a failure). Upserts, `SET x = value`
    /// updates, overwriting puts and deletes are naturally idempotent.
    pub fn changes_on_repeat(&self) -> bool {
        let plain_insert = self.store == Store::Sql
            && self.access == Access::Write
            && self.command.starts_with("INSERT");
        self.shape.increments || plain_insert
    }
}

/// A parameter that reaches a key sink inside the function (or a callee).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSink {
    pub param: usize,
    /// The parameter's field that reaches it (`msg.id`), or the whole parameter.
    pub field: Option<String>,
    pub sink: SinkKind,
    /// The sink, possibly in a callee of the function.
    pub span: Span,
}

/// What callers need to know about a function.
#[derive(Debug, Clone, Default)]
pub struct FnSummary {
    /// Nondeterministic sources the return value is derived from, with their trails.
    pub ret_nondet: Vec<(Arc<Source>, Trail)>,
    /// Parameters (and parameter fields) the return value is derived from.
    pub ret_params: Vec<(usize, Option<String>)>,
    /// The store operation the return value reports: a read (`is_processed`) or a claim
    /// (`try_claim`).
    pub ret_access: Option<StoreAccess>,
    pub param_sinks: Vec<ParamSink>,
    /// Store operations performed, directly or through callees (bounded).
    pub accesses: Vec<StoreAccess>,
    /// Of [`FnSummary::accesses`], those whose error the function returns with `?` (a
    /// key-only insert, a conditional DynamoDB write): a repeat fails out of the call.
    pub tried: Vec<StoreAccess>,
    /// An atomic claim whose result the function checks or returns: the function is a guard.
    pub guard: Option<StoreAccess>,
    /// Calls made for their effects, or store writes.
    pub has_effects: bool,
    /// Parameters read as text the function does not know ([`FnFlow::text_params`]).
    pub text_params: Vec<TextParam>,
}

/// Store accesses kept per summary: callers need the kinds and keys, not every one.
const MAX_ACCESSES: usize = 8;

impl FnSummary {
    /// Whether the function reads a store and returns what it found (a check helper).
    pub fn is_check(&self) -> bool {
        self.ret_access
            .as_ref()
            .is_some_and(|a| a.access == Access::Read)
    }

    /// Whether the function is a guard (an atomic reservation whose result is used).
    pub fn is_guard(&self) -> bool {
        self.guard.is_some()
    }

    pub(crate) fn from_flow(flow: &FnFlow) -> FnSummary {
        let mut s = FnSummary::default();
        for (src, trail) in flow.ret.nondet() {
            s.ret_nondet.push((src.clone(), trail.clone()));
        }
        for (p, field) in flow.ret.params() {
            let entry = (p, field.map(str::to_owned));
            if !s.ret_params.contains(&entry) {
                s.ret_params.push(entry);
            }
        }
        s.ret_access = flow
            .ret
            .ops()
            .map(|i| &flow.store_events[i].access)
            .find(|a| matches!(a.access, Access::Read | Access::Claim))
            .cloned();
        for ku in &flow.key_uses {
            for (p, field) in ku.value.params() {
                let ps = ParamSink {
                    param: p,
                    field: field.map(str::to_owned),
                    sink: ku.sink.clone(),
                    span: ku.via.map_or(ku.span, |(_, s)| s),
                };
                if !s.param_sinks.contains(&ps) {
                    s.param_sinks.push(ps);
                }
            }
        }
        let returned: Vec<usize> = flow.ret.ops().collect();
        for (i, ev) in flow.store_events.iter().enumerate() {
            if returned.contains(&i) && ev.access.access == Access::Read {
                // Reported through `ret_access`; the caller decides on it.
                continue;
            }
            if s.accesses.len() < MAX_ACCESSES && !s.accesses.contains(&ev.access) {
                s.accesses.push(ev.access.clone());
            }
            if ev.tried && s.accesses.contains(&ev.access) && !s.tried.contains(&ev.access) {
                s.tried.push(ev.access.clone());
            }
            if ev.access.access == Access::Claim && ev.checked && s.guard.is_none() {
                s.guard = Some(ev.access.clone());
            }
        }
        s.text_params = flow.text_params.clone();
        s.has_effects = !flow.effects.is_empty()
            || flow.store_events.iter().any(|e| e.access.access.is_write());
        s
    }

    /// `prev` with what this summary adds to it, each list within its bound: for a fn whose
    /// summary keeps changing in a fixed point ([`JOIN_AFTER`]), so that it only grows.
    fn grown_from(self, prev: &FnSummary) -> FnSummary {
        let mut out = prev.clone();
        for (src, trail) in self.ret_nondet {
            let known = out.ret_nondet.iter().any(|(s, _)| s.span == src.span);
            if !known && out.ret_nondet.len() < flow::MAX_FACTS {
                out.ret_nondet.push((src, trail));
            }
        }
        for p in self.ret_params {
            if !out.ret_params.contains(&p) && out.ret_params.len() < flow::MAX_FACTS {
                out.ret_params.push(p);
            }
        }
        out.ret_access = out.ret_access.or(self.ret_access);
        for ps in self.param_sinks {
            if !out.param_sinks.contains(&ps) {
                out.param_sinks.push(ps);
            }
        }
        for a in self.accesses {
            if !out.accesses.contains(&a) && out.accesses.len() < MAX_ACCESSES {
                out.accesses.push(a);
            }
        }
        for a in self.tried {
            if out.accesses.contains(&a) && !out.tried.contains(&a) {
                out.tried.push(a);
            }
        }
        out.guard = out.guard.or(self.guard);
        out.has_effects |= self.has_effects;
        for tp in self.text_params {
            if !out.text_params.contains(&tp) {
                out.text_params.push(tp);
            }
        }
        out
    }

    /// Equality in everything a caller's walk can read (trails included), for deciding
    /// whether callers must be walked again after an edit ([`Summaries::reusing`]).
    pub(crate) fn identical(&self, other: &FnSummary) -> bool {
        self.same(other)
            && self
                .ret_nondet
                .iter()
                .zip(&other.ret_nondet)
                .all(|(a, b)| *a.0 == *b.0 && a.1.steps() == b.1.steps())
    }

    /// Equality for the fixed point: sources by span, the rest structurally.
    fn same(&self, other: &FnSummary) -> bool {
        self.ret_nondet.len() == other.ret_nondet.len()
            && self
                .ret_nondet
                .iter()
                .zip(&other.ret_nondet)
                .all(|(a, b)| a.0.span == b.0.span)
            && self.ret_params == other.ret_params
            && self.ret_access == other.ret_access
            && self.param_sinks == other.param_sinks
            && self.accesses == other.accesses
            && self.tried == other.tried
            && self.guard == other.guard
            && self.has_effects == other.has_effects
            && self.text_params == other.text_params
    }
}

/// Every function's summary and final flow facts.
#[derive(Debug)]
pub struct Summaries {
    summaries: Vec<Vec<Arc<FnSummary>>>,
    flows: Vec<Vec<FnFlow>>,
    /// Walks of functions with the SQL text their callers pass, that decide on a store
    /// read (see [`Summaries::bound_flows`]).
    bound: FastMap<FnId, Vec<FnFlow>>,
    /// By [`CallGraph::index`]: the fns no call cycle reaches, each walked exactly once
    /// with its callees' final summaries.
    acyclic: Vec<bool>,
    /// The package's field texts, when a walk asked for them.
    field_texts: Option<super::field_texts::FieldTexts>,
    /// See [`Summaries::rewalked`].
    rewalked: usize,
    /// See [`Summaries::direct_op_at`]: per fn, built on first use.
    direct_ops: Vec<Vec<OnceLock<OpIndex>>>,
    /// By [`CallGraph::index`], the fns walked (`None`: all): a linked member's fn that
    /// nothing of the package reads is not ([`super::linked`]).
    walked: Option<Vec<bool>>,
}

/// A fn's own store operations (not a helper's), as (span start, span end, event index),
/// sorted.
type OpIndex = Box<[(u32, u32, u32)]>;

/// An empty [`Summaries::direct_op_at`] index per fn of `flows`.
fn op_indexes(flows: &[Vec<FnFlow>]) -> Vec<Vec<OnceLock<OpIndex>>> {
    flows
        .iter()
        .map(|fs| fs.iter().map(|_| OnceLock::new()).collect())
        .collect()
}

/// Texts passed to one function that get it walked again for its own findings: enough for
/// a few backends' statements, bounded for a helper that every query goes through.
const MAX_BINDINGS_PER_FN: usize = 8;

/// Walks with bound texts in a whole package, beyond which the rest are not made.
const MAX_BOUND_WALKS: usize = 2_000;

impl Summaries {
    pub fn compute(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        catalog: &Catalog,
        graph: &CallGraph,
    ) -> Summaries {
        Summaries::compute_walking(package, resolver, types, catalog, graph, None)
    }

    /// [`Summaries::compute`] walking only the fns `walked` marks (by [`CallGraph::index`];
    /// `None`: all). `walked` must hold every callee of a fn it holds: a walked fn then
    /// reads only walked fns' summaries, which are what [`Summaries::compute`] gives them.
    /// The others keep an empty summary and flow.
    pub fn compute_walking(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        catalog: &Catalog,
        graph: &CallGraph,
        walked: Option<Vec<bool>>,
    ) -> Summaries {
        let cx = FlowCx::new(package, resolver, types, catalog, graph);
        cx.read_field_texts();
        let mut summaries = shape(package, || Arc::new(FnSummary::default()));
        let mut flows = shape(package, FnFlow::default);
        let acyclic = settle_all(&cx, &mut summaries, &mut flows, walked.as_deref());
        let bound = bound_walks(&cx, &summaries, &flows);
        let rewalked = walked
            .as_ref()
            .map_or(graph.len(), |w| w.iter().filter(|&&w| w).count());
        Summaries {
            direct_ops: op_indexes(&flows),
            summaries,
            flows,
            bound,
            acyclic,
            field_texts: cx.into_field_texts(),
            rewalked,
            walked,
        }
    }

    /// The summaries of `package` after an edit of the files marked in `changed`, from
    /// `prev` (those of the version before it): walks the changed files' fns and then,
    /// callees first, every fn a changed summary reaches; every other fn keeps its flow.
    ///
    /// Exactly what [`Summaries::compute`] gives, under conditions checked here and by the
    /// caller ([`super::incremental`]): the package-wide tables are those of `prev`'s
    /// package, so an unchanged fn whose callees' summaries are unchanged walks as before,
    /// and the fns no call cycle reaches must be the same in both versions. Those
    /// `compute` walks once each with its callees' final summaries, which is what is done
    /// here for the ones an edit reaches; the others' components that an edit reaches (a fn
    /// of a changed file, or a read of a changed summary) settle again from scratch, as
    /// `compute` settles them, and the rest keep their summaries. `None` when the conditions
    /// do not hold; the caller computes afresh.
    pub(crate) fn reusing(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        catalog: &Catalog,
        graph: &CallGraph,
        prev: Summaries,
        changed: &[bool],
    ) -> Option<Summaries> {
        // The fns walked are those of `prev` (the caller checks they are still the ones to
        // walk: [`Summaries::walked`]).
        let walked = prev.walked.clone();
        let is_walked = |id: FnId| walked.as_ref().is_none_or(|w| w[graph.index(id)]);
        let cx = FlowCx::new(package, resolver, types, catalog, graph);
        let layers = acyclic_layers(graph);
        let mut now_acyclic = vec![false; graph.len()];
        for &id in layers.iter().flatten() {
            now_acyclic[graph.index(id)] = true;
        }
        if now_acyclic != prev.acyclic {
            return None;
        }
        // A walk of an unchanged fn that read a field text read the old package's.
        if let Some(old) = &prev.field_texts {
            let new = old.updated(&cx, changed);
            if new != *old {
                return None;
            }
            let _ = cx.field_texts.set(new);
            // Kept for the next edit, as they were.
            cx.field_texts_asked.store(true, Ordering::Relaxed);
        }
        let Summaries {
            mut summaries,
            mut flows,
            ..
        } = prev;
        let mut differs = vec![false; graph.len()];
        let mut rewalked = 0;
        let reads_change = |id: FnId, differs: &[bool]| {
            changed[id.file as usize]
                || graph
                    .calls(id)
                    .iter()
                    .any(|c| differs[graph.index(c.callee)])
        };
        for layer in &layers {
            let dirty: Vec<FnId> = layer
                .iter()
                .copied()
                .filter(|&id| is_walked(id) && reads_change(id, &differs))
                .collect();
            let walked: Vec<(FnId, FnFlow)> = {
                let done = Settled {
                    summaries: &summaries,
                };
                dirty
                    .par_iter()
                    .map(|&id| (id, flow::walk(&cx, id, &done)))
                    .collect()
            };
            rewalked += walked.len();
            for (id, flow) in walked {
                let (fi, ni) = (id.file as usize, id.index as usize);
                let summary = FnSummary::from_flow(&flow);
                if !summary.identical(&summaries[fi][ni]) {
                    differs[graph.index(id)] = true;
                }
                summaries[fi][ni] = Arc::new(summary);
                flows[fi][ni] = flow;
            }
        }
        // The fns in or above a cycle, a call-graph component at a time, callees' components
        // first: a component whose fns did not change and read no changed summary keeps its
        // summaries; any other settles again from where `compute` starts it (its callees
        // final, its own fns not started), so it takes the very same steps.
        let components = cyclic_components(graph, &now_acyclic);
        rewalked += settle_components(
            &cx,
            &components,
            &mut summaries,
            &mut flows,
            &mut differs,
            |component, differs| {
                // A component is walked whole or not at all (each of its fns calls the others).
                component.first().is_some_and(|&id| is_walked(id))
                    && component.iter().any(|&id| reads_change(id, differs))
            },
        );
        let bound = if flows.iter().flatten().any(|f| !f.text_calls.is_empty()) {
            bound_walks(&cx, &summaries, &flows)
        } else {
            FastMap::default()
        };
        Some(Summaries {
            direct_ops: op_indexes(&flows),
            summaries,
            flows,
            bound,
            acyclic: now_acyclic,
            field_texts: cx.into_field_texts(),
            rewalked,
            walked,
        })
    }

    /// The function's walks with the SQL texts its callers pass to its `&str` (or tuple of
    /// `&str`) parameters, one per distinct set of texts, kept when they decide on a store
    /// read and write: a function that holds no SQL itself
    /// (`match Self::find(queries.0, ..) { None => Self::insert(queries.1, ..) }`) can be a
    /// check-then-act only with its callers' statements. Texts passed through several levels
    /// of helpers are followed.
    pub fn bound_flows(&self, id: FnId) -> &[FnFlow] {
        self.bound.get(&id).map_or(&[], Vec::as_slice)
    }

    /// By [`CallGraph::index`], the fns walked (`None`: all), as given to
    /// [`Summaries::compute_walking`].
    pub(crate) fn walked(&self) -> Option<&[bool]> {
        self.walked.as_deref()
    }

    /// How many fns were walked for these summaries after an edit (every fn, when they were
    /// computed afresh): what a keystroke cost the language server here.
    pub fn rewalked(&self) -> usize {
        self.rewalked
    }

    pub fn summary(&self, id: FnId) -> &FnSummary {
        &self.summaries[id.file as usize][id.index as usize]
    }

    pub fn flow(&self, id: FnId) -> &FnFlow {
        &self.flows[id.file as usize][id.index as usize]
    }

    /// The first of `id`'s own store events (`via` none) whose operation is exactly `span`.
    /// Asked of every expression of a body, so indexed once per fn: a scan of the events
    /// per expression cost a fn calling N helpers N² (each helper's accesses become events).
    pub fn direct_op_at(&self, id: FnId, span: Span) -> Option<&StoreEvent> {
        let flow = self.flow(id);
        let index = self.direct_ops[id.file as usize][id.index as usize].get_or_init(|| {
            let mut ops: Vec<(u32, u32, u32)> = flow
                .store_events
                .iter()
                .enumerate()
                .filter(|(_, ev)| ev.via.is_none())
                .map(|(i, ev)| (ev.span.lo, ev.span.hi, i as u32))
                .collect();
            ops.sort_unstable();
            ops.into()
        });
        let from = index.partition_point(|&(lo, hi, _)| (lo, hi) < (span.lo, span.hi));
        index[from..]
            .iter()
            .take_while(|&&(lo, hi, _)| (lo, hi) == (span.lo, span.hi))
            .map(|&(_, _, i)| &flow.store_events[i as usize])
            .find(|ev| ev.span == span)
    }

    /// Every function of the package.
    pub fn ids(&self) -> impl Iterator<Item = FnId> + '_ {
        self.flows
            .iter()
            .enumerate()
            .flat_map(|(fi, fs)| (0..fs.len()).map(move |ni| FnId::new(fi, ni)))
    }
}

/// Walks every function a call passes SQL text to again with those texts (once per distinct
/// set, and the calls those walks make in turn), keeping the walks that decide on a store
/// read and write something.
fn bound_walks(
    cx: &FlowCx<'_>,
    summaries: &[Vec<Arc<FnSummary>>],
    flows: &[Vec<FnFlow>],
) -> FastMap<FnId, Vec<FnFlow>> {
    let done = Settled { summaries };
    let mut queue: Vec<TextCall> = flows
        .iter()
        .flatten()
        .flat_map(|f| f.text_calls.iter().cloned())
        .collect();
    // Callers in source order first (the queue pops from the end).
    queue.reverse();
    let mut seen: FastSet<TextCall> = FastSet::default();
    let mut per_fn: FastMap<FnId, usize> = FastMap::default();
    let mut out: FastMap<FnId, Vec<FnFlow>> = FastMap::default();
    while let Some(call) = queue.pop() {
        if seen.len() >= MAX_BOUND_WALKS {
            break;
        }
        let n = per_fn.entry(call.callee).or_default();
        if *n >= MAX_BINDINGS_PER_FN || seen.contains(&call) {
            continue;
        }
        *n += 1;
        let flow = flow::walk_bound(cx, call.callee, &done, &call.texts, 0);
        queue.extend(flow.text_calls.iter().rev().cloned());
        let decides = !flow.decisions.is_empty()
            && flow.store_events.iter().any(|e| e.access.access.is_write());
        if decides {
            out.entry(call.callee).or_default().push(flow);
        }
        seen.insert(call);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    InProgress,
    Done,
}

/// How many times the fixed point walks one fn again after its first walk. Code whose
/// summaries settle needs a handful (at most 15 walks of one fn on rust-analyzer's hir-ty).
const MAX_REWALKS: usize = 64;

/// Walks of one fn in a fixed point after which each new summary is joined with the one
/// before ([`FnSummary::grown_from`]) instead of replacing it. Facts past a bound (eight per
/// value) are dropped in the order they come, so in a cycle the kept ones can swap on every
/// walk and never settle: hir-ty's `render_const_scalar` trio swapped two of its eight
/// return facts until [`MAX_REWALKS`], the last 38 ms of its run. Joined, summaries only
/// grow, every list is bounded, and the walks stop. A fn that settles sooner is untouched:
/// on tokio, hir-ty and the fixtures, three fns of hir-ty are walked more often.
const JOIN_AFTER: usize = 16;

/// How deep summaries are computed on demand before a caller settles for a partial one
/// (and is walked again later): bounds the stack, whatever the call depth of the crate.
const MAX_DEPTH: usize = 12;

/// Settles the fixed point of one call-graph component (see [`cyclic_components`]), every
/// fn it calls outside it final.
///
/// Fns are known by their slot (index in `members`) in every table. Walks again go in
/// sweeps over the slots in order, each walking the fns marked since it passed them: a
/// change reaches every reader in the next sweep at the latest, so a component settles in
/// about as many sweeps as its summaries change, whatever its size (a stack of readers to
/// walk again, the most recent first, walked the fns of a complete component of N fns
/// about N/2 times each).
struct Builder<'a, 'c, 's> {
    cx: &'c FlowCx<'a>,
    /// The final summaries of the fns outside the component.
    done: &'s dyn Callees,
    /// The component's fns, sorted: a fn's slot in the tables below is its index here.
    members: &'s [FnId],
    state: RefCell<Vec<State>>,
    summaries: RefCell<Vec<Arc<FnSummary>>>,
    flows: RefCell<Vec<Option<FnFlow>>>,
    /// How many times each fn was walked.
    walks: RefCell<Vec<usize>>,
    /// Per slot, the slots of the fns that read its summary, in the order they first did.
    readers: RefCell<Vec<Vec<usize>>>,
    /// (callee, reader) pairs in `readers`, for constant-time membership.
    read: RefCell<FastSet<(usize, usize)>>,
    /// Per slot, the fns that read its summary before it was final.
    stale: RefCell<Vec<Vec<usize>>>,
    /// The slots being walked, innermost last.
    stack: RefCell<Vec<usize>>,
    /// The slots to walk again.
    dirty: RefCell<BTreeSet<usize>>,
}

/// A per-fn table of `package`, every entry `f()`.
fn shape<T>(package: &Package, f: impl Fn() -> T) -> Vec<Vec<T>> {
    package
        .files
        .iter()
        .map(|file| (0..file.fns.len()).map(|_| f()).collect())
        .collect()
}

impl<'a, 'c, 's> Builder<'a, 'c, 's> {
    fn new(cx: &'c FlowCx<'a>, done: &'s dyn Callees, members: &'s [FnId]) -> Self {
        let n = members.len();
        Builder {
            cx,
            done,
            members,
            state: RefCell::new(vec![State::NotStarted; n]),
            summaries: RefCell::new((0..n).map(|_| Arc::default()).collect()),
            flows: RefCell::new(vec![None; n]),
            walks: RefCell::new(vec![0; n]),
            readers: RefCell::new(vec![Vec::new(); n]),
            read: RefCell::new(FastSet::default()),
            stale: RefCell::new(vec![Vec::new(); n]),
            stack: RefCell::new(Vec::new()),
            dirty: RefCell::new(BTreeSet::new()),
        }
    }

    /// Walks the component's fns in file order, callees on demand, then walks again until
    /// no summary changes (a cycle, or a read of a summary not final yet); gives each fn's
    /// final summary and flow, and how many walks that took.
    fn settle(self) -> (Vec<(FnId, Arc<FnSummary>, FnFlow)>, usize) {
        for slot in 0..self.members.len() {
            if self.state.borrow()[slot] == State::NotStarted {
                self.compute(slot);
            }
        }
        // Summaries are meant to only grow within bounds, but some parts are not bounded (a
        // recursive pair's instantiated key descriptions grow on every round), so each fn is
        // walked again at most MAX_REWALKS times: a pair that never settles costs that many
        // walks, not the whole budget (rust-analyzer's hir-ty spent 50,000 walks on one
        // such pair).
        let mut rounds = 0;
        let mut cursor = 0;
        loop {
            let next = {
                let dirty = self.dirty.borrow();
                let next = dirty.range(cursor..).next().or_else(|| dirty.first());
                next.copied()
            };
            let Some(slot) = next else {
                break;
            };
            self.dirty.borrow_mut().remove(&slot);
            cursor = slot + 1;
            // Only started fns are queued: their first walk and the walks again so far.
            if self.walks.borrow()[slot] > MAX_REWALKS {
                continue;
            }
            rounds += 1;
            if rounds > 50_000 {
                break;
            }
            self.compute(slot);
        }
        let walks = self.walks.into_inner().iter().sum();
        let summaries = self.summaries.into_inner();
        let flows = self.flows.into_inner();
        let settled = self
            .members
            .iter()
            .zip(summaries)
            .zip(flows)
            .map(|((&id, summary), flow)| (id, summary, flow.unwrap_or_default()))
            .collect();
        (settled, walks)
    }

    /// The slot of `id`, when it is a fn of the component.
    fn slot(&self, id: FnId) -> Option<usize> {
        self.members.binary_search(&id).ok()
    }

    fn compute(&self, slot: usize) {
        let id = self.members[slot];
        let was_done = self.state.borrow()[slot] == State::Done;
        self.state.borrow_mut()[slot] = State::InProgress;
        self.stack.borrow_mut().push(slot);
        let flow = flow::walk(self.cx, id, self);
        self.stack.borrow_mut().pop();
        let walks = {
            let mut walks = self.walks.borrow_mut();
            walks[slot] += 1;
            walks[slot]
        };
        let mut summary = FnSummary::from_flow(&flow);
        if walks > JOIN_AFTER {
            // Only what callers read is joined; the flow (the fn's own findings) stays the
            // last walk's.
            summary = summary.grown_from(&self.summaries.borrow()[slot]);
        }
        let changed = !summary.same(&self.summaries.borrow()[slot]);
        self.summaries.borrow_mut()[slot] = Arc::new(summary);
        self.flows.borrow_mut()[slot] = Some(flow);
        self.state.borrow_mut()[slot] = State::Done;
        let stale = std::mem::take(&mut self.stale.borrow_mut()[slot]);
        if !changed {
            return;
        }
        // Readers that saw an older summary walk again: those that read it before it was
        // final, and, when a final summary changes, everyone who read it.
        let mut dirty = self.dirty.borrow_mut();
        dirty.extend(stale);
        if was_done {
            dirty.extend(self.readers.borrow()[slot].iter().copied());
        }
    }
}

impl Callees for Builder<'_, '_, '_> {
    fn summary(&self, id: FnId) -> Arc<FnSummary> {
        let Some(slot) = self.slot(id) else {
            return self.done.summary(id);
        };
        let reader = self.stack.borrow().last().copied();
        if let Some(r) = reader {
            if self.read.borrow_mut().insert((slot, r)) {
                self.readers.borrow_mut()[slot].push(r);
            }
        }
        let state = self.state.borrow()[slot];
        match state {
            State::Done => {}
            State::NotStarted if self.stack.borrow().len() < MAX_DEPTH => self.compute(slot),
            State::NotStarted | State::InProgress => {
                if let Some(r) = reader {
                    self.stale.borrow_mut()[slot].push(r);
                }
            }
        }
        self.summaries.borrow()[slot].clone()
    }
}

/// Settles every fn. A fn that no call cycle reaches is walked once with its callees' final
/// summaries: a walk reads summaries only of the fn's callees in the call graph, so that is
/// exactly the flow and summary the fixed point ends with. The others settle by component,
/// as [`settle_components`] settles them. Either reads only the final summaries of what it
/// calls, so each starts as soon as those are final, in parallel with everything else that
/// is ready, instead of waiting at a barrier per layer for the slowest task of the layer
/// (hir-ty's largest component, 102 fns). Returns, by [`CallGraph::index`], which fns no
/// call cycle reaches.
fn settle_all(
    cx: &FlowCx<'_>,
    summaries: &mut [Vec<Arc<FnSummary>>],
    flows: &mut [Vec<FnFlow>],
    walked: Option<&[bool]>,
) -> Vec<bool> {
    let graph = cx.graph;
    let mut acyclic = vec![false; graph.len()];
    for &id in acyclic_layers(graph).iter().flatten() {
        acyclic[graph.index(id)] = true;
    }
    let tasks = Tasks::new(graph, &acyclic);
    let ready = Ready {
        graph,
        slots: (0..graph.len()).map(|_| OnceLock::new()).collect(),
    };
    let pending: Vec<AtomicUsize> = tasks.callees.iter().map(|&n| n.into()).collect();
    let run = TaskRun {
        cx,
        tasks: &tasks,
        ready: &ready,
        pending: &pending,
        walked,
    };
    rayon::scope(|scope| {
        for (task, &n) in tasks.callees.iter().enumerate() {
            if n == 0 {
                scope.spawn(move |scope| run.task(scope, task));
            }
        }
    });
    for (i, slot) in ready.slots.into_iter().enumerate() {
        let Some((summary, flow)) = slot.into_inner() else {
            continue;
        };
        let id = tasks.ids[i];
        let (fi, ni) = (id.file as usize, id.index as usize);
        summaries[fi][ni] = summary;
        flows[fi][ni] = flow;
    }
    acyclic
}

/// The fns to settle as tasks: one per fn no call cycle reaches, one per component of the
/// others; a task runs once the tasks of everything it calls are done.
struct Tasks {
    /// Every fn, by [`CallGraph::index`].
    ids: Vec<FnId>,
    /// Each task's fns (a component's sorted, as [`Builder`] wants them).
    members: Vec<Vec<FnId>>,
    /// Each task's count of distinct other tasks it calls.
    callees: Vec<usize>,
    /// Each task's callers among the other tasks, distinct.
    callers: Vec<Vec<usize>>,
    /// The tasks before this one are each one fn no call cycle reaches; the others are
    /// components.
    acyclic: usize,
}

impl Tasks {
    fn new(graph: &CallGraph, acyclic: &[bool]) -> Tasks {
        let ids: Vec<FnId> = graph.ids().collect();
        let mut members: Vec<Vec<FnId>> = ids
            .iter()
            .filter(|&&id| acyclic[graph.index(id)])
            .map(|&id| vec![id])
            .collect();
        let acyclic_tasks = members.len();
        members.extend(cyclic_components(graph, acyclic));
        let mut task_of = vec![0usize; graph.len()];
        for (task, fns) in members.iter().enumerate() {
            for &id in fns {
                task_of[graph.index(id)] = task;
            }
        }
        let mut callers: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
        let mut callees = vec![0usize; members.len()];
        for (task, fns) in members.iter().enumerate() {
            let mut called: Vec<usize> = fns
                .iter()
                .flat_map(|&id| graph.calls(id))
                .map(|c| task_of[graph.index(c.callee)])
                .filter(|&t| t != task)
                .collect();
            called.sort_unstable();
            called.dedup();
            callees[task] = called.len();
            for t in called {
                callers[t].push(task);
            }
        }
        Tasks {
            ids,
            members,
            callees,
            callers,
            acyclic: acyclic_tasks,
        }
    }
}

/// What the tasks of [`settle_all`] share.
#[derive(Clone, Copy)]
struct TaskRun<'r, 'a> {
    cx: &'r FlowCx<'a>,
    tasks: &'r Tasks,
    ready: &'r Ready<'r>,
    /// Per task, how many of the tasks it calls are not done.
    pending: &'r [AtomicUsize],
    /// See [`Summaries::compute_walking`].
    walked: Option<&'r [bool]>,
}

impl<'r> TaskRun<'r, '_> {
    fn task<'s>(self, scope: &rayon::Scope<'s>, task: usize)
    where
        'r: 's,
    {
        let first = self.tasks.members[task][0];
        let skipped = self.walked.is_some_and(|w| !w[self.cx.graph.index(first)]);
        let settled = if skipped {
            // A component is walked whole or not at all: its fns call each other.
            Vec::new()
        } else if task < self.tasks.acyclic {
            let id = first;
            let flow = flow::walk(self.cx, id, self.ready);
            vec![(id, Arc::new(FnSummary::from_flow(&flow)), flow)]
        } else {
            Builder::new(self.cx, self.ready, &self.tasks.members[task])
                .settle()
                .0
        };
        for (id, summary, flow) in settled {
            let _ = self.ready.slots[self.cx.graph.index(id)].set((summary, flow));
        }
        for &caller in &self.tasks.callers[task] {
            // The last callee done starts the caller; its results are set above, before.
            if self.pending[caller].fetch_sub(1, Ordering::AcqRel) == 1 {
                scope.spawn(move |scope| self.task(scope, caller));
            }
        }
    }
}

/// The summaries of the fns whose tasks are done, for a task whose callees' all are.
struct Ready<'g> {
    graph: &'g CallGraph,
    /// By [`CallGraph::index`]: each fn's final summary and flow, once settled.
    slots: Vec<OnceLock<(Arc<FnSummary>, FnFlow)>>,
}

impl Callees for Ready<'_> {
    fn summary(&self, id: FnId) -> Arc<FnSummary> {
        self.slots[self.graph.index(id)]
            .get()
            .map(|(summary, _)| summary.clone())
            .unwrap_or_default()
    }
}

/// Settles the `components` (callees' first, as [`cyclic_components`] gives them) that
/// `needed` selects, given by [`CallGraph::index`] which summaries differ from those in
/// `summaries` before: each from scratch with the final summaries of the fns it calls
/// outside it, those reading no other component's fns in parallel. Marks in `differs` the
/// fns whose summary is not identical to the one it replaces; returns how many fns settled.
fn settle_components(
    cx: &FlowCx<'_>,
    components: &[Vec<FnId>],
    summaries: &mut [Vec<Arc<FnSummary>>],
    flows: &mut [Vec<FnFlow>],
    differs: &mut [bool],
    needed: impl Fn(&[FnId], &[bool]) -> bool,
) -> usize {
    let graph = cx.graph;
    let mut walked = 0;
    for level in component_levels(graph, components) {
        let todo: Vec<&[FnId]> = level
            .iter()
            .map(|&c| components[c].as_slice())
            .filter(|c| needed(c, differs))
            .collect();
        let settled: Vec<Vec<(FnId, Arc<FnSummary>, FnFlow)>> = {
            let done = Settled {
                summaries: &*summaries,
            };
            todo.par_iter()
                .map(|members| Builder::new(cx, &done, members).settle().0)
                .collect()
        };
        for (id, summary, flow) in settled.into_iter().flatten() {
            walked += 1;
            let (fi, ni) = (id.file as usize, id.index as usize);
            if !summary.identical(&summaries[fi][ni]) {
                differs[graph.index(id)] = true;
            }
            summaries[fi][ni] = summary;
            flows[fi][ni] = flow;
        }
    }
    walked
}

/// The `components` (callees' first) in levels: first those that call no fn of another
/// component, then those whose called components are all in earlier levels, and so on.
fn component_levels(graph: &CallGraph, components: &[Vec<FnId>]) -> Vec<Vec<usize>> {
    let mut component_of = vec![usize::MAX; graph.len()];
    for (c, members) in components.iter().enumerate() {
        for &id in members {
            component_of[graph.index(id)] = c;
        }
    }
    let mut level = vec![0usize; components.len()];
    let mut levels: Vec<Vec<usize>> = Vec::new();
    for (c, members) in components.iter().enumerate() {
        let callees = members.iter().flat_map(|&id| graph.calls(id));
        level[c] = callees
            .map(|call| component_of[graph.index(call.callee)])
            .filter(|&d| d != usize::MAX && d != c)
            .map(|d| level[d] + 1)
            .max()
            .unwrap_or(0);
        if levels.len() <= level[c] {
            levels.resize_with(level[c] + 1, Vec::new);
        }
        levels[level[c]].push(c);
    }
    levels
}

/// The fns that no call cycle reaches, in layers: first the fns that call no crate fn, then
/// those whose callees are all in earlier layers, and so on.
fn acyclic_layers(graph: &CallGraph) -> Vec<Vec<FnId>> {
    let ids: Vec<FnId> = graph.ids().collect();
    // Per fn, how many distinct callees are not placed yet; per callee, its callers.
    let mut pending = vec![0usize; ids.len()];
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for &id in &ids {
        let mut callees: Vec<usize> = graph
            .calls(id)
            .iter()
            .map(|c| graph.index(c.callee))
            .collect();
        callees.sort_unstable();
        callees.dedup();
        pending[graph.index(id)] = callees.len();
        for callee in callees {
            callers[callee].push(graph.index(id));
        }
    }
    let mut layer: Vec<FnId> = ids
        .iter()
        .filter(|&&id| pending[graph.index(id)] == 0)
        .copied()
        .collect();
    let mut out = Vec::new();
    while !layer.is_empty() {
        let mut next = Vec::new();
        for &id in &layer {
            for &caller in &callers[graph.index(id)] {
                pending[caller] -= 1;
                if pending[caller] == 0 {
                    next.push(ids[caller]);
                }
            }
        }
        out.push(std::mem::replace(&mut layer, next));
    }
    out
}

/// The fns that [`acyclic_layers`] leaves (`acyclic` false: in or above a call cycle),
/// grouped in strongly connected components of the call graph, each in file order, callees'
/// components first. A walk reads only its callees' summaries, so a component settles from
/// its own fns and the final summaries of the components before it, whatever the others do.
fn cyclic_components(graph: &CallGraph, acyclic: &[bool]) -> Vec<Vec<FnId>> {
    const UNSEEN: usize = usize::MAX;
    let ids: Vec<FnId> = graph.ids().collect();
    let n = ids.len();
    // Tarjan's algorithm, iterative: a call chain is as deep as the crate makes it.
    let mut order = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next_order = 0;
    let mut out = Vec::new();
    let callees = |v: usize| -> Vec<usize> {
        graph
            .calls(ids[v])
            .iter()
            .map(|c| graph.index(c.callee))
            .filter(|&w| !acyclic[w])
            .collect()
    };
    for root in 0..n {
        if acyclic[root] || order[root] != UNSEEN {
            continue;
        }
        // (fn, its callees, how many of them were visited)
        let mut frames: Vec<(usize, Vec<usize>, usize)> = vec![(root, callees(root), 0)];
        order[root] = next_order;
        low[root] = next_order;
        next_order += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(frame) = frames.last_mut() {
            let v = frame.0;
            if let Some(&w) = frame.1.get(frame.2) {
                frame.2 += 1;
                if order[w] == UNSEEN {
                    order[w] = next_order;
                    low[w] = next_order;
                    next_order += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, callees(w), 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(order[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(parent) = frames.last() {
                low[parent.0] = low[parent.0].min(low[v]);
            }
            if low[v] == order[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(ids[w]);
                    if w == v {
                        break;
                    }
                }
                component.sort_unstable();
                out.push(component);
            }
        }
    }
    out
}

/// The summaries of walked fns, for a walk whose callees are all walked.
struct Settled<'s> {
    summaries: &'s [Vec<Arc<FnSummary>>],
}

impl Callees for Settled<'_> {
    fn summary(&self, id: FnId) -> Arc<FnSummary> {
        self.summaries[id.file as usize][id.index as usize].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::testing;

    fn find(package: &Package, name: &str) -> FnId {
        package
            .files
            .iter()
            .enumerate()
            .find_map(|(fi, f)| {
                f.fns
                    .iter()
                    .position(|d| d.name == name)
                    .map(|ni| FnId::new(fi, ni))
            })
            .unwrap_or_else(|| panic!("no fn {name}"))
    }

    #[test]
    fn summaries_follow_helpers_across_modules() {
        let package = testing::package(
            "app",
            &["uuid", "redis"],
            &[
                ("crate", "mod keys; mod store;"),
                (
                    "crate::keys",
                    "use uuid::Uuid as Id;
                     pub fn fresh() -> String { let k = Id::new_v4(); format!(\"job-{k}\") }
                     pub fn wrapped() -> String { super::keys::fresh().to_string() }
                     pub fn stable(order: &Order) -> String { format!(\"order-{}\", order.id) }",
                ),
                (
                    "crate::store",
                    "pub struct Store { conn: redis::aio::ConnectionManager }
                     impl Store {
                         pub async fn is_processed(&self, id: &str) -> bool {
                             let mut conn = self.conn.clone();
                             conn.exists(format!(\"done:{id}\")).await.unwrap_or(false)
                         }
                         pub async fn mark(&self, id: &str) {
                             let mut conn = self.conn.clone();
                             let _: () = conn.set(format!(\"done:{}\", id), 1).await.unwrap();
                         }
                         pub async fn claim(&self, key: &str) -> bool {
                             let mut conn = self.conn.clone();
                             conn.set_nx(key, 1).await.unwrap_or(false)
                         }
                     }",
                ),
            ],
        );
        let analysis = Analysis::new(&package);
        let s = analysis.summaries(&package);
        let fresh = s.summary(find(&package, "fresh"));
        assert_eq!(fresh.ret_nondet.len(), 1);
        assert_eq!(fresh.ret_nondet[0].0.what, "Id::new_v4()");
        let wrapped = s.summary(find(&package, "wrapped"));
        assert_eq!(wrapped.ret_nondet.len(), 1, "through `super::keys::fresh`");
        let stable = s.summary(find(&package, "stable"));
        assert!(stable.ret_nondet.is_empty());
        assert_eq!(stable.ret_params, vec![(0, Some("id".to_owned()))]);

        let check = s.summary(find(&package, "is_processed"));
        assert!(check.is_check());
        let key = check.ret_access.as_ref().unwrap().key.as_ref().unwrap();
        let mark = s.summary(find(&package, "mark"));
        assert_eq!(mark.accesses.len(), 1);
        assert_eq!(mark.accesses[0].access, Access::Write);
        assert!(key.same_key(mark.accesses[0].key.as_ref().unwrap()));
        assert!(!mark.is_guard());

        let claim = s.summary(find(&package, "claim"));
        assert!(claim.is_guard());
        assert_eq!(claim.param_sinks.len(), 1);
        assert_eq!(claim.param_sinks[0].param, 0);
        assert!(matches!(claim.param_sinks[0].sink, SinkKind::GuardKey(_)));
    }

    /// SQL handed down as a tuple of `&str` through a function that decides and on to the
    /// helpers that run it: the deciding function's walk with its caller's texts holds the
    /// check and the write; its own walk holds neither.
    #[test]
    fn texts_passed_as_a_tuple_reach_the_deciding_function() {
        let package = testing::package(
            "app",
            &["sqlx"],
            &[(
                "crate",
                "async fn find(q: &str, pool: &sqlx::PgPool, h: &str) -> Option<i64> {
                     sqlx::query_scalar(q).bind(h).fetch_one(pool).await.ok()
                 }
                 async fn insert(q: &str, pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     sqlx::query_scalar(q).bind(h).fetch_one(pool).await
                 }
                 async fn decide(queries: (&str, &str), pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     match find(queries.0, pool, h).await {
                         Some(id) => Ok(id),
                         None => insert(queries.1, pool, h).await,
                     }
                 }
                 async fn shadowed(queries: (&str, &str), pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     let queries = (h, h);
                     match find(queries.0, pool, h).await {
                         Some(id) => Ok(id),
                         None => insert(queries.1, pool, h).await,
                     }
                 }
                 async fn decide_apart(find_q: &str, insert_q: &str, pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     match find(find_q, pool, h).await {
                         Some(id) => Ok(id),
                         None => insert(insert_q, pool, h).await,
                     }
                 }
                 async fn forward(queries: (&str, &str), pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     decide_apart(queries.0, queries.1, pool, h).await
                 }
                 const FIND: &str = \"SELECT id FROM jobs WHERE uniq_hash = $1\";
                 async fn caller(pool: &sqlx::PgPool, h: &str) -> sqlx::Result<i64> {
                     let queries = (FIND, \"INSERT INTO jobs (uniq_hash) VALUES ($1) RETURNING id\");
                     decide(queries, pool, h).await?;
                     forward(queries, pool, h).await?;
                     shadowed((FIND, FIND), pool, h).await
                 }",
            )],
        );
        let analysis = Analysis::new(&package);
        let s = analysis.summaries(&package);
        let decide = find(&package, "decide");
        let part = |p: &str| TextParam {
            param: 0,
            part: Some(p.to_owned()),
        };
        assert_eq!(s.summary(decide).text_params, [part("0"), part("1")]);
        assert!(s.flow(decide).store_events.is_empty());
        let bound = s.bound_flows(decide);
        assert_eq!(bound.len(), 1);
        let accesses: Vec<(Access, Option<&str>)> = bound[0]
            .store_events
            .iter()
            .map(|e| (e.access.access, e.access.table.as_deref()))
            .collect();
        assert_eq!(
            accesses,
            [(Access::Read, Some("jobs")), (Access::Write, Some("jobs"))]
        );
        assert_eq!(bound[0].decisions.len(), 1);
        // Helpers that only run the text decide nothing: not kept.
        assert!(s.bound_flows(find(&package, "insert")).is_empty());
        // A local named like the parameter is another tuple: no text, no walk kept.
        assert!(s.bound_flows(find(&package, "shadowed")).is_empty());
        // Three levels: `caller` -> `forward(queries)` -> `decide_apart(queries.0, queries.1)`
        // -> the helpers; the function that decides is walked with `caller`'s texts.
        let apart = s.bound_flows(find(&package, "decide_apart"));
        assert_eq!(apart.len(), 1);
        assert_eq!(apart[0].decisions.len(), 1);
        assert_eq!(apart[0].store_events.len(), 2);
    }

    #[test]
    fn recursion_reaches_a_fixed_point() {
        let package = testing::package(
            "app",
            &["uuid"],
            &[(
                "crate",
                "fn a(n: u32) -> String { if n == 0 { b(n) } else { a(n - 1) } }
                 fn b(n: u32) -> String { if n > 9 { a(n) } else { uuid::Uuid::new_v4().to_string() } }
                 fn c() -> String { a(3) }",
            )],
        );
        let analysis = Analysis::new(&package);
        let s = analysis.summaries(&package);
        for name in ["a", "b", "c"] {
            assert_eq!(
                s.summary(find(&package, name)).ret_nondet.len(),
                1,
                "{name}"
            );
        }
    }

    #[test]
    fn facts_dropped_at_a_bound_do_not_keep_a_cycle_walking() {
        // Each fn returns its callee's facts first, then its own nine (one over the bound):
        // the two rotations make the eight kept shift on every walk, for ever unless joined.
        let body = "if c { return CALLEE(y, z, x, c); }
                    (x.a, x.b, x.c, y.a, y.b, y.c, z.a, z.b, z.c)";
        let sig = "(x: S, y: S, z: S, c: bool) -> (u8, u8, u8, u8, u8, u8, u8, u8, u8)";
        let src = format!(
            "struct S {{ a: u8, b: u8, c: u8 }}
             fn f{sig} {{ {} }}
             fn g{sig} {{ {} }}",
            body.replace("CALLEE", "g"),
            body.replace("CALLEE", "f"),
        );
        let package = testing::package("app", &[], &[("crate", &src)]);
        let analysis = Analysis::new(&package);
        let graph = analysis.call_graph(&package);
        let catalog = Catalog::default();
        let cx = FlowCx::new(
            &package,
            &analysis.resolver,
            &analysis.types,
            &catalog,
            graph,
        );
        let members: Vec<FnId> = graph.ids().collect();
        let nothing_else = shape(&package, || Arc::new(FnSummary::default()));
        let done = Settled {
            summaries: &nothing_else,
        };
        let (settled, walks) = Builder::new(&cx, &done, &members).settle();
        // Settled, not stopped by the cap: without the join each fn is walked
        // MAX_REWALKS + 1 times (130 walks); with it, 33.
        assert!(walks < 2 * MAX_REWALKS, "{walks} walks");
        for (_, summary, _) in settled {
            assert_eq!(summary.ret_params.len(), flow::MAX_FACTS, "{summary:?}");
        }
    }
}
