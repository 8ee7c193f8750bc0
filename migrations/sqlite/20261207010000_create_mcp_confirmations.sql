-- The questions the MCP face asked a person before a call (see the runtime's `confirmations`):
-- the `requestState` a client sends back is a row's id, so an answer is honoured only for the
-- credential and the call it was asked about, once, before it expires.
create table mcp_confirmations (
    id text primary key,
    credential_id text not null,
    binding text not null,
    expires_at integer not null,
    created_at integer not null
);

create index mcp_confirmations_expiry_idx on mcp_confirmations (expires_at);
