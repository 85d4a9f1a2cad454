//! A process's argv, held compactly: its tokens in one string, with where each ends.
//!
//! A launch plan at cluster scale holds millions of tokens (a Router lists every worker
//! on its command line; a worker has a few dozen flags). As a `Vec<String>` each token
//! was an allocation and a 24-byte header; here a whole argv is two allocations.

use serde::{Serialize, Serializer};
use std::fmt;

/// A command's argv, program first.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Argv {
    /// The tokens, one after another.
    text: String,
    /// Where each token ends in `text`.
    ends: Vec<u32>,
}

impl Argv {
    /// No token.
    pub fn new() -> Argv {
        Argv::default()
    }

    /// Append one token.
    pub fn push(&mut self, token: &str) {
        self.text.push_str(token);
        let end = u32::try_from(self.text.len()).expect("an argv is under 4 GiB");
        self.ends.push(end);
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No token at all.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Token `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        Some(&self.text[start..end])
    }

    /// The program (token 0).
    pub fn program(&self) -> Option<&str> {
        self.get(0)
    }

    /// Replace the program (token 0), keeping the arguments.
    pub fn set_program(&mut self, program: &str) {
        let Some(&first) = self.ends.first() else {
            self.push(program);
            return;
        };
        self.text.replace_range(..first as usize, program);
        let shift = program.len() as i64 - i64::from(first);
        for end in &mut self.ends {
            *end = u32::try_from(i64::from(*end) + shift).expect("an argv is under 4 GiB");
        }
    }

    /// The tokens in order.
    pub fn iter(&self) -> Tokens<'_> {
        Tokens {
            argv: self,
            next: 0,
        }
    }

    /// Whether some token is `token`.
    pub fn contains(&self, token: &str) -> bool {
        self.iter().any(|t| t == token)
    }

    /// The tokens as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }

    /// Release spare capacity (both parts grow by doubling).
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// The tokens of an [`Argv`], in order.
#[derive(Clone)]
pub struct Tokens<'a> {
    argv: &'a Argv,
    next: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let token = self.argv.get(self.next)?;
        self.next += 1;
        Some(token)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.argv.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Tokens<'_> {}

impl<'a> IntoIterator for &'a Argv {
    type Item = &'a str;
    type IntoIter = Tokens<'a>;

    fn into_iter(self) -> Tokens<'a> {
        self.iter()
    }
}

impl std::ops::Index<usize> for Argv {
    type Output = str;

    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(token) => token,
            None => panic!("argv has {} tokens, not {}", self.len(), i + 1),
        }
    }
}

impl<S: AsRef<str>> Extend<S> for Argv {
    fn extend<I: IntoIterator<Item = S>>(&mut self, tokens: I) {
        for token in tokens {
            self.push(token.as_ref());
        }
    }
}

impl<S: AsRef<str>> FromIterator<S> for Argv {
    fn from_iter<I: IntoIterator<Item = S>>(tokens: I) -> Argv {
        let mut argv = Argv::new();
        argv.extend(tokens);
        argv
    }
}

impl From<Vec<String>> for Argv {
    fn from(tokens: Vec<String>) -> Argv {
        tokens.into_iter().collect()
    }
}

impl<S: AsRef<str>, const N: usize> From<[S; N]> for Argv {
    fn from(tokens: [S; N]) -> Argv {
        tokens.into_iter().collect()
    }
}

impl fmt::Debug for Argv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// As the list of strings it stands for.
impl Serialize for Argv {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_back_as_pushed() {
        let tokens = ["vllm", "serve", "", "--x", "{\"k\": \"é\"}", ""];
        let argv: Argv = tokens.into_iter().collect();
        assert_eq!(argv.len(), tokens.len());
        assert_eq!(argv.iter().collect::<Vec<_>>(), tokens);
        assert_eq!(argv.iter().len(), tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            assert_eq!(&argv[i], *t);
        }
        assert_eq!(argv.get(tokens.len()), None);
        assert!(argv.contains("--x") && !argv.contains("--y"));
        assert_eq!(argv.to_vec(), tokens.map(String::from).to_vec());
        assert_eq!(format!("{argv:?}"), format!("{tokens:?}"));
        assert_eq!(
            serde_json::to_value(&argv).unwrap(),
            serde_json::json!(tokens)
        );
    }

    #[test]
    fn the_program_is_replaced_whatever_its_length() {
        let mut argv = Argv::from(["vllm", "serve", "m"]);
        argv.set_program("/opt/bin/srt-vllm-sim");
        assert_eq!(argv.to_vec(), ["/opt/bin/srt-vllm-sim", "serve", "m"]);
        argv.set_program("v");
        assert_eq!(argv.to_vec(), ["v", "serve", "m"]);
        let mut empty = Argv::new();
        assert!(empty.is_empty() && empty.program().is_none());
        empty.set_program("p");
        assert_eq!(empty.to_vec(), ["p"]);
    }

    #[test]
    fn equal_tokens_make_equal_argvs() {
        // Not merely equal text: the split matters.
        assert_ne!(Argv::from(["ab", "c"]), Argv::from(["a", "bc"]));
        assert_eq!(
            Argv::from(["a", "bc"]),
            Argv::from(vec!["a".to_string(), "bc".into()])
        );
    }
}
