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
    created_at bigint not null,
    constraint do_not_contact_entries_kind_check check (kind in ('profile_url', 'email', 'domain')),
    constraint do_not_contact_entries_source_check check (source in ('manual', 'import', 'prospect'))
);

create unique index do_not_contact_entries_value on do_not_contact_entries (workspace_id, kind, value);
create index do_not_contact_entries_newest on do_not_contact_entries (workspace_id, created_at);

-- Prospects marked before the list existed are on it, so removing an entry that also matches
-- them never clears a mark a person or a reply set.
insert into do_not_contact_entries (id, workspace_id, kind, value, reason, added_by, source, created_at)
select 'dnc_' || p.id, p.workspace_id,
    case when p.profile_url is not null then 'profile_url' else 'email' end,
    coalesce(p.profile_url, p.email), null, null, 'prospect', p.updated_at
from prospects p
where p.do_not_contact <> 0 and (p.profile_url is not null or p.email is not null)
on conflict do nothing;
