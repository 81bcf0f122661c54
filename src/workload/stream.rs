//! Content handed out to prompts span by span: a cursor over the documents' units (token ids
//! or text pieces) that never gives the same span twice in a run until the content runs
//! out, then wraps and says so once.

use crate::record::DocSpan;

/// Why a take could not be served yet.
#[derive(Debug, PartialEq)]
pub enum Shortfall {
    /// Document `i` must be turned into units first.
    Unloaded(usize),
    /// The whole content holds fewer units than one prompt needs.
    TooSmall { have: usize, need: usize },
}

/// One take: the units, where they came from, and whether the cursor wrapped to serve it.
pub struct Taken<T> {
    pub units: Vec<T>,
    pub spans: Vec<DocSpan>,
    pub wrapped: bool,
}

/// Documents as units, loaded lazily, with a cursor.
pub struct Spans<T> {
    names: Vec<String>,
    units: Vec<Option<Vec<T>>>,
    separator: Vec<T>,
    /// Every take starts at a document's start (dataset entries); else it goes on where the
    /// last one stopped (a corpus is one long text).
    align: bool,
    doc: usize,
    offset: usize,
}

impl<T: Clone> Spans<T> {
    pub fn new(names: Vec<String>, separator: Vec<T>, align: bool) -> Self {
        let units = names.iter().map(|_| None).collect();
        Spans {
            names,
            units,
            separator,
            align,
            doc: 0,
            offset: 0,
        }
    }

    pub fn load(&mut self, doc: usize, units: Vec<T>) {
        self.units[doc] = Some(units);
    }

    /// Units loaded so far, and the first document not loaded yet.
    pub fn loaded(&self) -> (usize, Option<usize>) {
        let have = self.units.iter().flatten().map(Vec::len).sum();
        (have, self.units.iter().position(Option::is_none))
    }

    /// Units of every document, when all are loaded.
    fn total(&self) -> Option<usize> {
        self.units
            .iter()
            .map(|u| u.as_ref().map(Vec::len))
            .sum::<Option<usize>>()
    }

    /// The next `n` units (documents joined by the separator), or what must happen first.
    /// The cursor moves only when the take succeeds.
    pub fn take(&mut self, n: usize) -> Result<Taken<T>, Shortfall> {
        let count = self.names.len();
        let (mut doc, mut offset) = (self.doc, self.offset);
        if self.align && offset > 0 {
            (doc, offset) = (doc + 1, 0);
        }
        let mut out: Vec<T> = Vec::with_capacity(n);
        let mut spans = Vec::new();
        let mut wrapped = false;
        // Documents passed since anything was taken: a full round with nothing means empty.
        let mut idle = 0;
        while out.len() < n {
            if doc >= count {
                if let Some(have) = self.total()
                    && have < n
                {
                    return Err(Shortfall::TooSmall { have, need: n });
                }
                (doc, offset, wrapped) = (0, 0, true);
            }
            let units = self.units[doc].as_ref().ok_or(Shortfall::Unloaded(doc))?;
            let left = units.len().saturating_sub(offset);
            if left == 0 {
                idle += 1;
                if idle > count {
                    return Err(Shortfall::TooSmall { have: 0, need: n });
                }
                (doc, offset) = (doc + 1, 0);
                continue;
            }
            idle = 0;
            if !out.is_empty() {
                let room = n - out.len();
                out.extend(self.separator.iter().take(room).cloned());
                if out.len() == n {
                    break;
                }
            }
            let k = left.min(n - out.len());
            out.extend_from_slice(&units[offset..offset + k]);
            spans.push(DocSpan {
                doc: self.names[doc].clone(),
                start: offset as u64,
                end: (offset + k) as u64,
            });
            offset += k;
            if offset == units.len() {
                (doc, offset) = (doc + 1, 0);
            }
        }
        (self.doc, self.offset) = (doc, offset);
        Ok(Taken {
            units: out,
            spans,
            wrapped,
        })
    }
}

/// Text cut into pieces: each run of non-space characters with the whitespace after it, so
/// the pieces joined give the text back exactly (code keeps its lines and indentation).
pub fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = true;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if !space && in_space && i > start && !text[start..i].trim().is_empty() {
            out.push(text[start..i].to_string());
            start = i;
        }
        in_space = space;
    }
    if start < text.len() {
        out.push(text[start..].to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(docs: &[&[u32]], align: bool) -> Spans<u32> {
        let names = (0..docs.len()).map(|i| format!("d{i}")).collect();
        let mut s = Spans::new(names, vec![0], align);
        for (i, d) in docs.iter().enumerate() {
            s.load(i, d.to_vec());
        }
        s
    }

    #[test]
    fn takes_never_overlap_until_the_content_wraps() {
        let mut s = spans(&[&[1, 2, 3, 4], &[5, 6, 7]], false);
        let a = s.take(3).unwrap();
        assert_eq!(a.units, vec![1, 2, 3]);
        let b = s.take(3).unwrap();
        assert_eq!(b.units, vec![4, 0, 5], "a separator joins two documents");
        assert_eq!(b.spans.len(), 2);
        assert_eq!((b.spans[1].doc.as_str(), b.spans[1].start), ("d1", 0));
        assert!(!b.wrapped);
        let c = s.take(3).unwrap();
        assert_eq!(
            c.units,
            vec![6, 7, 0],
            "the last document, then the wrap's separator"
        );
        assert!(c.wrapped);
        let d = s.take(2).unwrap();
        assert!(!d.wrapped, "the cursor already stands at the start");
        assert_eq!(d.units, vec![1, 2]);
    }

    #[test]
    fn aligned_takes_start_at_an_entry() {
        let mut s = spans(&[&[1, 2, 3, 4], &[5, 6, 7], &[8]], true);
        assert_eq!(s.take(2).unwrap().units, vec![1, 2]);
        assert_eq!(s.take(5).unwrap().units, vec![5, 6, 7, 0, 8]);
        let w = s.take(1).unwrap();
        assert!(w.wrapped);
        assert_eq!(w.units, vec![1]);
    }

    #[test]
    fn a_prompt_longer_than_the_content_is_refused() {
        let mut s = spans(&[&[1, 2], &[3]], false);
        assert_eq!(
            s.take(10).err(),
            Some(Shortfall::TooSmall { have: 3, need: 10 })
        );
        let mut empty = spans(&[&[], &[]], false);
        assert!(matches!(
            empty.take(1).err(),
            Some(Shortfall::TooSmall { .. })
        ));
    }

    #[test]
    fn unloaded_documents_are_asked_for_and_the_cursor_stays() {
        let mut s: Spans<u32> = Spans::new(vec!["a".into(), "b".into()], vec![0], false);
        s.load(0, vec![1, 2]);
        assert_eq!(s.take(4).err(), Some(Shortfall::Unloaded(1)));
        s.load(1, vec![3, 4]);
        assert_eq!(s.take(4).unwrap().units, vec![1, 2, 0, 3]);
    }

    #[test]
    fn pieces_give_the_text_back() {
        for t in [
            "fn main() {\n    x += 1;\n}\n",
            "  lead and  double  ",
            "",
            "one",
        ] {
            assert_eq!(pieces(t).concat(), t);
        }
        assert_eq!(pieces("a b\n  c"), vec!["a ", "b\n  ", "c"]);
    }
}
