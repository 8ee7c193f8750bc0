-- Sender accounts: the network accounts outreach goes out from, and what each one has done.

create table senders (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    name text not null,
    -- `connected`, `needs_reauth`, `restricted` or `disconnected`: the network's word
    status text not null,
    -- an IANA name, checked against the bundled tz database when written
    timezone text not null,
    -- JSON: windows per weekday, each day sorted, checked when written
    working_hours text not null,
    -- JSON: the configured limits (under the ceiling); the warm-up is worked out from created_at
    limits text not null,
    -- set after a provider limit signal; nothing is sent before it
    paused_until bigint,
    pause_reason text,
    -- deleting is soft so the usage rows, and the dashboard's figures, keep their sender
    deleted_at bigint,
    created_at bigint not null,
    updated_at bigint not null,
    constraint senders_status_check check (status in ('connected', 'needs_reauth', 'restricted', 'disconnected'))
);

create index senders_page_idx on senders (workspace_id, created_at desc, id desc);

-- One row per counted action: limits are counts over instants (today in the sender's zone, the
-- rolling 7 days), and the dashboard groups by local_day.
create table sender_usage (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null references senders (id) on delete cascade,
    -- `connection_request`, `message` or `profile_view`
    kind text not null,
    at bigint not null,
    -- the sender's local date when it was counted, `YYYY-MM-DD`
    local_day text not null,
    constraint sender_usage_kind_check check (kind in ('connection_request', 'message', 'profile_view'))
);

-- every quota check counts one sender's rows of one kind over the last 7 days
create index sender_usage_sender_idx on sender_usage (sender_id, kind, at);
-- the dashboard reads a workspace's usage by day
create index sender_usage_workspace_idx on sender_usage (workspace_id, local_day);
