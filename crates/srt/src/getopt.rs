//! Option catalogs of C programs, and glibc `getopt_long`'s way of reading a command
//! line against one.
//!
//! A catalog lists a program's long options (whether each takes an argument: none,
//! required, optional; the other spelling it is, if any), its short letters and the
//! long option each is. SLURM's `srun` and `sbatch` catalogs are dumped from the pinned
//! programs' own parsers by `scripts/slurm-option-catalogs.sh` and checked in next to
//! the SLURM executor (`exec/catalog/<program>-<debian-version>.json`).
//!
//! [`read`] reads a list of arguments as the program will: `--name`, `--name=value`,
//! `--name value` (a required argument takes the next element, which is then no
//! option), any unique prefix of a long name (an exact name wins; a prefix of several
//! options is ambiguous), short letters `-N2`, `-N 2` and bundles (`-vN2`, `-wn8`:
//! `-w` takes `n8`), `--` ending the options, and the first operand ending them too
//! (SLURM's clients parse in POSIX order). Each element is resolved to the option's
//! own long name, so a check of option names sees the option a spelling really is.

use crate::recipe::diag::did_you_mean;
use serde::Deserialize;

/// Whether an option takes an argument (`getopt_long`'s `has_arg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Argument {
    /// A switch: `--name=x` is refused.
    None,
    /// `--name=x`, `--name x`, `-Nx`, `-N x`.
    Required,
    /// Only attached: `--name=x`, `-Nx`.
    Optional,
}

/// One long option.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct LongOption {
    /// Its name, without dashes (`nodelist`).
    pub name: String,
    /// Whether it takes an argument.
    pub argument: Argument,
    /// Its short letter, if it has one.
    pub short: Option<char>,
    /// The option this name is another spelling of (`cpu_bind` is `cpu-bind`).
    pub alias_of: Option<String>,
}

/// One short option.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ShortOption {
    /// Its letter.
    pub letter: char,
    /// Whether it takes an argument.
    pub argument: Argument,
    /// The long option it is, if it has one.
    pub long: Option<String>,
}

/// One program's options, as its parser has them.
#[derive(Clone, Debug, Deserialize)]
pub struct OptionCatalog {
    /// Program name (`srun`).
    pub program: String,
    /// Its version (`22.05.8`).
    pub version: String,
    /// The version of the package it came from (`22.05.8-4+deb12u3`).
    pub package_version: String,
    /// Long options, sorted by name.
    pub long: Vec<LongOption>,
    /// Short options, sorted by letter.
    pub short: Vec<ShortOption>,
}

/// What one element of a command line is, or a part of it (a bundle of short options
/// is one element).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An option: its own name (`--nodelist`; `-F` for a letter without a long name)
    /// and how it was written (`--nodel`, `-w`).
    Option {
        /// The option's own name, dashes included.
        name: String,
        /// The spelling in the element.
        written: String,
    },
    /// The value of the option before it (`4G` after `--mem`).
    Value {
        /// That option's own name.
        of: String,
    },
    /// `--`: the end of the options.
    End,
    /// An operand (not an option, not a value): the options end before it.
    Operand,
}

/// An element the program would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// No option has this name or letter, nor starts with it.
    #[error("`{written}` is not an option of {program}")]
    Unknown {
        /// The program.
        program: String,
        /// The name as written (`--nodelsit`, `-y`).
        written: String,
        /// A close option name, if any (`--nodelist`).
        suggestion: Option<String>,
    },
    /// A prefix of several options.
    #[error("`{written}` is ambiguous: a prefix of {}", candidates.join(", "))]
    Ambiguous {
        /// The name as written.
        written: String,
        /// The options it starts, by their own names (`--exclude`, `--exclusive`).
        candidates: Vec<String>,
    },
    /// A required argument with nothing after it.
    #[error("`{name}` needs a value")]
    MissingValue {
        /// The option's own name.
        name: String,
        /// The spelling in the element.
        written: String,
    },
    /// A value given to a switch (`--overcommit=yes`).
    #[error("`{name}` takes no value")]
    UnexpectedValue {
        /// The option's own name.
        name: String,
        /// The spelling in the element.
        written: String,
    },
}

/// One reading: the element it is about (its index) and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    /// Index of the element in the list read.
    pub index: usize,
    /// What it is, or why the program would refuse it.
    pub item: Result<Item, ReadError>,
}

impl OptionCatalog {
    /// A catalog from its JSON.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The long option named exactly `name`.
    pub fn long_named(&self, name: &str) -> Option<&LongOption> {
        self.long.iter().find(|o| o.name == name)
    }

    /// The option a long name is (itself, or the one it is another spelling of).
    fn own<'a>(&'a self, option: &'a LongOption) -> &'a LongOption {
        option
            .alias_of
            .as_deref()
            .and_then(|n| self.long_named(n))
            .unwrap_or(option)
    }

    /// The long option `--text` is: an exact name, else the one option it is a
    /// prefix of.
    pub fn find_long(&self, text: &str) -> Result<&LongOption, ReadError> {
        if let Some(exact) = self.long_named(text) {
            return Ok(self.own(exact));
        }
        let mut hits: Vec<&LongOption> = self
            .long
            .iter()
            .filter(|o| o.name.starts_with(text))
            .map(|o| self.own(o))
            .collect();
        hits.sort_by(|a, b| a.name.cmp(&b.name));
        hits.dedup_by(|a, b| a.name == b.name);
        match hits.as_slice() {
            [one] => Ok(one),
            [] => Err(self.unknown(format!("--{text}"), text)),
            many => Err(ReadError::Ambiguous {
                written: format!("--{text}"),
                candidates: many.iter().map(|o| format!("--{}", o.name)).collect(),
            }),
        }
    }

    fn unknown(&self, written: String, name: &str) -> ReadError {
        let base = name.split(|c: char| c == '=' || c.is_whitespace()).next();
        let suggestion = did_you_mean(
            base.unwrap_or(name),
            self.long.iter().map(|o| o.name.as_str()),
        )
        .map(|n| format!("--{}", self.own(self.long_named(n).expect("listed")).name));
        ReadError::Unknown {
            program: self.program.clone(),
            written,
            suggestion,
        }
    }

    /// The short option `-letter`.
    pub fn find_short(&self, letter: char) -> Option<&ShortOption> {
        self.short.iter().find(|o| o.letter == letter)
    }

    /// The own name of a short option: its long option's, else `-letter`.
    fn short_name(&self, option: &ShortOption) -> String {
        match option.long.as_deref().and_then(|n| self.long_named(n)) {
            Some(long) => format!("--{}", self.own(long).name),
            None => format!("-{}", option.letter),
        }
    }
}

/// Reads `args` as the catalog's program would (see the module documentation). Every
/// element has at least one reading, in order; a bundle of short options has one per
/// option.
pub fn read(catalog: &OptionCatalog, args: &[impl AsRef<str>]) -> Vec<Reading> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        let next = args.get(i + 1).map(AsRef::as_ref);
        let took_next = if arg == "--" {
            out.push(Reading {
                index: i,
                item: Ok(Item::End),
            });
            operands(&mut out, i + 1, args.len());
            break;
        } else if let Some(long) = arg.strip_prefix("--") {
            read_long(catalog, i, long, next.is_some(), &mut out)
        } else if arg.len() > 1 && arg.starts_with('-') {
            read_shorts(catalog, i, &arg[1..], next.is_some(), &mut out)
        } else {
            operands(&mut out, i, args.len());
            break;
        };
        if took_next {
            let of = match out.last().map(|r| &r.item) {
                Some(Ok(Item::Option { name, .. })) => name.clone(),
                _ => unreachable!("only an option takes the next element"),
            };
            out.push(Reading {
                index: i + 1,
                item: Ok(Item::Value { of }),
            });
            i += 1;
        }
        i += 1;
    }
    out
}

/// Elements `from..to` are operands.
fn operands(out: &mut Vec<Reading>, from: usize, to: usize) {
    out.extend((from..to).map(|index| Reading {
        index,
        item: Ok(Item::Operand),
    }));
}

/// `--text` (dashes removed); true when its value is the next element.
fn read_long(
    catalog: &OptionCatalog,
    index: usize,
    text: &str,
    has_next: bool,
    out: &mut Vec<Reading>,
) -> bool {
    let (name, value) = match text.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (text, None),
    };
    let written = format!("--{name}");
    let option = match catalog.find_long(name) {
        Ok(o) => o,
        Err(e) => {
            out.push(Reading {
                index,
                item: Err(e),
            });
            return false;
        }
    };
    let own = format!("--{}", option.name);
    let (item, took_next) = with_argument(option.argument, own, written, value.is_some(), has_next);
    out.push(Reading { index, item });
    took_next
}

/// An option with or without an attached value: its reading, and whether its value
/// is the next element.
fn with_argument(
    argument: Argument,
    name: String,
    written: String,
    attached: bool,
    has_next: bool,
) -> (Result<Item, ReadError>, bool) {
    match (argument, attached) {
        (Argument::None, true) => (Err(ReadError::UnexpectedValue { name, written }), false),
        (Argument::Required, false) if !has_next => {
            (Err(ReadError::MissingValue { name, written }), false)
        }
        (Argument::Required, false) => (Ok(Item::Option { name, written }), true),
        _ => (Ok(Item::Option { name, written }), false),
    }
}

/// `-letters` (the dash removed): each letter an option until one takes the rest as
/// its value; true when its value is the next element.
fn read_shorts(
    catalog: &OptionCatalog,
    index: usize,
    letters: &str,
    has_next: bool,
    out: &mut Vec<Reading>,
) -> bool {
    for (at, letter) in letters.char_indices() {
        let written = format!("-{letter}");
        let Some(option) = catalog.find_short(letter) else {
            let item = Err(ReadError::Unknown {
                program: catalog.program.clone(),
                written,
                suggestion: None,
            });
            out.push(Reading { index, item });
            return false;
        };
        let rest = &letters[at + letter.len_utf8()..];
        let name = catalog.short_name(option);
        if option.argument == Argument::None {
            out.push(Reading {
                index,
                item: Ok(Item::Option { name, written }),
            });
            continue;
        }
        let (item, took_next) =
            with_argument(option.argument, name, written, !rest.is_empty(), has_next);
        out.push(Reading { index, item });
        return took_next && rest.is_empty();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small catalog in the shape of srun's.
    fn catalog() -> OptionCatalog {
        OptionCatalog::from_json(
            r#"{"program": "srun", "version": "1", "package_version": "1-1", "source": "test",
            "long": [
              {"name": "cpu-bind", "argument": "required", "short": null, "alias_of": null},
              {"name": "cpu_bind", "argument": "required", "short": null, "alias_of": "cpu-bind"},
              {"name": "cpus-per-task", "argument": "required", "short": "c", "alias_of": null},
              {"name": "exclude", "argument": "required", "short": "x", "alias_of": null},
              {"name": "exclusive", "argument": "optional", "short": null, "alias_of": null},
              {"name": "mem", "argument": "required", "short": null, "alias_of": null},
              {"name": "mem-bind", "argument": "required", "short": null, "alias_of": null},
              {"name": "nodes", "argument": "required", "short": "N", "alias_of": null},
              {"name": "nodelist", "argument": "required", "short": "w", "alias_of": null},
              {"name": "overcommit", "argument": "none", "short": "O", "alias_of": null},
              {"name": "verbose", "argument": "none", "short": "v", "alias_of": null}
            ],
            "short": [
              {"letter": "F", "argument": "required", "long": null},
              {"letter": "I", "argument": "optional", "long": null},
              {"letter": "N", "argument": "required", "long": "nodes"},
              {"letter": "O", "argument": "none", "long": "overcommit"},
              {"letter": "c", "argument": "required", "long": "cpus-per-task"},
              {"letter": "v", "argument": "none", "long": "verbose"},
              {"letter": "w", "argument": "required", "long": "nodelist"},
              {"letter": "x", "argument": "required", "long": "exclude"}
            ]}"#,
        )
        .unwrap()
    }

    /// Each reading as `index:name`, `index:=of` (a value), `index:--`, `index:operand`
    /// or `index:!error`.
    fn shown(args: &[&str]) -> Vec<String> {
        read(&catalog(), args)
            .into_iter()
            .map(|r| match r.item {
                Ok(Item::Option { name, .. }) => format!("{}:{name}", r.index),
                Ok(Item::Value { of }) => format!("{}:={of}", r.index),
                Ok(Item::End) => format!("{}:--", r.index),
                Ok(Item::Operand) => format!("{}:operand", r.index),
                Err(e) => format!("{}:!{e}", r.index),
            })
            .collect()
    }

    #[test]
    fn long_names_exact_attached_and_separate() {
        assert_eq!(shown(&["--nodelist=n1"]), ["0:--nodelist"]);
        assert_eq!(shown(&["--mem", "4G"]), ["0:--mem", "1:=--mem"]);
        assert_eq!(shown(&["--exclusive"]), ["0:--exclusive"]);
        assert_eq!(shown(&["--exclusive=user"]), ["0:--exclusive"]);
    }

    #[test]
    fn unique_prefixes_resolve_and_exact_names_win() {
        assert_eq!(shown(&["--nodel=n7"]), ["0:--nodelist"]);
        assert_eq!(shown(&["--nodes=2"]), ["0:--nodes"]);
        assert_eq!(shown(&["--cpus=4"]), ["0:--cpus-per-task"]);
        // `mem` is a name and a prefix of `mem-bind`: the name wins.
        assert_eq!(shown(&["--mem=4G"]), ["0:--mem"]);
        // A prefix of one option under two spellings is that option.
        assert_eq!(shown(&["--cpu_=x"]), ["0:--cpu-bind"]);
        assert_eq!(shown(&["--cpu_bind=x"]), ["0:--cpu-bind"]);
    }

    #[test]
    fn an_ambiguous_prefix_names_its_candidates() {
        assert_eq!(
            shown(&["--exclu=x"]),
            ["0:!`--exclu` is ambiguous: a prefix of --exclude, --exclusive"]
        );
        assert_eq!(
            shown(&["--cpu"]),
            ["0:!`--cpu` is ambiguous: a prefix of --cpu-bind, --cpus-per-task"]
        );
        assert_eq!(
            shown(&["--no"]),
            ["0:!`--no` is ambiguous: a prefix of --nodelist, --nodes"]
        );
    }

    #[test]
    fn short_options_attached_separate_and_bundled() {
        assert_eq!(shown(&["-N2"]), ["0:--nodes"]);
        assert_eq!(shown(&["-N", "2"]), ["0:--nodes", "1:=--nodes"]);
        assert_eq!(shown(&["-wn8"]), ["0:--nodelist"]);
        assert_eq!(shown(&["-vN2"]), ["0:--verbose", "0:--nodes"]);
        assert_eq!(shown(&["-vO"]), ["0:--verbose", "0:--overcommit"]);
        assert_eq!(
            shown(&["-vc", "4"]),
            ["0:--verbose", "0:--cpus-per-task", "1:=--cpus-per-task"]
        );
        // A letter without a long name keeps its letter; an optional value only attached.
        assert_eq!(shown(&["-Ffile"]), ["0:-F"]);
        assert_eq!(shown(&["-I", "-v"]), ["0:-I", "1:--verbose"]);
        assert_eq!(shown(&["-I5"]), ["0:-I"]);
    }

    #[test]
    fn a_required_value_is_never_read_as_an_option() {
        assert_eq!(shown(&["--mem", "-wn8"]), ["0:--mem", "1:=--mem"]);
        assert_eq!(
            shown(&["-c", "--nodelist=n1"]),
            ["0:--cpus-per-task", "1:=--cpus-per-task"]
        );
        assert_eq!(
            shown(&["-x", "--", "-N2"]),
            ["0:--exclude", "1:=--exclude", "2:--nodes"]
        );
        // An optional value is never the next element.
        assert_eq!(
            shown(&["--exclusive", "-N2"]),
            ["0:--exclusive", "1:--nodes"]
        );
    }

    #[test]
    fn options_end_at_double_dash_and_at_an_operand() {
        assert_eq!(
            shown(&["-v", "--", "-N2"]),
            ["0:--verbose", "1:--", "2:operand"]
        );
        assert_eq!(shown(&["hostname", "-N2"]), ["0:operand", "1:operand"]);
        assert_eq!(shown(&["-"]), ["0:operand"]);
    }

    #[test]
    fn refusals_of_the_program_are_errors() {
        assert_eq!(shown(&["--mem"]), ["0:!`--mem` needs a value"]);
        assert_eq!(
            shown(&["-vN"]),
            ["0:--verbose", "0:!`--nodes` needs a value"]
        );
        assert_eq!(
            shown(&["--overcommit=yes"]),
            ["0:!`--overcommit` takes no value"]
        );
        assert_eq!(shown(&["-y"]), ["0:!`-y` is not an option of srun"]);
        let r = read(&catalog(), &["--nodelsit=n1"]);
        assert_eq!(
            r[0].item,
            Err(ReadError::Unknown {
                program: "srun".into(),
                written: "--nodelsit".into(),
                suggestion: Some("--nodelist".into()),
            })
        );
        // An unknown name consumes nothing: the next element is read on its own.
        assert_eq!(shown(&["--zzz", "-N2"]).len(), 2);
    }
}
