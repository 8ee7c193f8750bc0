-- Lists: named sets of prospects, the unit that is imported into, processed and scored.

create table lists (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    name text not null,
    description text,
    -- the targeting a `process_list` call uses when none is given
    default_targeting_id text,
    -- `idle`, `processing`, `processed` or `failed`
    processing_status text not null default 'idle',
    processed_at bigint,
    created_at bigint not null,
    updated_at bigint not null,
    -- list names are how people tell lists apart
    constraint lists_name_key unique (workspace_id, name),
    constraint lists_processing_status_check check (processing_status in ('idle', 'processing', 'processed', 'failed'))
);

create index lists_page_idx on lists (workspace_id, created_at desc, id desc);

create table list_members (
    list_id text not null references lists (id) on delete cascade,
    prospect_id text not null references prospects (id) on delete cascade,
    workspace_id text not null,
    added_at bigint not null,
    constraint list_members_pkey primary key (list_id, prospect_id)
);

-- a prospect's lists, and deletes of prospects, look members up by prospect
create index list_members_prospect_idx on list_members (prospect_id);
create index list_members_page_idx on list_members (list_id, added_at desc, prospect_id desc);
