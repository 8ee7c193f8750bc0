-- Credits ledger and idempotency records.
--
-- The balance lives on `workspaces.credits_balance` (checked non-negative) and changes only by a
-- conditional update in the same transaction as a ledger row, so the ledger always explains the
-- balance: balance = sum(amount) over the workspace's entries.

create table credit_ledger (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    -- `grant` (positive), `spend` (negative, a reservation), `release` (positive, part of a spend returned)
    kind text not null,
    amount integer not null,
    balance_after integer not null,
    -- for a release: the spend it returns credits of
    reservation_id text references credit_ledger (id),
    action text,
    object_id text,
    idempotency_key text,
    reason text,
    person_id text,
    created_at integer not null,
    constraint credit_ledger_kind_check check (kind in ('grant', 'spend', 'release'))
);

-- listing is newest first per workspace; releases are summed per reservation
create index credit_ledger_page_idx on credit_ledger (workspace_id, created_at desc, id desc);
create index credit_ledger_reservation_idx on credit_ledger (reservation_id);

create table idempotency_records (
    workspace_id text not null references workspaces (id) on delete cascade,
    person_id text not null,
    action text not null,
    key text not null,
    -- sha-256 of the action's canonical input: the same key with another request is refused
    fingerprint text not null,
    -- `running` while the first request executes, then `done` with its response
    state text not null,
    status_code integer,
    response_body text,
    created_at integer not null,
    constraint idempotency_records_pkey primary key (workspace_id, person_id, action, key),
    constraint idempotency_records_state_check check (state in ('running', 'done'))
);

-- the purge of records older than 24 hours scans by age
create index idempotency_records_created_idx on idempotency_records (created_at);
