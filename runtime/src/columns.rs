//! Reading a row column by column, the same way from the pool and from an in-place SQLite reader.
//!
//! A list page can be read two ways (see [`crate::db`]): through sqlx's pool, whose rows are
//! `AnyRow`s, or on SQLite by a `rusqlite` connection, whose rows are never copied into
//! `AnyRow`s at all. A type that lists implement [`FromColumns`] once, reading its columns in the
//! order its SELECT list names them through a [`Cursor`], and either path can build it. Columns
//! are read by position, not looked up by name: the name is only checked in debug builds, so a
//! SELECT list and its reader that drift apart fail every test that reads one.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::error::ApiError;

/// A row whose columns can be read by position.
pub trait Columns {
    /// The name of column `index`, as the statement gave it.
    fn name(&self, index: usize) -> Option<&str>;
    fn text(&self, index: usize) -> Result<Option<String>, ApiError>;
    fn int(&self, index: usize) -> Result<Option<i64>, ApiError>;
}

impl Columns for AnyRow {
    fn name(&self, index: usize) -> Option<&str> {
        use sqlx::Column as _;
        self.columns().get(index).map(|column| column.name())
    }
    fn text(&self, index: usize) -> Result<Option<String>, ApiError> {
        Ok(self.try_get(index)?)
    }
    fn int(&self, index: usize) -> Result<Option<i64>, ApiError> {
        Ok(self.try_get(index)?)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn name(&self, index: usize) -> Option<&str> {
        self.as_ref().column_name(index).ok()
    }
    fn text(&self, index: usize) -> Result<Option<String>, ApiError> {
        Ok(self.get(index)?)
    }
    fn int(&self, index: usize) -> Result<Option<i64>, ApiError> {
        Ok(self.get(index)?)
    }
}

/// Reads a row's columns one after another, from the first.
pub struct Cursor<'r, R: ?Sized> {
    row: &'r R,
    next: usize,
}

impl<'r, R: Columns + ?Sized> Cursor<'r, R> {
    pub fn new(row: &'r R) -> Self {
        Self { row, next: 0 }
    }

    /// The next column's position, checked against the name the reader expects (debug builds).
    fn advance(&mut self, name: &str) -> usize {
        let index = self.next;
        debug_assert_eq!(
            self.row.name(index),
            Some(name),
            "column {index} is not the one its reader expects"
        );
        self.next += 1;
        index
    }

    /// The next column, text or null.
    pub fn text(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        let index = self.advance(name);
        self.row.text(index)
    }

    /// The next column, text that is never null.
    pub fn required_text(&mut self, name: &str) -> Result<String, ApiError> {
        self.text(name)?.ok_or_else(|| null(name))
    }

    /// The next column, an integer or null.
    pub fn int(&mut self, name: &str) -> Result<Option<i64>, ApiError> {
        let index = self.advance(name);
        self.row.int(index)
    }

    /// The next column, an integer that is never null.
    pub fn required_int(&mut self, name: &str) -> Result<i64, ApiError> {
        self.int(name)?.ok_or_else(|| null(name))
    }
}

fn null(name: &str) -> ApiError {
    ApiError::internal(format!("column `{name}` is null"))
}

/// A value that reads itself from a row's columns, in the order its SELECT list names them.
pub trait FromColumns: Sized {
    fn from_columns<R: Columns + ?Sized>(row: &mut Cursor<'_, R>) -> Result<Self, ApiError>;
}
