//! Sensitive values: which environment variables are secrets, and how they are masked.
//!
//! A variable is sensitive when its name matches the documented default list (exact
//! names, or suffixes such as `_TOKEN`). Sensitive values never appear in rendered
//! plans, JSON or golden files; they reach processes only through their environment.

/// What a masked value shows.
pub const MASK: &str = "(sensitive)";

/// Exact names that are always sensitive.
pub const SENSITIVE_NAMES: &[&str] = &[
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "OPENAI_API_KEY",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
];

/// Name suffixes (and infixes, for `PASSWORD`) that mark a variable sensitive.
pub const SENSITIVE_SUFFIXES: &[&str] = &["_TOKEN", "_KEY", "_SECRET", "_PASSWORD", "_CREDENTIALS"];

/// Whether the variable `name` holds a secret.
pub fn is_sensitive(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SENSITIVE_NAMES.contains(&upper.as_str())
        || SENSITIVE_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || upper.contains("PASSWORD")
        || upper == "TOKEN"
        || upper == "SECRET"
}

/// A stable digest standing in for a secret value (for hashing and state).
pub fn digest(value: &str) -> String {
    format!("blake3:{}", &blake3::hash(value.as_bytes()).to_hex()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_list() {
        for s in [
            "HF_TOKEN",
            "MY_API_KEY",
            "DB_PASSWORD",
            "X_SECRET",
            "hf_token",
        ] {
            assert!(is_sensitive(s), "{s}");
        }
        for s in [
            "PYTHONUNBUFFERED",
            "VLLM_PORT",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_sensitive(s), "{s}");
        }
    }
}
