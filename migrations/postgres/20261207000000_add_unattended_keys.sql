-- An API key made for an unattended agent: the MCP face never asks its person to confirm a call
-- (see the runtime's `confirmations`). 0 or 1.
alter table api_keys add column unattended bigint not null default 0;
