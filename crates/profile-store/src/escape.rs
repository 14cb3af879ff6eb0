//! Text from a user's files, names and paths made safe for each medium ThreadX writes:
//! [`markup`] for HTML and SVG (XML), [`terminal`] for a terminal. Every writer of such
//! text goes through one of these; a hostile string (`<script>`, `&`, an escape sequence)
//! reaches no output as markup or as a control sequence.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether XML 1.0 forbids `c` even as a character reference: the C0 controls other than
/// tab, line feed and carriage return, and the non-characters U+FFFE and U+FFFF.
fn outside_xml(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Whether a terminal may take `c` as part of a control sequence or a move of the cursor:
/// every C0 and C1 control and DEL, but the line feed and the tab that lay text out.
fn control(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\t')
}

/// The visible form of a character that must not pass as it is: `\u{1b}`.
fn visible(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", c as u32);
}

/// `text` safe inside HTML or XML text and attribute values (single- or double-quoted):
/// `& < > " '` as entities, and the characters XML cannot hold shown as `\u{1b}`. The
/// result is well-formed XML whatever `text` holds.
pub fn markup(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| matches!(c, '&' | '<' | '>' | '"' | '\'') || outside_xml(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if outside_xml(c) => visible(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` safe to print on a terminal: every control character (escape, BEL, carriage
/// return, backspace, DEL, the C1 range) but line feeds and tabs shown as `\u{1b}`, so no
/// file or name can move the cursor, clear the screen or set the window's title.
pub fn terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if control(c) { visible(&mut out, c) } else { out.push(c) }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<img src=x onerror=document.title='PWNED'>&\"\u{1b}]0;t\u{7}\0\u{9b}2J\u{FFFE}";

    #[test]
    fn markup_leaves_no_tag_quote_or_forbidden_character() {
        let safe = markup(HOSTILE);
        assert_eq!(
            safe,
            "&lt;img src=x onerror=document.title=&#39;PWNED&#39;&gt;&amp;&quot;\\u{1b}]0;t\\u{7}\\u{0}\u{9b}2J\\u{fffe}"
        );
        assert!(!safe.chars().any(|c| matches!(c, '<' | '>' | '"' | '\'') || outside_xml(c)));
        assert!(matches!(markup("plain text, tab\tand line\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_shows_every_control_character() {
        assert_eq!(
            terminal(HOSTILE),
            "<img src=x onerror=document.title='PWNED'>&\"\\u{1b}]0;t\\u{7}\\u{0}\\u{9b}2J\u{FFFE}"
        );
        assert_eq!(terminal("a\tb\r\n\u{7f}\u{8}"), "a\tb\\u{d}\n\\u{7f}\\u{8}");
        assert!(matches!(terminal("S&P 500 <ok>"), Cow::Borrowed(_)));
    }
}
