-- People, workspaces, memberships and API keys: who may call the API, as whom, in which workspace.
-- Times are integer milliseconds since the epoch (UTC); ids are prefixed random strings.

create table people (
    id text primary key,
    -- stored lowercased so sign-in and `member add` match however the address is typed
    email text not null,
    display_name text not null,
    password_hash text not null,
    created_at integer not null,
    constraint people_email_key unique (email)
);

create table workspaces (
    id text primary key,
    name text not null,
    credits_balance integer not null default 0,
    terms_accepted_at integer,
    terms_accepted_by text references people (id),
    created_at integer not null,
    constraint workspaces_credits_nonnegative check (credits_balance >= 0)
);

create table memberships (
    workspace_id text not null references workspaces (id) on delete cascade,
    person_id text not null references people (id) on delete cascade,
    role text not null,
    created_at integer not null,
    constraint memberships_pkey primary key (workspace_id, person_id),
    constraint memberships_role_check check (role in ('owner', 'admin', 'member'))
);

create index memberships_person_idx on memberships (person_id);

create table api_keys (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    person_id text not null references people (id) on delete cascade,
    name text not null,
    -- comma-separated, from `read`, `write`, `send`
    scopes text not null,
    -- the first characters of the value, shown in listings so a person can tell keys apart
    prefix text not null,
    -- sha-256 of the value; the value itself is never stored
    key_hash text not null,
    environment text not null,
    expires_at integer,
    created_by text not null references people (id),
    created_at integer not null,
    last_used_at integer,
    revoked_at integer,
    constraint api_keys_hash_key unique (key_hash),
    constraint api_keys_environment_check check (environment in ('live', 'test'))
);

create index api_keys_workspace_idx on api_keys (workspace_id, created_at);
