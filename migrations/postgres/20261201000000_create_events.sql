-- Every change a user's own systems may want to hear about is an event, written by the owner's
-- verb in the same transaction as the change it records (an outbox): nothing happens without its
-- event, and a rolled-back change leaves none. Kept 30 days (housekeeping).
create table events (
    -- the order events were written in: one transaction's events share a time
    seq bigint generated always as identity primary key,
    id text not null unique,
    workspace_id text not null references workspaces(id) on delete cascade,
    type text not null,
    -- epoch ms, the service clock's (a test clock in test mode)
    created_at bigint not null,
    -- a JSON object: the ids involved and a few display fields, under 20 KB
    data text not null
);
-- newest first, and a page from a time on
create index events_workspace_time_idx on events (workspace_id, created_at, seq);
-- the events of some types
create index events_workspace_type_time_idx on events (workspace_id, type, created_at, seq);
-- housekeeping's deletions by age
create index events_created_idx on events (created_at);

-- When the person first replied while enrolled (epoch ms): `enrollment.replied` is written once.
alter table enrollments add column replied_at bigint;
