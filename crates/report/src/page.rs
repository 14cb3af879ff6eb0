//! The page: sections in order under a title and a table of contents, the tables and
//! charts they hold, and the document around them with uPlot, our script and our style
//! inlined.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;
use threadx_backtest::Metrics;

/// uPlot 1.6.32 (MIT, `assets/LICENSE-uPlot`), as published on npm.
const UPLOT_JS: &str = include_str!("../assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uPlot.min.css");
const REPORT_JS: &str = include_str!("../assets/report.js");
const REPORT_CSS: &str = include_str!("../assets/report.css");

/// An HTML report being built: a title, then sections in the order they are added.
#[derive(Debug, Clone)]
pub struct Report {
    title: String,
    subtitle: String,
    contents: Vec<(String, String)>,
    body: String,
    charts: usize,
}

impl Report {
    /// An empty page titled `title`; `subtitle` is a line under it.
    pub fn new(title: &str, subtitle: &str) -> Self {
        Self {
            title: title.to_owned(),
            subtitle: subtitle.to_owned(),
            contents: Vec::new(),
            body: String::new(),
            charts: 0,
        }
    }

    /// Appends a section `id` headed `heading`, with `html` inside.
    pub(crate) fn section(&mut self, id: &str, heading: &str, html: &str) {
        self.contents.push((id.to_owned(), heading.to_owned()));
        let _ = write!(
            self.body,
            "<section id=\"{id}\" class=\"section\"><h2>{}</h2>\n{html}</section>\n",
            escape(heading)
        );
    }

    /// The HTML of a uPlot chart drawn from `spec` (see `assets/report.js`): a box and the
    /// spec as JSON beside it.
    pub(crate) fn chart(&mut self, spec: &Value) -> String {
        self.charts += 1;
        let id = format!("chart{}", self.charts);
        // Neither `</script` nor `<!--` may end or hide the script's end: JSON holds `<` only
        // inside strings, where `\u003c` reads back as the same text.
        let json = spec.to_string().replace('<', "\\u003c");
        format!(
            "<div class=\"chart\" id=\"{id}\"></div><script type=\"application/json\" data-chart=\"{id}\">{json}</script>\n"
        )
    }

    /// The whole document.
    pub fn to_html(&self) -> String {
        let mut contents = String::new();
        for (id, heading) in &self.contents {
            let _ = write!(contents, "<a href=\"#{id}\">{}</a>", escape(heading));
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title>\n<style>{UPLOT_CSS}\n{REPORT_CSS}</style></head>\n<body>\
             <header><h1>{title}</h1><p class=\"subtitle\">{subtitle}</p><nav>{contents}</nav></header>\n\
             <main>\n{body}</main>\n<footer>Made by ThreadX {version}. Charts: uPlot (MIT). Drag across a \
             chart to zoom, double-click to zoom out; hover for values; click a table's header to sort it.</footer>\n\
             <script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script></body></html>\n",
            title = escape(&self.title),
            subtitle = escape(&self.subtitle),
            body = self.body,
            version = env!("CARGO_PKG_VERSION"),
        )
    }

    /// Writes the page to `path`: it appears whole or not at all (a special file, such as
    /// /dev/stdout, is written in place).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        threadx_profile_store::write_file_atomic(path, self.to_html().as_bytes())
    }
}

/// `text` safe inside HTML text and attribute values (the one markup escape, shared with
/// the SVG writers).
pub(crate) fn escape(text: &str) -> String {
    threadx_profile_store::escape::markup(text).into_owned()
}

/// One table cell: its text, the number it sorts by (none: by its text), and a style.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub text: String,
    pub sort: Option<f64>,
    pub style: Option<String>,
}

impl Cell {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), sort: None, style: None }
    }

    pub(crate) fn number(text: impl Into<String>, value: f64) -> Self {
        Self { text: text.into(), sort: Some(value), style: None }
    }

    pub(crate) fn styled(mut self, style: String) -> Self {
        self.style = Some(style);
        self
    }
}

/// A table: a header row, then `rows`; `sortable` makes each header sort the rows.
pub(crate) fn table(headers: &[String], rows: &[Vec<Cell>], sortable: bool) -> String {
    let mut html =
        format!("<div class=\"table-box\"><table class=\"{}\"><thead><tr>", if sortable { "sortable" } else { "" });
    // A long name may break after its underscores (`sharpe_` `annual`): the headers, not
    // the numbers, made the best list wider than the page.
    for h in headers {
        let _ = write!(html, "<th>{}</th>", escape(h).replace('_', "_<wbr>"));
    }
    html.push_str("</tr></thead><tbody>\n");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            html.push_str("<td");
            if let Some(v) = cell.sort.filter(|v| v.is_finite()) {
                let _ = write!(html, " data-v=\"{v}\"");
            }
            if let Some(style) = &cell.style {
                let _ = write!(html, " style=\"{}\"", escape(style));
            }
            let _ = write!(html, ">{}</td>", escape(&cell.text));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
    html
}

/// Key figures as cards: a name, a value and a line saying what it is.
pub(crate) fn cards(figures: &[(&str, String, &str)]) -> String {
    let mut html = String::from("<div class=\"cards\">");
    for (name, value, what) in figures {
        let _ = write!(
            html,
            "<div class=\"card\"><div class=\"name\">{}</div><div class=\"value\">{}</div><div class=\"what\">{}</div></div>",
            escape(name),
            escape(value),
            escape(what)
        );
    }
    html.push_str("</div>\n");
    html
}

/// A list of `name: value` lines.
pub(crate) fn facts(facts: &[(&str, String)]) -> String {
    let mut html = String::from("<dl class=\"facts\">");
    for (name, value) in facts {
        let _ = write!(html, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
    }
    html.push_str("</dl>\n");
    html
}

/// A paragraph of text.
pub(crate) fn note(text: &str) -> String {
    format!("<p class=\"note\">{}</p>\n", escape(text))
}

/// An SVG picture drawn in Rust, inline, scaled to the page's width.
pub(crate) fn figure(svg: &str, caption: &str) -> String {
    // The XML declaration and the fixed size go: the box sizes the picture.
    let body = svg.trim_start_matches(|c| c != '<').trim();
    let body = match body.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(rest, |(_, after)| after).trim_start(),
        None => body,
    };
    format!("<figure class=\"svg\">{body}<figcaption>{}</figcaption></figure>\n", escape(caption))
}

/// A percentage with two decimals (`-` for no value).
pub(crate) fn pct(v: f64) -> String {
    if v.is_finite() { format!("{:.2} %", v * 100.0) } else { "-".into() }
}

/// A metric's value as the tables show it.
pub(crate) fn metric_text(metric: &str, v: f64) -> String {
    match metric {
        "trades" | "closed_trades" if v.is_finite() => format!("{v:.0}"),
        m if Metrics::is_fraction(m) => pct(v),
        _ => num(v, 4),
    }
}

/// A number with `digits` decimals (`-` for no value).
pub(crate) fn num(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{v:.digits$}") } else { "-".into() }
}

/// A CSS background for a value on the heat scale around zero (blue gains, red losses),
/// `span` the magnitude that takes the full colour.
pub(crate) fn heat_style(v: f64, span: f64) -> String {
    if !v.is_finite() || span <= 0.0 {
        return String::new();
    }
    let (r, g, b) = threadx_sweep::heat_colour(0.5 + 0.5 * (v / span).clamp(-1.0, 1.0));
    format!("background:#{r:02X}{g:02X}{b:02X}")
}

#[cfg(test)]
mod tests {
    use super::{Cell, Report, escape, table};
    use serde_json::json;

    #[test]
    fn a_page_links_only_to_itself_and_escapes_what_it_is_given() {
        let mut page = Report::new("a <b> & \"c\"", "sub");
        let chart = page.chart(&json!({"title": "</script><script>alert(1)</script>", "data": [[1.0], [2.0]]}));
        let rows = [vec![Cell::text("<td>"), Cell::number("1.5", 1.5).styled("color:red".into())]];
        page.section("one", "One & two", &format!("{chart}{}", table(&["x".into(), "y".into()], &rows, true)));
        let html = page.to_html();
        assert!(html.contains("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"));
        assert!(html.contains("<h2>One &amp; two</h2>"));
        assert!(html.contains("<td>&lt;td&gt;</td>"));
        assert!(html.contains("<td data-v=\"1.5\" style=\"color:red\">1.5</td>"));
        // The chart's JSON cannot close its script early, nor hide its end behind `<!--`.
        assert!(html.contains("\\u003c/script>\\u003cscript>alert(1)\\u003c/script>"));
        assert_eq!(html.matches("</script>").count(), 3, "the chart's, uPlot's and ours");
        // Nothing is fetched: no src attribute, no stylesheet link, every href an anchor.
        assert!(!html.contains(" src=") && !html.contains("<link"));
        assert!(html.match_indices("href=\"").all(|(i, _)| html[i + 6..].starts_with('#')));
        assert_eq!(escape("'a'"), "&#39;a&#39;");
    }
}
