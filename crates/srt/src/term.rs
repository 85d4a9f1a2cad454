//! What reaches a terminal: text from recipes, state and logs is data, never terminal
//! control. Human output escapes control characters ([`escape`]); JSON output stays
//! exact (its encoder escapes them already). Logs copied to a pipe or a file lose
//! their colour codes ([`strip_ansi`]).

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` would act on a terminal instead of printing: C0 controls other than
/// newline and tab, DEL, and the C1 controls (U+0080 to U+009F, which some terminals
/// read as CSI, OSC... in their 8-bit form).
fn is_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `n` and the noun in the number it agrees with: `1 node`, `2 nodes`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `text` with every control character (ESC, BEL, CR, backspace, C1...) written as a
/// visible escape (`\x1b`, `\r`, `\u{9b}`), newlines and tabs kept. Borrowed when there
/// is nothing to escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// [`escape`], and newlines and tabs too: for values shown on one line.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| is_control(c) || c == '\n' || c == '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => push_escaped(&mut out, c),
        }
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char) {
    if !is_control(c) {
        out.push(c);
        return;
    }
    match c {
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// The escaped form of `text` for a diagnostic's source excerpt, with a map from byte
/// offsets in `text` to offsets in the result, so spans can be moved along.
pub fn escape_with_offsets(text: &str) -> (String, OffsetMap) {
    let mut out = String::with_capacity(text.len());
    let mut shifts = Vec::new();
    for (i, c) in text.char_indices() {
        let before = out.len();
        push_escaped(&mut out, c);
        let grew = (out.len() - before) as isize - c.len_utf8() as isize;
        if grew != 0 {
            shifts.push((i + c.len_utf8(), grew));
        }
    }
    (out, OffsetMap { shifts })
}

/// Moves byte offsets of a text into its escaped form ([`escape_with_offsets`]).
#[derive(Clone, Debug, Default)]
pub struct OffsetMap {
    /// (first offset after an escaped character, growth) in increasing order.
    shifts: Vec<(usize, isize)>,
}

impl OffsetMap {
    /// Where `offset` of the original text is in the escaped one.
    pub fn map(&self, offset: usize) -> usize {
        let grew: isize = self
            .shifts
            .iter()
            .take_while(|(at, _)| *at <= offset)
            .map(|(_, g)| g)
            .sum();
        (offset as isize + grew) as usize
    }
}

/// `text` without ANSI escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ST`,
/// and two-byte `ESC x`), with the remaining control characters escaped: what a log
/// looks like in a file or behind a pipe.
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            push_escaped(&mut out, c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            Some(_) => {
                // `ESC` intermediates (space to `/`) then one final byte: `ESC ( B`.
                for c in chars.by_ref() {
                    if !(' '..='/').contains(&c) {
                        break;
                    }
                }
            }
            None => {}
        }
    }
    Cow::Owned(out)
}

/// [`strip_ansi`] but keeping colour and style (SGR, `ESC [ ... m`) sequences: what a
/// log looks like on a terminal, coloured but unable to retitle, clear or move it.
pub fn keep_colours(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\u{1b}') {
        out.push_str(&strip_ansi(&rest[..at]));
        let seq = &rest[at..];
        let sgr_len = seq.strip_prefix("\u{1b}[").and_then(|body| {
            let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            (body[end..].starts_with('m')).then_some(2 + end + 1)
        });
        match sgr_len {
            Some(n) => {
                out.push_str(&seq[..n]);
                rest = &seq[n..];
            }
            None => {
                // Not a colour: drop the whole sequence.
                rest = &seq[sequence_len(seq)..];
            }
        }
    }
    out.push_str(&strip_ansi(rest));
    Cow::Owned(out)
}

/// Byte length of the escape sequence at the start of `seq` (which starts with ESC).
fn sequence_len(seq: &str) -> usize {
    let mut it = seq.char_indices().skip(1).peekable();
    match it.next() {
        Some((_, '[')) => {
            for (i, c) in it {
                if ('@'..='~').contains(&c) {
                    return i + c.len_utf8();
                }
            }
            seq.len()
        }
        Some((_, ']')) => {
            while let Some((i, c)) = it.next() {
                if c == '\u{7}' {
                    return i + 1;
                }
                if c == '\u{1b}' {
                    if let Some(&(j, '\\')) = it.peek() {
                        return j + 1;
                    }
                }
            }
            seq.len()
        }
        Some((i, c)) if (' '..='/').contains(&c) => {
            let mut end = i + c.len_utf8();
            for (j, c) in it {
                end = j + c.len_utf8();
                if !(' '..='/').contains(&c) {
                    break;
                }
            }
            end
        }
        Some((i, c)) => i + c.len_utf8(),
        None => seq.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_keeps_text() {
        assert_eq!(
            escape("plain ünïcode\tand\nlines"),
            "plain ünïcode\tand\nlines"
        );
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape("a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd\u{9b}e\u{7f}"),
            "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\rd\\u{9b}e\\x7f"
        );
        assert_eq!(escape_line("a\nb\tc"), "a\\nb\\tc");
    }

    #[test]
    fn offsets_follow_escapes() {
        let text = "ab\u{1b}cd\u{9b}ef";
        let (out, map) = escape_with_offsets(text);
        assert_eq!(out, "ab\\x1bcd\\u{9b}ef");
        for (i, _) in text.char_indices() {
            let c = text[i..].chars().next().unwrap();
            if !is_control(c) {
                assert_eq!(out[map.map(i)..].chars().next(), Some(c), "offset {i}");
            }
        }
        assert_eq!(map.map(text.len()), out.len());
    }

    #[test]
    fn strips_and_keeps_colours() {
        let log = "\u{1b}[32mINFO\u{1b}[0m ready\u{1b}]0;title\u{7} \u{1b}[2Jdone\u{1b}(B!";
        assert_eq!(strip_ansi(log), "INFO ready done!");
        assert_eq!(keep_colours(log), "\u{1b}[32mINFO\u{1b}[0m ready done!");
        assert_eq!(strip_ansi("bell\u{7} cr\r"), "bell\\x07 cr\\r");
    }
}
