//! `cargo idem-lint`: parse arguments, run, map the outcome to an exit code
//! (0 clean, 1 a finding at deny, 2 a usage, config or I/O error).

use cargo_idem_lint::{cli::Args, run, stderr_line, Outcome};
use std::process::ExitCode;

// Parsing and the analysis allocate many small nodes on many short-lived threads; mimalloc
// measured faster than the system allocator on tokio's sources (see the commit).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_panics();
    let args = match Args::parse_from_env(std::env::args_os()) {
        Ok(args) => args,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                // `print` reports a failed write instead of panicking; nothing more to do.
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // clap's message spans several lines (usage, tip); its first line says it all.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            stderr_line(&format!(
                "{} (see `cargo idem-lint --help`)",
                first.trim_end()
            ));
            return ExitCode::from(2);
        }
    };
    let Ok(result) = std::panic::catch_unwind(|| run(&args)) else {
        // The hook already printed the one-line message.
        return ExitCode::from(2);
    };
    match result {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::Denied) => ExitCode::from(1),
        Err(e) => {
            // `{:#}` joins the context chain on one line: "could not read `x`: not found".
            stderr_line(&format!("error: {}", format!("{e:#}").replace('\n', " ")));
            ExitCode::from(2)
        }
    }
}

/// A panic while parsing a file is reported as that file's finding, so its message is not
/// printed; any other panic becomes one `error:` line and exit code 2.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        if cargo_idem_lint::parse::parsing() {
            return;
        }
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_string());
        stderr_line(&format!(
            "error: internal error: {}",
            msg.replace('\n', " ")
        ));
    }));
}
