-- The first real network provider, Unipile: which provider each sender is on, its account there,
-- and what the adapter keeps between calls (docs/unipile.md).

-- `sandbox` or `unipile`. A Unipile sender has no account until its hosted sign-in ends: it
-- shows `pending` while `provider_account_id` is null (its stored status is `disconnected`, so
-- nothing is sent; the status check is left as it is, since changing it on SQLite means
-- rebuilding a table that others reference).
alter table senders add column provider text not null default 'sandbox';
alter table senders add column provider_account_id text;
-- what the provider last said of the account when it halted it (`ERROR`, `STOPPED`, `DELETED`)
alter table senders add column status_reason text;
-- one live sender per Unipile account: two would share its limits and its webhooks
create unique index senders_provider_account_key on senders (provider_account_id)
    where provider_account_id is not null and deleted_at is null;

-- A hosted sign-in link: the token in its notify URL, stored hashed, binds the account Unipile
-- answers with to this sender.
create table unipile_links (
    token_hash text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sender_id text not null,
    -- `create` or `reconnect`
    kind text not null,
    expires_at bigint not null,
    used_at bigint,
    created_at bigint not null
);

-- What the adapter learned of a person, per sender: Unipile's id of them (different for each
-- viewing account), the pending invitation's id, and the chat with them.
create table unipile_people (
    sender_id text not null,
    profile_url text not null,
    provider_id text not null,
    invitation_id text,
    invited_at bigint,
    chat_id text,
    updated_at bigint not null,
    primary key (sender_id, profile_url)
);
create index unipile_people_provider_idx on unipile_people (sender_id, provider_id);

-- Everything Unipile told us, raw, before it is applied: webhook bodies and what the poller
-- found. `dedup_key` (a message id; an account and a person for a relation) keeps a webhook
-- delivered twice, or found by both the webhook and the poller, to one row.
create table unipile_inbox (
    id text primary key,
    -- `webhook` or `poll`
    source text not null,
    dedup_key text unique,
    account_id text,
    workspace_id text,
    body text not null,
    -- `received` (to apply), `applied`, `ignored` (with `note`) or `invalid` (not JSON)
    status text not null,
    note text,
    received_at bigint not null,
    processed_at bigint
);
create index unipile_inbox_due_idx on unipile_inbox (workspace_id, status, received_at);

-- The poller's place per sender: messages after `messages_after`, relations looked at last.
create table unipile_sync (
    sender_id text primary key,
    messages_after bigint,
    relations_checked_at bigint,
    updated_at bigint not null
);
