//! What the `check` command keeps of each verdict as it is made: the
//! verdict settled (suppressions, placeholders), counted, trimmed (`-q`),
//! and spooled if a report will show it. Nothing else stays, so the
//! command's memory follows its input, not its verdicts.

use std::io;

use super::spool::{Spool, SpoolWriter};
use super::{ObjectReport, Sink, Spooled, Tally};

/// A verdict changed in place.
pub type Step<'a> = Box<dyn FnMut(&mut ObjectReport) + 'a>;

pub struct Kept<'a> {
    /// Applied before counting: the suppressions and placeholders, which
    /// change what is denied.
    settle: Step<'a>,
    /// Applied after counting: `-q` trims what is shown, not what is
    /// counted.
    trim: Step<'a>,
    /// Whether an output lists every object (JSON, JUnit); otherwise only
    /// those with something to say are spooled.
    every: bool,
    tally: Tally,
    spool: SpoolWriter,
    /// The first error writing the spool: the report would be incomplete.
    error: Option<io::Error>,
}

impl<'a> Kept<'a> {
    pub fn new(every: bool, settle: Step<'a>, trim: Step<'a>) -> Self {
        Kept {
            settle,
            trim,
            every,
            tally: Tally::default(),
            spool: SpoolWriter::new(),
            error: None,
        }
    }

    /// The verdicts spooled and their tally, or why the spool failed.
    pub fn finish(self) -> io::Result<Spooled> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let spool: Spool = self.spool.finish()?;
        Ok(Spooled {
            spool,
            tally: self.tally,
        })
    }
}

impl Sink for Kept<'_> {
    fn take(&mut self, mut verdict: ObjectReport) {
        (self.settle)(&mut verdict);
        self.tally.add(&verdict);
        (self.trim)(&mut verdict);
        let shown = !verdict.findings.is_empty() || verdict.unjudged_tolerations().is_some();
        if (self.every || shown)
            && self.error.is_none()
            && let Err(e) = self.spool.write(&verdict)
        {
            self.error = Some(e);
        }
    }
}
