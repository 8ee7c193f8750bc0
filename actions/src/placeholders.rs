//! Bind placeholders for statements with thousands of parameters (an import's batches, a scoring
//! run's results), shared by the owners that write them.
//!
//! Both backends accept `$n`, which is what the rest of the service writes. But SQLite finds a
//! numbered parameter's name by walking a list, once per parameter, when a statement is prepared
//! and again when it is bound: a 20,000-parameter insert costs hundreds of millions of steps, and a
//! 100,000-row import took 80 seconds that way. Anonymous `?` placeholders skip the lookup, so on
//! SQLite the big statements use them, and every value is bound where it appears (shared values
//! such as the workspace are bound once per row). PostgreSQL keeps `$n`, numbered in order of
//! appearance, so the same bind sequence serves both.
//!
//! Lookups with long `in (...)` lists run unprepared (`persistent(false)`): PostgreSQL settles on a
//! generic plan for a prepared statement after a few runs, and a plan made while the table was
//! small (a sequential scan comparing each row with every listed value) is kept as it grows; at
//! 100,000 prospects one lookup took 20 seconds. Unprepared, each lookup is planned with its values.

use outreach_runtime::prelude::Backend;

/// Appends placeholders in order of appearance.
pub struct Placeholders {
    backend: Backend,
    next: usize,
}

impl Placeholders {
    pub fn new(backend: Backend) -> Self {
        Self { backend, next: 1 }
    }

    /// Appends one placeholder.
    pub fn one(&mut self, sql: &mut String) {
        match self.backend {
            Backend::Sqlite => sql.push('?'),
            Backend::Postgres => {
                sql.push('$');
                sql.push_str(&self.next.to_string());
            }
        }
        self.next += 1;
    }

    /// Appends `count` placeholders separated by commas.
    pub fn list(&mut self, sql: &mut String, count: usize) {
        for index in 0..count {
            if index > 0 {
                sql.push_str(", ");
            }
            self.one(sql);
        }
    }

    /// Appends `(p, p, ...)` with `count` placeholders.
    pub fn tuple(&mut self, sql: &mut String, count: usize) {
        sql.push('(');
        self.list(sql, count);
        sql.push(')');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_suit_the_backend() {
        let mut sql = String::from("select ");
        let mut postgres = Placeholders::new(Backend::Postgres);
        postgres.one(&mut sql);
        sql.push_str(" in ");
        postgres.tuple(&mut sql, 3);
        assert_eq!(sql, "select $1 in ($2, $3, $4)");
        let mut sql = String::new();
        Placeholders::new(Backend::Sqlite).tuple(&mut sql, 2);
        assert_eq!(sql, "(?, ?)");
    }
}
