//! Logging and tracing macros (`log`, `tracing`, the standard printing macros): they record
//! and go on. Their input often does not parse as expressions (`warn!(id = %msg.id, "..")`),
//! and an analysis that does not read a macro's input assumes it may wait or leave; these
//! do neither.

/// The last segment of a logging macro's path: `tracing::warn!`, `log::error!`, `eprintln!`.
pub const LOG_MACROS: &[&str] = &[
    "trace", "debug", "info", "warn", "error", "event", "log", "println", "eprintln", "print",
    "eprint", "dbg",
];

/// Whether the macro named `last` (its path's last segment) only logs.
pub fn is_log_macro(last: &str) -> bool {
    LOG_MACROS.contains(&last)
}
