-- Webhook endpoints: where a workspace's events are delivered, signed to Standard Webhooks 1.0.
create table webhook_endpoints (
    id text primary key,
    workspace_id text not null references workspaces(id) on delete cascade,
    url text not null,
    description text,
    -- a JSON array of event types; null: every type
    event_types text,
    -- the signing secret, sealed (`sealed:v1:...`) when the server has a key, else `plain:whsec_...`
    secret text not null,
    -- the secret before the last rotation, and when it stops signing (epoch ms)
    previous_secret text,
    previous_secret_until bigint,
    enabled integer not null default 1,
    disabled_reason text,
    -- the first failed attempt of the current run of failures (epoch ms); null while deliveries
    -- succeed. A run of failures ends with a success, or with a gap longer than a delivery's
    -- retries (`last_failed_at`).
    failing_since bigint,
    last_failed_at bigint,
    created_at bigint not null,
    updated_at bigint not null
);
create index webhook_endpoints_workspace_idx on webhook_endpoints (workspace_id, created_at);

-- One event to one endpoint: retried on its schedule until it succeeds or runs out of attempts.
create table webhook_deliveries (
    -- the order deliveries were queued in: an endpoint's first attempts go out in this order
    seq integer primary key autoincrement,
    id text not null unique,
    workspace_id text not null references workspaces(id) on delete cascade,
    endpoint_id text not null references webhook_endpoints(id) on delete cascade,
    -- an event goes when housekeeping deletes it, and its deliveries with it
    event_id text not null references events(id) on delete cascade,
    event_type text not null,
    -- pending | succeeded | failed
    status text not null,
    -- attempts made
    attempt integer not null default 0,
    -- when the next attempt is due (epoch ms, service clock); null once it succeeded or failed
    next_attempt_at bigint,
    -- the job whose run is attempting it now, if that run is alive
    claimed_by text,
    -- the last attempt's answer: HTTP status, how long it took, the first 1 KB of the body, or
    -- why it failed without one
    response_status integer,
    duration_ms bigint,
    response_body text,
    error text,
    last_attempt_at bigint,
    created_at bigint not null,
    updated_at bigint not null
);
-- the next due delivery of an endpoint, and its page of deliveries
create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, status, seq);
-- the recovery sweep's overdue deliveries, and the runs attempting one
create index webhook_deliveries_due_idx on webhook_deliveries (status, next_attempt_at);
create index webhook_deliveries_claim_idx on webhook_deliveries (claimed_by) where claimed_by is not null;
-- the events some endpoint has not yet received
create index webhook_deliveries_event_idx on webhook_deliveries (event_id, status);
-- the dashboard's failed deliveries in a period
create index webhook_deliveries_workspace_idx on webhook_deliveries (workspace_id, status, updated_at);
