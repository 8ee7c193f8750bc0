-- Conversations: one per (sender account, prospect), with the messages both ways.

create table conversations (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    prospect_id text not null references prospects (id) on delete cascade,
    -- the sequence whose enrollment first wrote to this person from this sender, if any
    sequence_id text,
    unread_count integer not null default 0,
    last_message_at integer,
    last_inbound_at integer,
    last_outbound_at integer,
    read_at integer,
    created_at integer not null,
    updated_at integer not null,
    constraint conversations_pair_key unique (workspace_id, sender_id, prospect_id)
);

create index conversations_page_idx on conversations (workspace_id, last_message_at desc, id desc);

create table messages (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    conversation_id text not null references conversations (id) on delete cascade,
    -- `inbound` (from the prospect) or `outbound` (from the sender account)
    direction text not null,
    text text not null,
    -- outbound: `queued`, `sent` or `failed`; inbound: `received`
    status text not null,
    -- when it was sent or received; for a queued message, when it is due to go
    at integer not null,
    error text,
    -- the network's id of an inbound message: the same event ingested twice is one message
    provider_message_id text,
    enrollment_id text,
    step_index integer,
    -- who wrote an outbound reply (a person id), when a person did
    created_by text,
    created_at integer not null,
    constraint messages_direction_check check (direction in ('inbound', 'outbound')),
    constraint messages_status_check check (status in ('queued', 'sent', 'failed', 'received'))
);

create index messages_page_idx on messages (conversation_id, at, id);
create unique index messages_provider_key on messages (workspace_id, provider_message_id)
    where provider_message_id is not null;
