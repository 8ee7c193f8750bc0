-- Sender accounts: the network accounts outreach goes out from (owned by the senders work; this
-- file carries exactly the shared contract's columns so sequences can name senders).

create table senders (
    id text primary key,
    workspace_id text not null references workspaces (id),
    name text not null,
    -- `connected`, `needs_reauth`, `restricted` or `disconnected`
    status text not null,
    timezone text not null,
    -- json: seven weekdays, each a list of {start, end} windows
    working_hours text not null,
    -- json: connection_requests_per_day, connection_requests_per_week, messages_per_day, profile_views_per_day
    limits text not null,
    paused_until integer,
    pause_reason text,
    created_at integer not null,
    updated_at integer not null
);
