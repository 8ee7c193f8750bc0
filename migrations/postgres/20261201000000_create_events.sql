-- Every change a user's own systems may want to hear about is an event, written by the owner's
-- verb in the same transaction as the change it records (an outbox): nothing happens without its
-- event, and a rolled-back change leaves none. Kept 30 days (housekeeping).
create table events (
    id text primary key,
    workspace_id text not null references workspaces(id) on delete cascade,
    type text not null,
    -- epoch ms, the service clock's (a test clock in test mode)
    created_at bigint not null,
    -- a JSON object: the ids involved and a few display fields, under 20 KB
    data text not null
);
-- newest first, and a page from a time on
create index events_workspace_time_idx on events (workspace_id, created_at, id);
-- the events of some types
create index events_workspace_type_time_idx on events (workspace_id, type, created_at, id);
-- housekeeping's deletions by age
create index events_created_idx on events (created_at);
