//! `rayshare check`: from what the shell read with the user's kubeconfig to one verdict
//! line per check (pure: the shell reads, this decides, the table and JSON render here).
//!
//! Each step decides from what was read before it: which webhook registration is this
//! installation's ([`registration`]), what it points at ([`service`]), which operators are
//! there ([`operators`]), and whether a server-side dry-run RayJob came back rewritten
//! ([`dry_run`]).

pub mod dry_run;
pub mod operators;
pub mod registration;
pub mod service;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// What was checked (a short, stable name: `webhook`, `caBundle`, `dry-run`, ...).
    pub check: &'static str,
    pub level: Level,
    /// What was found.
    pub said: String,
    /// What to do about it (warn and fail lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Line {
    pub fn ok(check: &'static str, said: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Ok,
            said: said.into(),
            hint: None,
        }
    }

    pub fn warn(check: &'static str, said: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Warn,
            said: said.into(),
            hint: Some(hint.into()),
        }
    }

    pub fn fail(check: &'static str, said: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Fail,
            said: said.into(),
            hint: Some(hint.into()),
        }
    }
}

/// Every line, and whether none failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<Line>,
}

impl Report {
    pub fn new(checks: Vec<Line>) -> Self {
        let ok = checks.iter().all(|l| l.level != Level::Fail);
        Self { ok, checks }
    }

    /// 0 when nothing failed (warnings included), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.ok)
    }
}

/// `LEVEL  CHECK  what was found`, and the hint on the next line.
pub fn render_table(report: &Report) -> String {
    let width = report
        .checks
        .iter()
        .map(|l| l.check.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for line in &report.checks {
        out.push_str(&format!(
            "{:<4}  {:<width$}  {}\n",
            line.level.word(),
            line.check,
            line.said
        ));
        if let Some(hint) = &line.hint {
            out.push_str(&format!("{:<4}  {:<width$}  hint: {hint}\n", "", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests;
