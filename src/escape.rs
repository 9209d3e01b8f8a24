//! Untrusted text made safe for a terminal: control, separator and
//! bidirectional characters written as escapes.

/// Whether `c` must not reach a terminal as it is: C0 controls (escape
/// sequences start with ESC), DEL, C1 controls (8-bit CSI, OSC), the line
/// and paragraph separators (U+2028, U+2029) and the bidirectional
/// formatting characters that reorder what is shown (U+061C, U+200E,
/// U+200F, U+202A-U+202E, U+2066-U+2069).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{61c}'
        | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character `is_unsafe` names written as an escape:
/// `\n`, `\t`, `\r`, `\x1b` up to U+00FF, `\u{2028}` beyond. Text
/// without one is returned as it is.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    escape_but(text, |_| false)
}

/// `escape` for text of several lines: newlines are kept, everything else
/// `is_unsafe` names is escaped.
pub fn escape_lines(text: &str) -> std::borrow::Cow<'_, str> {
    escape_but(text, |c| c == '\n')
}

fn escape_but(text: &str, keep: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if keep(c) || !is_unsafe(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) <= 0xff => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_separators_and_bidi_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("plain é ü 名前"), "plain é ü 名前");
        assert_eq!(
            escape("a\u{1b}]0;owned\u{7}b\nc\u{9b}d\u{2028}e\u{202e}f\u{7f}"),
            "a\\x1b]0;owned\\x07b\\nc\\x9bd\\u{2028}e\\u{202e}f\\x7f"
        );
        assert_eq!(escape_lines("one\ntwo\u{1b}[2J"), "one\ntwo\\x1b[2J");
    }
}
