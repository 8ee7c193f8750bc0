-- Branching sequences, A/B variants and InMail (steps are JSON on the sequence row; these are
-- what the engine records as it walks them).

-- When a `condition` step waiting `within_days` gives up and takes its `else_step`; null when
-- the enrollment is not waiting on a condition.
alter table enrollments add column condition_until bigint;

-- The A/B variant a step's intent and its history entry were sent with (null: the step has none).
alter table outbound_intents add column variant text;
alter table enrollment_events add column variant text;

-- The InMail credits of a sandbox account (null: the account cannot send InMail at all).
alter table sandbox_accounts add column inmail_credits integer;

-- InMails count against their own daily limit: the kind check gains `inmail`.
create table sender_usage_new (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null references senders (id) on delete cascade,
    -- `connection_request`, `message`, `profile_view` or `inmail`
    kind text not null,
    at integer not null,
    -- the sender's local date when it was counted, `YYYY-MM-DD`
    local_day text not null,
    constraint sender_usage_kind_check check (kind in ('connection_request', 'message', 'profile_view', 'inmail'))
);
insert into sender_usage_new (id, workspace_id, sender_id, kind, at, local_day)
select id, workspace_id, sender_id, kind, at, local_day from sender_usage;
drop table sender_usage;
alter table sender_usage_new rename to sender_usage;
create index sender_usage_sender_idx on sender_usage (sender_id, kind, at);
create index sender_usage_workspace_idx on sender_usage (workspace_id, local_day);
