//! The self-contained page around a report: inline CSS, no scripts, fonts or links, so the
//! file opens offline; plus an escaped-table helper shared by the report and `compare`.

use crate::report::escape::escape;

const CSS: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1a1a1a; background: #fafafa; max-width: 1160px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
p, li, dd, dt { font-size: 13px; }
.sub { color: #555; margin: 2px 0; }
table { border-collapse: collapse; font-size: 12px; background: #fff; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
td.text, th.text { text-align: left; white-space: normal; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px; }
.fit-row { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px; align-items: start; }
.fit-row svg { width: 100%; height: auto; border: 1px solid #ddd; background: #fff; }
.charts svg { width: 100%; height: auto; border: 1px solid #ddd; background: #fff; }
.notes { background: #fff4e5; border: 1px solid #f0c27b; padding: 6px 12px; }
.notes li { margin: 2px 0; }
.muted { color: #777; }
.within-noise { color: #777; }
.better { color: #0a7d38; font-weight: 600; }
.worse { color: #b3261e; font-weight: 600; }
td.needle-cell { text-align: center; min-width: 44px; }
td.needle-cell.pass { background: #c8ebd3; }
td.needle-cell.partial { background: #fbe3a6; }
td.needle-cell.fail { background: #f6c1bd; }
tr.invalid td { background: #fdf0ef; }
dl.kv { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 0; }
dl.kv dt { color: #555; }
dl.kv dd { margin: 0; font-family: ui-monospace, monospace; }
pre { background: #fff; border: 1px solid #ddd; padding: 8px; font-size: 11px; overflow-x: auto; }
"#;

/// A complete HTML document.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// One table cell: its text (escaped when drawn) and extra classes.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub text: String,
    pub class: String,
}

impl Cell {
    pub fn num(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            class: String::new(),
        }
    }

    pub fn text(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            class: "text".into(),
        }
    }

    pub fn with_class(mut self, class: &str) -> Cell {
        if !self.class.is_empty() {
            self.class.push(' ');
        }
        self.class.push_str(class);
        self
    }
}

/// An HTML table with the given `class`; the first `text_columns` headers are left-aligned.
pub fn table(
    class: &str,
    header: &[&str],
    rows: &[(String, Vec<Cell>)],
    text_columns: usize,
) -> String {
    let mut out = format!("<table class=\"{}\">\n<thead><tr>", escape(class));
    for (i, h) in header.iter().enumerate() {
        let c = if i < text_columns {
            " class=\"text\""
        } else {
            ""
        };
        out.push_str(&format!("<th{c}>{}</th>", escape(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (row_class, cells) in rows {
        if row_class.is_empty() {
            out.push_str("<tr>");
        } else {
            out.push_str(&format!("<tr class=\"{}\">", escape(row_class)));
        }
        for c in cells {
            if c.class.is_empty() {
                out.push_str(&format!("<td>{}</td>", escape(&c.text)));
            } else {
                out.push_str(&format!(
                    "<td class=\"{}\">{}</td>",
                    escape(&c.class),
                    escape(&c.text)
                ));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A `<ul class="notes">` of escaped lines, or nothing.
pub fn notes(lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let items: String = lines
        .iter()
        .map(|l| format!("<li>{}</li>", escape(l)))
        .collect();
    format!("<ul class=\"notes\">{items}</ul>\n")
}

/// A definition list of (key, value) pairs, escaped.
pub fn key_values(pairs: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"kv\">");
    for (k, v) in pairs {
        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>", escape(k), escape(v)));
    }
    out.push_str("</dl>\n");
    out
}
/// Table rows of numbers with a text last column (flags), each row classed `invalid`
/// when its point had no valid sample: the summary's and the depth section's rows.
pub fn number_rows<R: IntoIterator<Item = String>>(
    rows: impl IntoIterator<Item = (R, bool)>,
) -> Vec<(String, Vec<Cell>)> {
    rows.into_iter()
        .map(|(r, valid)| {
            let r: Vec<String> = r.into_iter().collect();
            let last = r.len().saturating_sub(1);
            let cells = r
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == last {
                        Cell::text(c)
                    } else {
                        Cell::num(c)
                    }
                })
                .collect();
            let class = if valid { "" } else { "invalid" };
            (class.to_string(), cells)
        })
        .collect()
}

/// A whole HTML page around `body`, plainly styled (the load report).
pub fn plain_document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}svg{{display:block;margin:1em 0}}</style>\
         </head><body>{body}</body></html>\n",
        escape(title)
    )
}

/// A plain table: a header row, then one row per item, every cell escaped.
pub fn plain_table(cols: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut s = String::from("<table><tr>");
    for c in cols {
        // The column's name whole in `data-col`; shown, it may break after an underscore,
        // so a wide table fits its window.
        let c = escape(c);
        s.push_str(&format!(
            "<th data-col=\"{c}\">{}</th>",
            c.replace('_', "_<wbr>")
        ));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for v in r {
            s.push_str(&format!("<td>{}</td>", escape(&v)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}
