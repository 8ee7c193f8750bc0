-- Agents: saved configurations a run executes (whom to target, what to say, through which
-- sequence, how much a run may spend, and whether a person reviews its work).

create table agents (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    name text not null,
    -- `prospector`, `writer` or `inbox_triage`
    kind text not null,
    -- `review` (proposals wait for a person) or `autonomous`
    mode text not null,
    enabled bigint not null,
    -- references are checked when set, not by foreign keys: deleting a targeting, list or
    -- sequence must not delete the agent, and a run refuses one whose inputs are gone
    targeting_id text,
    list_id text,
    sequence_id text,
    -- the lowest tier a prospector keeps: `a`, `b`, `c` or `d`
    min_tier text not null,
    max_prospects_per_run bigint not null,
    -- null: no cap beyond the balance
    max_credits_per_run bigint,
    created_at bigint not null,
    updated_at bigint not null
);

-- list_agents pages newest first inside a workspace
create index agents_page_idx on agents (workspace_id, created_at desc, id desc);
