-- Imports: one row per completed import, with its counts and the first row-level errors.
--
-- An import runs in one transaction with the prospects it writes and the credits it spends, so a
-- failed import leaves no row here: every row is `completed`. The status column is kept so that
-- imports run in the background later need no migration of existing rows.

create table imports (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    status text not null,
    -- `csv` or `rows`: what the request carried
    source_format text not null,
    -- `skip` or `update`
    on_duplicate text not null,
    -- the list the rows were added to; the history outlives the list
    list_id text references lists (id) on delete set null,
    -- whether the import made that list (from `list_name`)
    list_created integer not null default 0,
    row_count integer not null,
    created_count integer not null,
    updated_count integer not null,
    duplicate_count integer not null,
    invalid_count integer not null,
    -- json array of {row, field, message}, the first 100 invalid rows
    errors text not null default '[]',
    credits_spent integer not null,
    person_id text,
    created_at integer not null,
    constraint imports_source_format_check check (source_format in ('csv', 'rows')),
    constraint imports_on_duplicate_check check (on_duplicate in ('skip', 'update'))
);

-- paging order is newest first with the id as tie-break, always within one workspace
create index imports_page_idx on imports (workspace_id, created_at desc, id desc);
