//! The text log's field formatter without colours: the same bytes as tracing-subscriber's
//! `DefaultFields` writes when ANSI is off, for a third of the instructions.
//!
//! Every request writes one access line of about ten fields (and a span of three). With ANSI off,
//! `DefaultFields` still wraps every field name and every `=` in a no-op `nu_ansi_term` style and
//! runs each through `core::fmt` twice over; callgrind put that at about 8,000 instructions a
//! request, more than the credential's whole SQL statement. This writes `name=value` straight to
//! the writer and quotes plain strings without the `Debug` machinery when nothing in them needs
//! escaping. Anything unusual (a `message`, an `r#` name, an error, a string that needs
//! escaping) takes exactly the path `DefaultFields` takes, and the tests below hold the two
//! formatters to the same output. With ANSI on (a terminal), `DefaultFields` is used as it is.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};

/// `DefaultFields` with ANSI off, faster (see the module header).
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainFields;

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = PlainVisitor<'a>;

    fn make_visitor(&self, writer: Writer<'a>) -> Self::Visitor {
        PlainVisitor {
            writer,
            is_empty: true,
            result: Ok(()),
        }
    }
}

/// The visitor of [`PlainFields`]: `DefaultVisitor`'s rules, without styles.
pub struct PlainVisitor<'a> {
    writer: Writer<'a>,
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// The field's name when `DefaultVisitor` would write it as `name=value` with ANSI off; `None`
    /// when it does something else (skips a `log.` field, writes a `message` bare, strips `r#`)
    /// or the writer has colours, and the field goes to `DefaultVisitor` itself.
    fn plain_name(&self, field: &Field) -> Option<&'static str> {
        let name = field.name();
        let plain = name != "message" && !name.starts_with("log.") && !name.starts_with("r#");
        (plain && !self.writer.has_ansi_escapes()).then_some(name)
    }

    fn maybe_pad(&mut self) {
        if self.is_empty {
            self.is_empty = false;
        } else {
            self.result = self.writer.write_char(' ');
        }
    }

    /// Lets `DefaultVisitor` write one field, where this does not.
    fn delegate(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        // It writes every field but the `log.` ones (with the `tracing-log` feature).
        if !field.name().starts_with("log.") {
            self.is_empty = false;
        }
    }
}

/// Whether `Debug` would write `text` as itself between quotes: printable ASCII without `"` or
/// `\`.
fn quotes_plainly(text: &str) -> bool {
    text.bytes()
        .all(|byte| (0x20..0x7f).contains(&byte) && byte != b'"' && byte != b'\\')
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        match self.plain_name(field) {
            Some(name) if quotes_plainly(value) => {
                self.maybe_pad();
                if self.result.is_ok() {
                    self.result = write_quoted(&mut self.writer, name, value);
                }
            }
            _ => self.delegate(field, |visitor| visitor.record_str(field, value)),
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_err() {
            return;
        }
        self.delegate(field, |visitor| visitor.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        match self.plain_name(field) {
            Some(name) => {
                self.maybe_pad();
                if self.result.is_ok() {
                    self.result = write!(self.writer, "{name}={value:?}");
                }
            }
            None => self.delegate(field, |visitor| visitor.record_debug(field, value)),
        }
    }
}

fn write_quoted(writer: &mut Writer<'_>, name: &str, value: &str) -> fmt::Result {
    writer.write_str(name)?;
    writer.write_str("=\"")?;
    writer.write_str(value)?;
    writer.write_char('"')
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::fmt::format::DefaultFields;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[derive(Debug)]
    struct Failure;
    impl fmt::Display for Failure {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("it broke")
        }
    }
    impl std::error::Error for Failure {}

    /// Logs the same events (an access line, odd strings, errors, every value kind) through a
    /// subscriber with `fields` and returns the text, timestamps left out.
    fn log_with<F>(fields: F) -> String
    where
        F: for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static,
    {
        let out = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(out.clone())
            .with_ansi(false)
            .without_time()
            .fmt_fields(fields)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", request_id = %"req_1", method = %"GET", path = %"/api/v1/x y");
            span.in_scope(|| {
                tracing::info!(
                    request_id = %"req_1",
                    method = %"GET",
                    route = "/api/v1/workspace",
                    path = %"/api/v1/workspace",
                    action = Some("get_workspace"),
                    status = 200u16,
                    duration_ms = 0.123_f64,
                    credential_id = None::<&str>,
                    "request"
                );
                tracing::info!(
                    quoted = "say \"hi\"\\",
                    tab = "a\tb",
                    unicode = "é\u{301}",
                    esc = "\x1b[31m",
                    "odd {}",
                    "strings"
                );
                tracing::warn!(
                    r#type = "raw",
                    big = u64::MAX,
                    neg = -5i64,
                    flag = true,
                    small = 1e-9_f64,
                    message = "ex\x1bplicit"
                );
                let error: &(dyn std::error::Error + 'static) = &Failure;
                tracing::error!(error, "failed");
                tracing::error!(error = %Failure, debug = ?Failure, empty = "", "\x1b[2J");
            });
        });
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn lines_are_the_bytes_default_fields_writes_without_ansi() {
        let plain = log_with(PlainFields);
        let default = log_with(DefaultFields::new());
        assert!(plain.contains("route=\"/api/v1/workspace\""), "{plain}");
        assert_eq!(plain, default);
    }
}
