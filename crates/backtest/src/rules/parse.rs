//! The expression language's syntax: text to a tree of [`Node`]s with byte spans, or a
//! [`ExprError`] pointing at the offending text.
//!
//! ```text
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | compare
//! compare := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/") unary)*
//! unary   := "-" unary | postfix
//! postfix := primary ("[" or "]")*
//! primary := number | name | name "(" (or ("," or)*)? ")" | "(" or ")"
//! ```

use super::bound::Op;
use std::ops::Range;

/// A parsed expression with the span of its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub span: Range<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeKind {
    Number(f64),
    Name(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Binary(Op, Box<Node>, Box<Node>),
    /// `name(args)`; `name_span` is the name's own span.
    Call {
        name: String,
        name_span: Range<usize>,
        args: Vec<Node>,
    },
    /// `series[bars]`: the value `bars` bars ago.
    Ago(Box<Node>, Box<Node>),
}

/// What is wrong and where, as a byte range of the expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExprError {
    pub message: String,
    pub span: Range<usize>,
}

pub(crate) fn error<T>(message: impl Into<String>, span: Range<usize>) -> Result<T, ExprError> {
    Err(ExprError { message: message.into(), span })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Op(Op),
    Not,
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    Comma,
}

fn tokens(text: &str) -> Result<Vec<(Token, Range<usize>)>, ExprError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && text[start + 1..].starts_with(|d: char| d.is_ascii_digit())) {
            let mut end = start;
            let mut prev = ' ';
            while let Some(&(i, d)) = chars.peek() {
                let exponent_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E');
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exponent_sign {
                    end = i + d.len_utf8();
                    prev = d;
                    chars.next();
                } else {
                    break;
                }
            }
            let literal = &text[start..end];
            match literal.parse::<f64>() {
                Ok(v) if v.is_finite() => out.push((Token::Number(v), start..end)),
                _ => return error(format!("`{literal}` is not a number"), start..end),
            }
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut end = start;
            while let Some(&(i, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = i + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = &text[start..end];
            let token = match word {
                "and" => Token::Op(Op::And),
                "or" => Token::Op(Op::Or),
                "not" => Token::Not,
                _ => Token::Name(word.to_owned()),
            };
            out.push((token, start..end));
            continue;
        }
        chars.next();
        let next = chars.peek().map(|&(_, d)| d);
        let two = |second: char| next == Some(second);
        let (token, len) = match c {
            '+' => (Token::Op(Op::Add), 1),
            '-' | '−' => (Token::Op(Op::Sub), c.len_utf8()),
            '*' | '×' => (Token::Op(Op::Mul), c.len_utf8()),
            '/' | '÷' => (Token::Op(Op::Div), c.len_utf8()),
            '<' if two('=') => (Token::Op(Op::Le), 2),
            '>' if two('=') => (Token::Op(Op::Ge), 2),
            '=' if two('=') => (Token::Op(Op::Eq), 2),
            '!' if two('=') => (Token::Op(Op::Ne), 2),
            '<' => (Token::Op(Op::Lt), 1),
            '>' => (Token::Op(Op::Gt), 1),
            '≤' => (Token::Op(Op::Le), c.len_utf8()),
            '≥' => (Token::Op(Op::Ge), c.len_utf8()),
            '≠' => (Token::Op(Op::Ne), c.len_utf8()),
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            '[' => (Token::OpenBracket, 1),
            ']' => (Token::CloseBracket, 1),
            ',' => (Token::Comma, 1),
            '&' if two('&') => return error("write `and` instead of `&&`", start..start + 2),
            '|' if two('|') => return error("write `or` instead of `||`", start..start + 2),
            '=' => return error("`=` is not a comparison: write `==`", start..start + 1),
            '!' => return error("write `not` instead of `!`", start..start + 1),
            _ => return error(format!("unexpected character `{c}`"), start..start + c.len_utf8()),
        };
        if len == 2 {
            chars.next();
        }
        out.push((token, start..start + len));
    }
    Ok(out)
}

/// The most tokens a rule may have, checked before parsing.
const MAX_TOKENS: usize = 1_000;

/// The most brackets, calls, `not`s and unary minuses one inside another: the parser
/// itself recurses at each.
const MAX_NESTING: usize = 64;

/// The deepest tree a rule may parse to (operators, calls and lookbacks one inside
/// another): the checker, binder and evaluator recurse at each level, the evaluator on
/// worker threads with 2 MiB stacks.
const MAX_DEPTH: usize = 100;

struct Parser {
    tokens: Vec<(Token, Range<usize>)>,
    at: usize,
    end: usize,
    /// How deeply the parser is nested now.
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    /// The span of the next token, or the end of the text.
    fn here(&self) -> Range<usize> {
        self.tokens.get(self.at).map_or(self.end..self.end, |(_, s)| s.clone())
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, token: &Token, what: &str) -> Result<Range<usize>, ExprError> {
        let span = self.here();
        if self.eat(token) {
            Ok(span)
        } else {
            let found = if span.is_empty() { "the end".to_owned() } else { "this".to_owned() };
            error(format!("expected {what}, found {found}"), span)
        }
    }

    fn binary(op: Op, a: Node, b: Node) -> Node {
        let span = a.span.start..b.span.end;
        Node { kind: NodeKind::Binary(op, Box::new(a), Box::new(b)), span }
    }

    fn left_assoc(&mut self, ops: &[Op], next: fn(&mut Self) -> Result<Node, ExprError>) -> Result<Node, ExprError> {
        let mut left = next(self)?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = *op;
            if !ops.contains(&op) {
                break;
            }
            self.at += 1;
            let right = next(self)?;
            left = Self::binary(op, left, right);
        }
        Ok(left)
    }

    /// Runs `f` one nesting level deeper, refusing past [`MAX_NESTING`] at the next token.
    fn nested(&mut self, f: fn(&mut Self) -> Result<Node, ExprError>) -> Result<Node, ExprError> {
        if self.nesting >= MAX_NESTING {
            return error(format!("nested more than {MAX_NESTING} deep: write a simpler expression"), self.here());
        }
        self.nesting += 1;
        let node = f(self);
        self.nesting -= 1;
        node
    }

    fn or(&mut self) -> Result<Node, ExprError> {
        self.nested(|p| p.left_assoc(&[Op::Or], Self::and))
    }

    fn and(&mut self) -> Result<Node, ExprError> {
        self.left_assoc(&[Op::And], Self::not)
    }

    fn not(&mut self) -> Result<Node, ExprError> {
        let start = self.here().start;
        if self.eat(&Token::Not) {
            let inner = self.nested(Self::not)?;
            let span = start..inner.span.end;
            return Ok(Node { kind: NodeKind::Not(Box::new(inner)), span });
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Node, ExprError> {
        let left = self.sum()?;
        let Some(Token::Op(op)) = self.peek() else { return Ok(left) };
        let op = *op;
        if !op.is_comparison() {
            return Ok(left);
        }
        self.at += 1;
        let right = self.sum()?;
        if let Some(Token::Op(next)) = self.peek()
            && next.is_comparison()
        {
            return error("comparisons do not chain: write `a < b and b < c`", self.here());
        }
        Ok(Self::binary(op, left, right))
    }

    fn sum(&mut self) -> Result<Node, ExprError> {
        self.left_assoc(&[Op::Add, Op::Sub], Self::product)
    }

    fn product(&mut self) -> Result<Node, ExprError> {
        self.left_assoc(&[Op::Mul, Op::Div], Self::unary)
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        let start = self.here().start;
        if self.eat(&Token::Op(Op::Sub)) {
            let inner = self.nested(Self::unary)?;
            let span = start..inner.span.end;
            return Ok(Node { kind: NodeKind::Neg(Box::new(inner)), span });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Node, ExprError> {
        let mut node = self.primary()?;
        while self.eat(&Token::OpenBracket) {
            let bars = self.or()?;
            let close = self.expect(&Token::CloseBracket, "`]`")?;
            let span = node.span.start..close.end;
            node = Node { kind: NodeKind::Ago(Box::new(node), Box::new(bars)), span };
        }
        Ok(node)
    }

    fn primary(&mut self) -> Result<Node, ExprError> {
        let span = self.here();
        let Some(token) = self.peek().cloned() else {
            return error("expected a value, found the end", span);
        };
        self.at += 1;
        match token {
            Token::Number(v) => Ok(Node { kind: NodeKind::Number(v), span }),
            Token::Name(name) => {
                if !self.eat(&Token::Open) {
                    return Ok(Node { kind: NodeKind::Name(name), span });
                }
                let mut args = Vec::new();
                if !self.eat(&Token::Close) {
                    loop {
                        args.push(self.or()?);
                        if self.eat(&Token::Comma) {
                            continue;
                        }
                        self.expect(&Token::Close, "`,` or `)`")?;
                        break;
                    }
                }
                let end = self.tokens[self.at - 1].1.end;
                Ok(Node { kind: NodeKind::Call { name, name_span: span.clone(), args }, span: span.start..end })
            }
            Token::Open => {
                let inner = self.or()?;
                let close = self.expect(&Token::Close, "`)`")?;
                Ok(Node { span: span.start..close.end, ..inner })
            }
            _ => error("expected a value", span),
        }
    }
}

/// Parses one expression.
pub(crate) fn parse(text: &str) -> Result<Node, ExprError> {
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return error("the rule is empty", 0..text.len());
    }
    if tokens.len() > MAX_TOKENS {
        let from = tokens[MAX_TOKENS].1.start;
        return error(
            format!("the rule has {} tokens, more than the {MAX_TOKENS} a rule may have", tokens.len()),
            from..text.len(),
        );
    }
    let mut parser = Parser { tokens, at: 0, end: text.len(), nesting: 0 };
    let node = parser.or()?;
    if parser.at < parser.tokens.len() {
        let span = parser.here();
        let hint = match parser.peek() {
            Some(Token::Close) => "an unmatched `)`",
            Some(Token::CloseBracket) => "an unmatched `]`",
            _ => "an operator or the end of the rule",
        };
        return error(format!("expected {hint} here"), span);
    }
    check_depth(&node)?;
    Ok(node)
}

/// Refuses a tree deeper than [`MAX_DEPTH`], at its deepest node; walked with a stack of
/// its own, since the tree may be too deep for recursion.
fn check_depth(root: &Node) -> Result<(), ExprError> {
    let mut stack = vec![(root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return error(
                format!(
                    "the expression is nested more than {MAX_DEPTH} deep (operators, calls, lookbacks): write it shorter"
                ),
                node.span.clone(),
            );
        }
        match &node.kind {
            NodeKind::Number(_) | NodeKind::Name(_) => {}
            NodeKind::Neg(a) | NodeKind::Not(a) => stack.push((a, depth + 1)),
            NodeKind::Binary(_, a, b) | NodeKind::Ago(a, b) => stack.extend([(&**a, depth + 1), (&**b, depth + 1)]),
            NodeKind::Call { args, .. } => stack.extend(args.iter().map(|a| (a, depth + 1))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(node: &Node) -> String {
        match &node.kind {
            NodeKind::Number(v) => format!("{v}"),
            NodeKind::Name(n) => n.clone(),
            NodeKind::Neg(a) => format!("(-{})", shape(a)),
            NodeKind::Not(a) => format!("(not {})", shape(a)),
            NodeKind::Binary(op, a, b) => format!("({} {} {})", shape(a), op.symbol(), shape(b)),
            NodeKind::Call { name, args, .. } => {
                format!("{name}({})", args.iter().map(shape).collect::<Vec<_>>().join(", "))
            }
            NodeKind::Ago(a, k) => format!("{}[{}]", shape(a), shape(k)),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        let cases = [
            ("1 + 2 * 3", "(1 + (2 * 3))"),
            ("1 - 2 - 3", "((1 - 2) - 3)"),
            ("a / b / c", "((a / b) / c)"),
            ("-a * b", "((-a) * b)"),
            ("a < b and c > d or not e == 1", "(((a < b) and (c > d)) or (not (e == 1)))"),
            ("close > highest(high, n)[1]", "(close > highest(high, n)[1])"),
            ("(a + b)[k + 1][2]", "(a + b)[(k + 1)][2]"),
            ("x × 2 ÷ y − 1 ≤ 3", "((((x * 2) / y) - 1) <= 3)"),
            ("f()", "f()"),
            ("1e-3 + .5", "(0.001 + 0.5)"),
        ];
        for (text, expected) in cases {
            assert_eq!(shape(&parse(text).unwrap()), expected, "{text}");
        }
    }

    #[test]
    fn spans_cover_the_text_of_each_node() {
        let text = "close - m * atr(14)";
        let node = parse(text).unwrap();
        assert_eq!(node.span, 0..text.len());
        let NodeKind::Binary(_, _, right) = &node.kind else { panic!("a subtraction") };
        assert_eq!(&text[right.span.clone()], "m * atr(14)");
        let NodeKind::Binary(_, _, call) = &right.kind else { panic!("a product") };
        let NodeKind::Call { name_span, .. } = &call.kind else { panic!("a call") };
        assert_eq!(&text[name_span.clone()], "atr");
    }

    #[test]
    fn errors_point_at_the_offending_text() {
        let cases = [
            ("close >", "expected a value, found the end", 7..7),
            ("sma(close, 20", "expected `,` or `)`, found the end", 13..13),
            ("a && b", "write `and` instead of `&&`", 2..4),
            ("a = b", "`=` is not a comparison: write `==`", 2..3),
            ("a < b < c", "comparisons do not chain: write `a < b and b < c`", 6..7),
            ("close )", "expected an unmatched `)` here", 6..7),
            ("close $ 1", "unexpected character `$`", 6..7),
            ("1.2.3", "`1.2.3` is not a number", 0..5),
            ("  ", "the rule is empty", 0..2),
            ("close[1", "expected `]`, found the end", 7..7),
        ];
        for (text, message, span) in cases {
            assert_eq!(parse(text).unwrap_err(), ExprError { message: message.into(), span }, "{text}");
        }
    }
}
