-- Pacing counts every call the network saw, and a call whose outcome is unknown goes back through
-- the gate before it is made again.
--
-- A sender's last call to the network, refused or not (epoch ms): the 30-90 s gap between two of
-- its actions is measured from here. Limits still count `sender_usage` rows, which a refused call
-- gives back; pacing cannot, or a refusal would let the next action follow within milliseconds.
alter table senders add column last_action_at integer;
update senders set last_action_at = (select max(u.at) from sender_usage u where u.sender_id = senders.id);

-- An intent is now one of:
--   pending     committed before its call; the call is under way, or its process died: the
--               network is asked before anything else, and the sender makes no other call
--   unanswered  the call came back without an outcome (a transient fault): the network is asked
--               before the step goes again; the call is over, so the sender is free
--   unsent      the network has no record of it: it waits for the gate (hours, gap, limits) and
--               is then called again under the same id, with a quota unit taken at that moment
--   sent, failed
-- SQLite cannot change a check constraint in place: the table is rebuilt (nothing refers to it).
create table outbound_intents_new (
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
    status text not null,
    outcome text,
    created_at integer not null,
    completed_at integer,
    constraint outbound_intents_status_check
        check (status in ('pending', 'unanswered', 'unsent', 'sent', 'failed'))
);
insert into outbound_intents_new (id, workspace_id, sender_id, prospect_id, kind, enrollment_id, step_index,
    message_id, text, usage_id, status, outcome, created_at, completed_at)
    select id, workspace_id, sender_id, prospect_id, kind, enrollment_id, step_index, message_id, text, usage_id,
        status, outcome, created_at, completed_at from outbound_intents;
drop table outbound_intents;
alter table outbound_intents_new rename to outbound_intents;

create unique index outbound_intents_step_key on outbound_intents (enrollment_id, step_index)
    where enrollment_id is not null;
create unique index outbound_intents_message_key on outbound_intents (message_id)
    where message_id is not null and enrollment_id is null;
create index outbound_intents_sender_idx on outbound_intents (sender_id, created_at);
-- the gate asks whether a call of the sender is under way; recovery finds the intents to settle
create index outbound_intents_open_idx on outbound_intents (sender_id)
    where status in ('pending', 'unanswered');

-- The sandbox can be slow on purpose (`sandbox_set_latency`): every call of the account waits
-- this long before it reaches the simulated network, as a slow provider would.
alter table sandbox_accounts add column latency_ms integer not null default 0;
