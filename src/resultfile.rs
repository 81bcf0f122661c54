//! Reading result files (interim version; replaced by the full reader).

use crate::record::{ErrorRecord, Record, RunRecord, Sample, Summary};

#[derive(Debug, Default)]
pub struct ResultFile {
    pub run: Option<RunRecord>,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
    pub summary: Option<Summary>,
    pub torn_tail: bool,
    pub valid_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ResultFileError {
    #[error("{0}")]
    Bad(String),
}

pub fn parse(text: &str) -> Result<ResultFile, ResultFileError> {
    let mut f = ResultFile::default();
    let mut offset = 0u64;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let complete = line.ends_with('\n');
        match serde_json::from_str::<Record>(line.trim_end()) {
            Ok(Record::Run(r)) => f.run = Some(r),
            Ok(Record::Sample(s)) => f.samples.push(*s),
            Ok(Record::Error(e)) => f.errors.push(e),
            Ok(Record::Summary(s)) => f.summary = Some(s),
            Err(_) if !complete => {
                f.torn_tail = true;
                break;
            }
            Err(e) => return Err(ResultFileError::Bad(format!("line {}: {e}", i + 1))),
        }
        offset += line.len() as u64;
    }
    f.valid_bytes = offset;
    Ok(f)
}

pub fn read(path: &std::path::Path) -> Result<ResultFile, ResultFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ResultFileError::Bad(format!("{}: {e}", path.display())))?;
    parse(&text)
}
