//! The verdicts a report lists, written away as they are made and read
//! back, in order, by each output format: `check`'s memory does not grow
//! with the verdicts of 100,000 objects.
//!
//! Each verdict is a line of JSON. The first few MiB stay in memory (a
//! repository's findings, in the common case, never touch the disk); past
//! that they go to an anonymous temporary file, which the system removes
//! however the run ends. Where no temporary file can be made, they stay in
//! memory, as before spooling.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};

use super::ObjectReport;

/// How much of the spool stays in memory before it goes to a file.
const IN_MEMORY: usize = 4 << 20;

/// A spool being written.
pub struct SpoolWriter {
    memory: Vec<u8>,
    file: Option<BufWriter<File>>,
    len: usize,
}

impl Default for SpoolWriter {
    fn default() -> Self {
        SpoolWriter::new()
    }
}

impl SpoolWriter {
    pub fn new() -> Self {
        SpoolWriter {
            memory: Vec::new(),
            file: None,
            len: 0,
        }
    }

    /// Appends a verdict.
    pub fn write(&mut self, verdict: &ObjectReport) -> io::Result<()> {
        self.len += 1;
        match &mut self.file {
            Some(file) => {
                serde_json::to_writer(&mut *file, verdict)?;
                file.write_all(b"\n")
            }
            None => {
                serde_json::to_writer(&mut self.memory, verdict)?;
                self.memory.push(b'\n');
                if self.memory.len() > IN_MEMORY
                    && let Ok(file) = tempfile::tempfile()
                {
                    let mut file = BufWriter::new(file);
                    file.write_all(&self.memory)?;
                    self.memory = Vec::new();
                    self.file = Some(file);
                }
                Ok(())
            }
        }
    }

    /// The spool, to be read.
    pub fn finish(self) -> io::Result<Spool> {
        let file = match self.file {
            Some(file) => Some(file.into_inner().map_err(io::IntoInnerError::into_error)?),
            None => None,
        };
        Ok(Spool {
            memory: self.memory,
            file,
            len: self.len,
        })
    }
}

/// A spool written, read as often as the formats need.
#[derive(Debug)]
pub struct Spool {
    memory: Vec<u8>,
    file: Option<File>,
    len: usize,
}

impl Spool {
    /// How many verdicts it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The verdicts, in the order they were written. Readers are
    /// independent: each keeps its own place in the file.
    pub fn read(&self) -> impl Iterator<Item = io::Result<ObjectReport>> + '_ {
        let source: Box<dyn Read + '_> = match &self.file {
            Some(file) => Box::new(SpoolReader { file, offset: 0 }),
            None => Box::new(self.memory.as_slice()),
        };
        BufReader::with_capacity(64 << 10, source)
            .lines()
            .map(|line| serde_json::from_str(&line?).map_err(io::Error::other))
    }
}

/// A reader of a file from its start, by position: readers of one file do
/// not move each other's place.
struct SpoolReader<'f> {
    file: &'f File,
    offset: u64,
}

impl Read for SpoolReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = read_at(self.file, buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Finding, Judgement, ObjectId, Severity};
    use crate::yaml::Position;

    fn verdict(i: usize) -> ObjectReport {
        ObjectReport {
            source: i % 3,
            id: ObjectId {
                kind: "Pod".into(),
                namespace: Some(format!("ns-{i}")),
                name: format!("pod-{i}\n\"quoted\""),
            },
            api_version: Some("v1".into()),
            uid: i.is_multiple_of(2).then(|| format!("uid-{i}")),
            position: Position {
                line: i as u64 + 1,
                column: 3,
            },
            judgement: if i.is_multiple_of(2) {
                Judgement::Judged
            } else {
                Judgement::Skipped {
                    reason: "a kind draguard does not judge".into(),
                    holds_tolerations: true,
                }
            },
            ignore: vec!["all".into()],
            allowed: !i.is_multiple_of(5),
            seconds: 1.0 / (i as f64 + 3.0),
            findings: vec![Finding {
                severity: Severity::Error,
                field: Some("spec.tolerations[0].effect".into()),
                reason: "FieldValueNotSupported".into(),
                message: "Unsupported value: \"Bogus\"".into(),
                position: Position { line: 9, column: 7 },
                concept: i.is_multiple_of(4).then_some(crate::verdict::Concept::Quota),
                policy: i.is_multiple_of(4).then(|| "gpu-quota".to_owned()),
            }],
        }
    }

    fn read_all(spool: &Spool) -> Vec<ObjectReport> {
        spool.read().collect::<io::Result<_>>().expect("reads back")
    }

    #[test]
    fn verdicts_read_back_as_written_in_memory_and_from_a_file() {
        for count in [0, 3, 40_000] {
            let written: Vec<ObjectReport> = (0..count).map(verdict).collect();
            let mut writer = SpoolWriter::new();
            for v in &written {
                writer.write(v).expect("writes");
            }
            let spool = writer.finish().expect("finishes");
            assert_eq!(spool.len(), count);
            assert_eq!(
                spool.file.is_some(),
                count == 40_000,
                "40,000 verdicts pass {IN_MEMORY} bytes"
            );
            let (a, b) = (read_all(&spool), read_all(&spool));
            assert_eq!(a.len(), count);
            for (got, want) in a.iter().zip(&written) {
                assert_eq!(format!("{got:?}"), format!("{want:?}"));
            }
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "a second reader starts from the first verdict"
            );
        }
    }

    #[test]
    fn two_readers_of_one_file_keep_their_own_place() {
        let mut writer = SpoolWriter::new();
        for i in 0..40_000 {
            writer.write(&verdict(i)).expect("writes");
        }
        let spool = writer.finish().expect("finishes");
        let mut first = spool.read();
        let mut second = spool.read();
        let a = first.next().and_then(Result::ok).map(|v| v.position.line);
        let b = second.next().and_then(Result::ok).map(|v| v.position.line);
        let a2 = first.next().and_then(Result::ok).map(|v| v.position.line);
        assert_eq!((a, b, a2), (Some(1), Some(1), Some(2)));
    }
}
