//! Rendering an error with its causes. Every error type of the crate names its cause as its
//! `source()` and never repeats it in its own message, so a message alone (`{e}`) lacks the cause:
//! render with [`Chain`] (or anyhow's `{:#}`) wherever an error is turned into text.

use std::fmt;

/// Displays an error and each of its sources, joined by `: `, as anyhow's `{:#}` does.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Chain;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to open {path}")]
    struct Outer {
        path: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn chain_says_each_cause_once_and_in_order() {
        let e = Outer { path: "/x", source: std::io::Error::from_raw_os_error(libc::ENOENT) };
        assert_eq!(e.to_string(), "failed to open /x");
        assert_eq!(Chain(&e).to_string(), "failed to open /x: No such file or directory (os error 2)");
        assert_eq!(Chain(&e).to_string(), format!("{:#}", anyhow::Error::new(e)));
    }
}
