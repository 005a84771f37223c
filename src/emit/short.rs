//! `path:line:col: warning[idem::lint]: message`, one line per finding.

use super::{level_word, relative_path, snippet::escape, Input};
use std::io::{self, Write};

pub fn emit(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    for f in &input.report.findings {
        let d = &f.diag;
        let source = input.source(f, d.span.file);
        let pos = source.position(d.span.lo as usize);
        writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            escape(&relative_path(&source.path, input.cwd)),
            pos.line,
            pos.column,
            level_word(d.level),
            d.lint.code(),
            escape(&d.message)
        )?;
    }
    Ok(())
}
