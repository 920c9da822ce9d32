//! A small arithmetic evaluator for the `calculator` tool: numbers, `+ - * /`, unary minus
//! and parentheses, in exact decimal arithmetic. No names, no functions, bounded depth.

use rust_decimal::Decimal;
use std::str::FromStr;

/// Deepest parenthesis nesting accepted.
const MAX_DEPTH: usize = 32;

/// Evaluates `expr`.
///
/// # Errors
/// A short message when the expression is not plain arithmetic, divides by zero or
/// overflows.
pub(crate) fn evaluate(expr: &str) -> Result<Decimal, String> {
    let mut p = Parser { s: expr.as_bytes(), i: 0, depth: 0 };
    let v = p.sum()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected {:?} at {}", char::from(p.s[p.i]), p.i));
    }
    Ok(v.normalize())
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn sum(&mut self) -> Result<Decimal, String> {
        let mut v = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            let r = self.product()?;
            v = if op == b'+' { v.checked_add(r) } else { v.checked_sub(r) }.ok_or("overflow")?;
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<Decimal, String> {
        let mut v = self.unary()?;
        while let Some(op @ (b'*' | b'/')) = self.peek() {
            self.i += 1;
            let r = self.unary()?;
            v = if op == b'*' {
                v.checked_mul(r).ok_or("overflow")?
            } else if r.is_zero() {
                return Err("division by zero".into());
            } else {
                v.checked_div(r).ok_or("overflow")?
            };
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<Decimal, String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err("too deeply nested".into());
            }
            let v = self.unary();
            self.depth -= 1;
            return Ok(-v?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Decimal, String> {
        match self.peek() {
            Some(b'(') => {
                self.i += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err("too deeply nested".into());
                }
                let v = self.sum()?;
                self.depth -= 1;
                if self.peek() != Some(b')') {
                    return Err("missing )".into());
                }
                self.i += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => {
                let start = self.i;
                while self.i < self.s.len() && (self.s[self.i].is_ascii_digit() || self.s[self.i] == b'.') {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                Decimal::from_str(text).map_err(|_| format!("bad number {text:?}"))
            }
            Some(c) => Err(format!("unexpected {:?}", char::from(c))),
            None => Err("unexpected end".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_exact_and_hostile_input_is_an_error() {
        assert_eq!(evaluate("1 + 2 * 3").unwrap().to_string(), "7");
        assert_eq!(evaluate("(0.1 + 0.2) * 10").unwrap().to_string(), "3");
        assert_eq!(evaluate("-(-4) / 8").unwrap().to_string(), "0.5");
        for bad in ["", "1/0", "2 +", "import os", "1..2", "(((1)", "9999999999999999999999999999*9999999999"] {
            assert!(evaluate(bad).is_err(), "{bad}");
        }
        assert!(evaluate(&format!("{}1{}", "(".repeat(100), ")".repeat(100))).is_err());
        assert!(evaluate(&"-".repeat(10_000)).is_err());
    }
}
