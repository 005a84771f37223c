//! Command-line arguments, in cargo's own spellings.

use crate::levels::LevelFlag;
use anyhow::{anyhow, Result};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use idem_lints::Level;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MessageFormat {
    /// rustc-style, with source snippets
    Human,
    /// one line per finding: `path:line:col: level[code]: message`
    Short,
    /// the JSON lines `cargo check --message-format=json` prints
    Json,
    /// `json` with the color escape codes of human output in `rendered`, as cargo's
    #[value(name = "json-diagnostic-rendered-ansi")]
    JsonDiagnosticRenderedAnsi,
    /// SARIF 2.1.0, for code scanning
    Sarif,
    /// GitHub Actions workflow commands (`::warning file=..::message`), one per finding
    Github,
}

impl MessageFormat {
    /// One of the JSON lines formats cargo reads.
    pub fn is_json(self) -> bool {
        matches!(self, Self::Json | Self::JsonDiagnosticRenderedAnsi)
    }
}

/// The cargo command `--with-check` runs before the lints (for rust-analyzer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckKind {
    Check,
    Clippy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// Finds idempotency mistakes in a crate or workspace by reading its sources (nothing is
/// compiled).
#[derive(Debug, Clone, Parser)]
#[command(name = "cargo idem-lint", bin_name = "cargo idem-lint", version)]
pub struct Args {
    /// A directory with a Cargo.toml (package or workspace), or a plain directory of .rs files.
    /// Default: the package or workspace around the current directory.
    pub path: Option<PathBuf>,

    /// More `.rs` files to report on (as `--only`), after PATH: `cargo idem-lint a.rs b.rs`,
    /// as a pre-commit hook passes them.
    #[arg(value_name = "FILE", hide = true)]
    pub more_paths: Vec<PathBuf>,

    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH", conflicts_with = "path")]
    pub manifest_path: Option<PathBuf>,

    /// Package to lint (repeatable).
    #[arg(short = 'p', long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,

    /// Lint every member of the workspace.
    #[arg(long, conflicts_with = "packages")]
    pub workspace: bool,

    /// With `--workspace`: leave this member out (repeatable; `name` or `name@version`).
    #[arg(long, value_name = "SPEC")]
    pub exclude: Vec<String>,

    /// Print how many findings each lint and each file has instead of the findings (one
    /// JSON object with `--message-format json`).
    #[arg(long)]
    pub statistics: bool,

    /// Also name on stderr, once each, the dependencies no model in the catalog covers: calls
    /// into them are opaque, so a store, queue or payment client among them hides its reads,
    /// claims and effects (see the README's list of modelled crates).
    #[arg(long, short = 'v')]
    pub verbose: bool,

    #[arg(long, value_enum, value_name = "FMT", default_value = "human")]
    pub message_format: MessageFormat,

    /// Color of human output. Default: `CARGO_TERM_COLOR`, else `auto` (on a terminal,
    /// unless `NO_COLOR` is set).
    #[arg(long, value_enum, value_name = "WHEN")]
    pub color: Option<ColorChoice>,

    /// Set LINT to allow (repeatable).
    #[arg(short = 'A', long = "allow", value_name = "LINT")]
    pub allow: Vec<String>,

    /// Set LINT to warn (repeatable).
    #[arg(short = 'W', long = "warn", value_name = "LINT")]
    pub warn: Vec<String>,

    /// Set LINT to deny (repeatable); `-D warnings` makes every warning an error.
    #[arg(short = 'D', long = "deny", value_name = "LINT")]
    pub deny: Vec<String>,

    /// Time budget for parsing one file, in milliseconds (default 10000, or the config's
    /// smaller `file-timeout-ms`). A file over budget is reported as `idem::parse_error` and
    /// skipped.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub file_timeout_ms: Option<u64>,

    /// Larger files are reported as `idem::parse_error` and not read (default: the built-in
    /// cap, or the config's `max-file-bytes` when smaller).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: Option<u64>,

    /// Read modules whose path resolves outside the workspace root (`#[path = "../.."]` in a
    /// monorepo). Only a flag: a checkout cannot grant itself this.
    #[arg(long)]
    pub allow_outside_workspace: bool,

    /// Ignore the checkout's configuration (`idem-lint.toml`, `[workspace.metadata.idem-lint]`,
    /// `[package.metadata.idem-lint]`): the lints' defaults and the command line decide, as
    /// a CI gate on pull requests may want (ruff's `--isolated`).
    #[arg(long)]
    pub isolated: bool,

    /// Time budget for the analysis of one package, in milliseconds (default 300000). Past
    /// it the analysis stops, a warning says so, and the findings found so far are reported.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub package_timeout_ms: Option<u64>,

    /// Time budget for the analysis of the whole run, in milliseconds from its start
    /// (default 1800000). Past it every analysis stops, a warning names each package, and the
    /// findings found so far are reported.
    #[arg(long, value_name = "MS", default_value_t = 1_800_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_timeout_ms: u64,

    /// Memory budget for the analysis, in MiB of the process's resident memory (default
    /// 4096; Linux only). Past it every analysis stops, a warning names each package, and
    /// the findings found so far are reported.
    #[arg(long, value_name = "MIB", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_analysis_memory: u64,

    /// Do not read or write the re-run cache (`target/idem-lint/`, or `$IDEM_LINT_CACHE_DIR`).
    #[arg(long)]
    pub no_cache: bool,

    /// Where the lint pages are published, for the editor's links and SARIF's `helpUri`:
    /// a URL with `{lint}` for the lint's name (default: `IDEM_LINT_DOCS_URL`, else
    /// `docs/lints/` in the package's repository).
    #[arg(long, value_name = "URL")]
    pub docs_url: Option<String>,

    /// Print the documentation of LINT and exit.
    #[arg(long, value_name = "LINT")]
    pub explain: Option<String>,

    /// List every lint with its default and effective level, and exit.
    #[arg(long)]
    pub list: bool,

    /// Report only the findings in these files; the whole package is analysed as usual.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub only: Vec<PathBuf>,

    /// Report only the findings in files changed since GIT_REF (`git diff GIT_REF`, plus
    /// untracked files).
    #[arg(long, value_name = "GIT_REF")]
    pub changed_since: Option<String>,

    /// Report only findings not recorded in this baseline file.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,

    /// Record today's findings in FILE (then report none of them).
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    pub write_baseline: Option<PathBuf>,

    /// Drop from the baseline FILE the entries that match no finding any more, record
    /// nothing new, and report as `--baseline FILE` does.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["baseline", "write_baseline"])]
    pub prune_baseline: Option<PathBuf>,

    /// With `--baseline`: entries that match no finding any more (fixed or changed code)
    /// fail the run (exit code 1).
    #[arg(long)]
    pub strict_baseline: bool,

    /// The directory SARIF URIs and GitHub annotations are relative to (default: the
    /// repository root, the closest directory above the workspace holding `.git`).
    #[arg(long, value_name = "DIR")]
    pub sarif_root: Option<PathBuf>,

    /// Apply the machine-applicable suggestions in place.
    #[arg(long)]
    pub fix: bool,

    /// With `--fix` or `--diff`: also apply the suggestions that may be incorrect.
    #[arg(long)]
    pub unsafe_fixes: bool,

    /// Print what `--fix` would change as a unified diff, and change nothing.
    #[arg(long, conflicts_with = "fix")]
    pub diff: bool,

    /// Run `cargo check` or `cargo clippy` first and stream its JSON lines, then ours, then
    /// one `build-finished` (for rust-analyzer's `check.overrideCommand`). Arguments this
    /// command does not know are passed to cargo.
    #[arg(long, value_enum, value_name = "CHECK")]
    pub with_check: Option<CheckKind>,

    /// The arguments `--with-check` passes to cargo.
    #[arg(skip)]
    pub check_args: Vec<OsString>,

    /// The -A/-W/-D flags in the order given (later ones win).
    #[arg(skip)]
    pub level_flags: Vec<LevelFlag>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Run the language server on stdin/stdout (diagnostics, hover, quick fixes in editors).
    /// The level flags and the time budget given before `lsp` apply; a PATH is an extra
    /// workspace folder.
    Lsp(LspArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct LspArgs {
    /// How long a change of a buffer waits for the next one before it is linted.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub debounce_ms: u64,
}

impl Args {
    /// Parses `argv` (program name first). Cargo runs `cargo-idem-lint idem-lint ARGS`
    /// for `cargo idem-lint ARGS`, so a leading `idem-lint` is dropped.
    pub fn parse_from_env<I: IntoIterator<Item = OsString>>(argv: I) -> clap::error::Result<Args> {
        let mut argv: Vec<OsString> = argv.into_iter().collect();
        if argv.get(1).is_some_and(|a| a == "idem-lint") {
            argv.remove(1);
        }
        let mut check_args = Vec::new();
        if argv
            .iter()
            .any(|a| a.to_string_lossy().starts_with("--with-check"))
        {
            (argv, check_args) = crate::with_check::split_args(&Args::command(), argv);
        }
        let matches = Args::command().try_get_matches_from(argv)?;
        let mut args = Args::from_arg_matches(&matches)?;
        args.check_args = check_args;
        args.level_flags = ordered_level_flags(&matches);
        Ok(args)
    }
}

/// Merges the three level options into one list ordered by position on the command line,
/// because precedence follows the order given (`-D x -A x` allows `x`).
fn ordered_level_flags(matches: &ArgMatches) -> Vec<LevelFlag> {
    let mut flags: Vec<(usize, LevelFlag)> = Vec::new();
    for (id, level) in [
        ("allow", Level::Allow),
        ("warn", Level::Warn),
        ("deny", Level::Deny),
    ] {
        let (Some(values), Some(indices)) =
            (matches.get_many::<String>(id), matches.indices_of(id))
        else {
            continue;
        };
        for (name, index) in values.zip(indices) {
            flags.push((
                index,
                LevelFlag {
                    level,
                    name: name.clone(),
                },
            ));
        }
    }
    flags.sort_by_key(|(i, _)| *i);
    flags.into_iter().map(|(_, f)| f).collect()
}

/// `--explain` takes a lint name with or without `idem::`.
pub fn explain_target(name: &str) -> Result<&'static idem_lints::Lint> {
    idem_lints::lints::find(name)
        .ok_or_else(|| anyhow!("no lint named `{name}` (see `cargo idem-lint --list`)"))
}
