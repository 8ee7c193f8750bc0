-- What the scheduler is about to do on the network, committed before it does it.
--
-- An intent row is written (with the sender's quota unit) in a transaction of its own before the
-- provider call, and completed after it. A job that finds an intent still `pending` does not
-- know whether the call happened (the process died between the call and the commit): it asks
-- the network by the intent's id, which the network saw as the call's idempotency token, and
-- never sends blindly again. One intent per (enrollment, step) and per queued reply.

create table outbound_intents (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    prospect_id text not null,
    -- `profile_view`, `invitation` or `message`
    kind text not null,
    enrollment_id text,
    step_index integer,
    -- the conversation message a reply or a message step is
    message_id text,
    text text,
    -- the sender_usage row counted for it, given back if it definitely did not happen
    usage_id text,
    -- `pending`, `sent` or `failed`
    status text not null,
    outcome text,
    created_at integer not null,
    completed_at integer,
    constraint outbound_intents_status_check check (status in ('pending', 'sent', 'failed'))
);

create unique index outbound_intents_step_key on outbound_intents (enrollment_id, step_index)
    where enrollment_id is not null;
create unique index outbound_intents_message_key on outbound_intents (message_id)
    where message_id is not null and enrollment_id is null;
create index outbound_intents_sender_idx on outbound_intents (sender_id, created_at);

-- An enrollment that sent a connection request waits for its acceptance before its next step.
alter table enrollments add column invited_at integer;
alter table enrollments add column accepted_at integer;
