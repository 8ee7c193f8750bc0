-- A new API key's value waits in web_sessions.flash, in plain text, until the next page shows it.
-- It now expires five minutes after it was set (epoch milliseconds; null when there is no flash),
-- so a redirect that is never followed does not leave the value readable for the rest of the
-- session. A column rather than an expiry encoded in the value, so expired flashes of every
-- session can be cleared with one plain comparison on both databases.
alter table web_sessions add column flash_expires_at integer;
