-- The workspace's do-not-contact list: people by profile URL or email, companies by domain.
-- A prospect's do_not_contact flag says whether an entry matches them (see the actions'
-- prospects::do_not_contact): one rule, written both ways.
create table do_not_contact_entries (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    -- profile_url, email or domain; value normalised as prospects' are
    kind text not null,
    value text not null,
    reason text,
    -- the person who added it; null when it came from a prospect's flag set by a job
    added_by text,
    -- manual, import or prospect
    source text not null,
    created_at bigint not null
);

create unique index do_not_contact_entries_value on do_not_contact_entries (workspace_id, kind, value);
create index do_not_contact_entries_newest on do_not_contact_entries (workspace_id, created_at);
