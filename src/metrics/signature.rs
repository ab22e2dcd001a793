//! Signatures: every option that changes a number, in sacrebleu's style
//! (`name|key:value|...|v:VERSION`), built field by field and rendered by
//! one function, so nothing patches signature strings after the fact.

use std::fmt;

/// A metric's signature: its name and the fields that change its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    name: &'static str,
    fields: Vec<(&'static str, String)>,
}

impl Signature {
    /// A signature for metric `name` with no fields yet.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            fields: Vec::new(),
        }
    }

    /// Adds `key:value`.
    pub fn with(mut self, key: &'static str, value: impl fmt::Display) -> Self {
        self.fields.push((key, value.to_string()));
        self
    }

    /// Adds `key:yes` or `key:no`.
    pub fn flag(self, key: &'static str, on: bool) -> Self {
        self.with(key, if on { "yes" } else { "no" })
    }

    /// Ends the signature with Blindspot's version (`v:X.Y.Z`).
    pub fn versioned(self) -> Self {
        self.with("v", super::VERSION)
    }

    /// The value of `key`, if the signature has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        for (key, value) in &self.fields {
            write!(f, "|{key}:{value}")?;
        }
        Ok(())
    }
}

impl serde::Serialize for Signature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The `nrefs` field: the count, or `var` when it varies across segments (sacrebleu).
pub fn nrefs_value(nrefs: Option<usize>) -> String {
    nrefs.map_or("var".to_owned(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_fields_in_order_with_the_version_last() {
        let s = Signature::new("bleu")
            .with("nrefs", nrefs_value(None))
            .flag("eff", true)
            .versioned();
        assert_eq!(
            s.to_string(),
            format!("bleu|nrefs:var|eff:yes|v:{}", super::super::VERSION)
        );
        assert_eq!(s.get("eff"), Some("yes"));
        assert_eq!(s.get("tok"), None);
    }
}
