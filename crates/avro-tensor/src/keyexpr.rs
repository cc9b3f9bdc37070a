//! Key expressions: tensorflow-io's names for paths into an Avro record
//! (`name.first`, `friends[*].x`, `friends[0]`, `cars['nick'].color`,
//! `friends[gender='male'].x`, `arr[a.b=c.d]`, `arr[a=@b.c]`, `@a.b`).
//!
//! This module only parses; `general.rs` resolves the steps against a
//! writer schema.

use std::fmt;

/// A parsed key expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyExpr {
    /// `@` in front: the path starts at the record root (for index and
    /// value keys of sparse features, which are otherwise relative).
    pub(crate) rooted: bool,
    pub(crate) steps: Vec<Step>,
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A record field (or, at a union, a branch's type name).
    Field(String),
    /// `[*]`: every element of an array (or value of a map).
    Star,
    /// `[i]`: one element of an array.
    Index(u64),
    /// `['k']`: the value under a map key.
    Key(String),
    /// `[lhs=rhs]`: the array elements for which the comparison holds.
    Filter(Filter),
}

/// `[lhs=rhs]`: `lhs` is a path of fields inside the element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) lhs: Vec<String>,
    pub(crate) rhs: Operand,
}

/// The right-hand side of a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    /// A quoted string or a bare number, compared with the value's text.
    Literal(String),
    /// Another path inside the element.
    Path(Vec<String>),
    /// `@a.b`: a path from the record root.
    Root(Vec<String>),
}

/// Why an expression does not parse: what was expected, at which byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) at: usize,
    pub(crate) expected: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad key expression: expected {} at byte {}",
            self.expected, self.at
        )
    }
}

/// Whether `c` may appear in a bare name. Avro names are identifiers;
/// `$` and `-` are let through for Java's `Outer$Inner` and map keys
/// written without quotes elsewhere.
fn name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'-')
}

/// Whether `name` is a plain field name (no path syntax at all): such
/// specs keep the ATDS plan.
pub(crate) fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(name_char)
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with('-')
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn fail<T>(&self, expected: &'static str) -> Result<T, SyntaxError> {
        Err(SyntaxError {
            at: self.pos,
            expected,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn name(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        while self.peek().is_some_and(name_char) {
            self.pos += 1;
        }
        if self.pos == start {
            return self.fail("a field name");
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.pos]).into_owned())
    }

    /// `name(.name)*`, as inside filters.
    fn dotted(&mut self) -> Result<Vec<String>, SyntaxError> {
        let mut names = vec![self.name()?];
        while self.eat(b'.') {
            names.push(self.name()?);
        }
        Ok(names)
    }

    /// A quoted string (single or double quotes, `\` escapes the next
    /// character).
    fn quoted(&mut self) -> Result<String, SyntaxError> {
        let Some(q @ (b'\'' | b'"')) = self.peek() else {
            return self.fail("a quote");
        };
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return self.fail("a closing quote"),
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c) => out.push(c),
                        None => return self.fail("a character after \\"),
                    }
                }
                Some(c) if c == q => break,
                Some(c) => out.push(c),
            }
            self.pos += 1;
        }
        self.pos += 1;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn number(&mut self) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).into_owned()
    }

    /// What is between `[` and `]`.
    fn selector(&mut self) -> Result<Step, SyntaxError> {
        match self.peek() {
            Some(b'*') => {
                self.pos += 1;
                Ok(Step::Star)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                match digits.parse() {
                    Ok(i) => Ok(Step::Index(i)),
                    Err(_) => {
                        self.pos = start;
                        self.fail("an index below 2^64")
                    }
                }
            }
            Some(b'\'' | b'"') => Ok(Step::Key(self.quoted()?)),
            _ => {
                let lhs = self.dotted()?;
                if !self.eat(b'=') {
                    return self.fail("'=' in a filter");
                }
                let rhs = match self.peek() {
                    Some(b'\'' | b'"') => Operand::Literal(self.quoted()?),
                    Some(b'@') => {
                        self.pos += 1;
                        Operand::Root(self.dotted()?)
                    }
                    Some(c) if c.is_ascii_digit() || c == b'-' => Operand::Literal(self.number()),
                    _ => Operand::Path(self.dotted()?),
                };
                Ok(Step::Filter(Filter { lhs, rhs }))
            }
        }
    }
}

/// Parses a key expression.
pub(crate) fn parse(text: &str) -> Result<KeyExpr, SyntaxError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
    };
    let rooted = p.eat(b'@');
    let mut steps = vec![Step::Field(p.name()?)];
    loop {
        match p.peek() {
            None => break,
            Some(b'.') => {
                p.pos += 1;
                steps.push(Step::Field(p.name()?));
            }
            Some(b'[') => {
                p.pos += 1;
                steps.push(p.selector()?);
                if !p.eat(b']') {
                    return p.fail("']'");
                }
            }
            Some(_) => return p.fail("'.', '[' or the end"),
        }
    }
    Ok(KeyExpr { rooted, steps })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Step {
        Step::Field(s.into())
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_form_parses() {
        let cases: Vec<(&str, bool, Vec<Step>)> = vec![
            ("age", false, vec![f("age")]),
            ("name.first", false, vec![f("name"), f("first")]),
            ("a.b.c", false, vec![f("a"), f("b"), f("c")]),
            ("scores[*]", false, vec![f("scores"), Step::Star]),
            ("m[*][*]", false, vec![f("m"), Step::Star, Step::Star]),
            (
                "friends[0].x",
                false,
                vec![f("friends"), Step::Index(0), f("x")],
            ),
            (
                "cars['nick'].color",
                false,
                vec![f("cars"), Step::Key("nick".into()), f("color")],
            ),
            (
                "cars[\"it's\"]",
                false,
                vec![f("cars"), Step::Key("it's".into())],
            ),
            (
                r"cars['a\'b']",
                false,
                vec![f("cars"), Step::Key("a'b".into())],
            ),
            (
                "friends[gender='male'].x",
                false,
                vec![
                    f("friends"),
                    Step::Filter(Filter {
                        lhs: names(&["gender"]),
                        rhs: Operand::Literal("male".into()),
                    }),
                    f("x"),
                ],
            ),
            (
                "arr[a.b=c.d].x",
                false,
                vec![
                    f("arr"),
                    Step::Filter(Filter {
                        lhs: names(&["a", "b"]),
                        rhs: Operand::Path(names(&["c", "d"])),
                    }),
                    f("x"),
                ],
            ),
            (
                "arr[a=@b.c].x",
                false,
                vec![
                    f("arr"),
                    Step::Filter(Filter {
                        lhs: names(&["a"]),
                        rhs: Operand::Root(names(&["b", "c"])),
                    }),
                    f("x"),
                ],
            ),
            (
                "arr[n=-3]",
                false,
                vec![
                    f("arr"),
                    Step::Filter(Filter {
                        lhs: names(&["n"]),
                        rhs: Operand::Literal("-3".into()),
                    }),
                ],
            ),
            ("@idx", true, vec![f("idx")]),
            ("Outer$Inner.x", false, vec![f("Outer$Inner"), f("x")]),
        ];
        for (text, rooted, steps) in cases {
            assert_eq!(parse(text), Ok(KeyExpr { rooted, steps }), "{text}");
        }
    }

    #[test]
    fn syntax_errors_say_where() {
        for (text, at) in [
            ("", 0),
            (".a", 0),
            ("a.", 2),
            ("a..b", 2),
            ("a[", 2),
            ("a[*", 3),
            ("a[]", 2),
            ("a['k", 4),
            ("a[x]", 3),
            ("a[x=]", 4),
            ("a[99999999999999999999]", 2),
            ("a b", 1),
            ("a]", 1),
            ("@", 1),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.at, at, "{text}: {e}");
        }
    }

    #[test]
    fn plain_names() {
        assert!(is_plain("age"));
        assert!(is_plain("_x1"));
        for name in ["", "a.b", "a[*]", "@a", "1a", "a b"] {
            assert!(!is_plain(name), "{name}");
        }
    }
}
