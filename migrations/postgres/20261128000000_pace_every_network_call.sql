-- Pacing counts every call the network saw, and a call whose outcome is unknown goes back through
-- the gate before it is made again.
--
-- A sender's last call to the network, refused or not (epoch ms): the 30-90 s gap between two of
-- its actions is measured from here. Limits still count `sender_usage` rows, which a refused call
-- gives back; pacing cannot, or a refusal would let the next action follow within milliseconds.
alter table senders add column last_action_at bigint;
update senders set last_action_at = (select max(u.at) from sender_usage u where u.sender_id = senders.id);

-- An intent is now one of:
--   pending     committed before its call; the call is under way, or its process died: the
--               network is asked before anything else, and the sender makes no other call
--   unanswered  the call came back without an outcome (a transient fault): the network is asked
--               before the step goes again; the call is over, so the sender is free
--   unsent      the network has no record of it: it waits for the gate (hours, gap, limits) and
--               is then called again under the same id, with a quota unit taken at that moment
--   sent, failed
alter table outbound_intents drop constraint outbound_intents_status_check;
alter table outbound_intents add constraint outbound_intents_status_check
    check (status in ('pending', 'unanswered', 'unsent', 'sent', 'failed'));
-- the gate asks whether a call of the sender is under way; recovery finds the intents to settle
create index outbound_intents_open_idx on outbound_intents (sender_id)
    where status in ('pending', 'unanswered');

-- The sandbox can be slow on purpose (`sandbox_set_latency`): every call of the account waits
-- this long before it reaches the simulated network, as a slow provider would.
alter table sandbox_accounts add column latency_ms bigint not null default 0;
