-- The sandbox network: a simulated professional network kept in our own database, so that
-- outreach can be developed, demonstrated and tested end to end without a real account. Nothing
-- here refers to senders by foreign key: the sandbox is "the other side" and, like a real
-- provider, knows an account only by the id we give it. Times are epoch milliseconds.

-- the shared test clock (`outreach serve --test-clock`): one row, the offset every instance on
-- this database adds to its clock
create table test_clock (
    id integer primary key,
    offset_ms bigint not null,
    constraint test_clock_one_row check (id = 1)
);

-- one account per sender on the simulated network, with its status; absent means connected
create table sandbox_accounts (
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    status text not null,
    updated_at bigint not null,
    constraint sandbox_accounts_pkey primary key (workspace_id, sender_id)
);

-- the relation between a sender and a person: state none | pending | connected | withdrawn;
-- accept_at is when the pending invitation will be accepted (null: never), reply_at when the
-- person answers the sender's first message (null: never, or not yet written to)
create table sandbox_connections (
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    profile_url text not null,
    prospect_id text,
    state text not null,
    invited_at bigint,
    accept_at bigint,
    connected_at bigint,
    withdrawn_at bigint,
    reply_at bigint,
    reply_text text,
    updated_at bigint not null,
    constraint sandbox_connections_pkey primary key (workspace_id, sender_id, profile_url)
);

-- polling looks for invitations and replies that fell due
create index sandbox_connections_accept_idx on sandbox_connections (accept_at) where state = 'pending';
create index sandbox_connections_reply_idx on sandbox_connections (reply_at) where reply_at is not null;

-- messages in both directions; an inbound one is delivered to our ingestion once
create table sandbox_messages (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    profile_url text not null,
    direction text not null,
    text text not null,
    at bigint not null,
    intent_token text
);

create index sandbox_messages_chat_idx on sandbox_messages (workspace_id, sender_id, at);

-- every outbound call the sandbox received, with the caller's intent token so that
-- reconciliation ("did this action happen?") can answer from here; written in the transaction of
-- the call's effect
create table sandbox_log (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    prospect_id text,
    profile_url text not null,
    kind text not null,
    text text,
    outcome text not null,
    intent_token text,
    provider_message_id text,
    at bigint not null
);

create index sandbox_log_at_idx on sandbox_log (workspace_id, at, id);
create index sandbox_log_intent_idx on sandbox_log (workspace_id, intent_token) where intent_token is not null;
-- the daily caps count one sender's successful calls of one kind in the last 24 hours
create index sandbox_log_cap_idx on sandbox_log (workspace_id, sender_id, kind, at);

-- inbound events from any network (acceptances, received messages), recorded once each by the one
-- ingestion function; the provider's id of the event makes a redelivery a no-op
create table inbound_events (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    provider_event_id text not null,
    kind text not null,
    sender_id text not null,
    profile_url text not null,
    text text,
    at bigint not null,
    received_at bigint not null,
    constraint inbound_events_provider_key unique (workspace_id, provider_event_id)
);

create index inbound_events_at_idx on inbound_events (workspace_id, received_at);
