-- Agent runs: one execution of an agent, done by a durable job in phases with recovery points
-- (select, process in batches, finish), so a crash resumes a run instead of paying for it twice.

create table agent_runs (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    -- no foreign key: a run's trail outlives its agent
    agent_id text not null,
    agent_name text not null,
    -- `prospector`, `writer` or `inbox_triage`
    kind text not null,
    status text not null,
    -- where the job resumes: `select`, `process` or `finish`; `done` once it ended
    phase text not null,
    -- the agent's settings when the run started (JSON): editing the agent does not change a run
    settings text not null,
    -- the run's own input (JSON): an explicit prospect list, a lower prospect limit
    input text not null,
    -- 1 when the agent is autonomous and the caller held `send` when starting it
    autonomous bigint not null,
    person_id text not null,
    credential_kind text not null,
    credential_id text not null,
    total bigint not null,
    processed bigint not null default 0,
    proposed bigint not null default 0,
    unit_price bigint not null,
    credits_reserved bigint not null,
    credits_charged bigint not null default 0,
    -- the open spend in the credit ledger the run settles when it ends
    reservation_id text,
    -- the job that executes it: a run whose job is gone is ended by recovery
    job_id text,
    error_code text,
    error_message text,
    created_at bigint not null,
    started_at bigint,
    finished_at bigint,
    updated_at bigint not null,
    constraint agent_runs_status_check check (status in
        ('queued', 'running', 'awaiting_approval', 'succeeded', 'failed', 'canceled')),
    constraint agent_runs_phase_check check (phase in ('select', 'process', 'finish', 'done'))
);

-- one live run per agent: a second `run_agent` while one is queued or running is refused
create unique index agent_runs_live_key on agent_runs (agent_id) where status in ('queued', 'running');
-- list_runs pages newest first, in the workspace or by agent
create index agent_runs_page_idx on agent_runs (workspace_id, created_at desc, id desc);
create index agent_runs_agent_idx on agent_runs (workspace_id, agent_id, created_at desc, id desc);
-- runs waiting for their proposals to be decided
create index agent_runs_awaiting_idx on agent_runs (workspace_id, status) where status = 'awaiting_approval';

-- What a person reads of a run: what was selected and why, what was drafted, what was charged.
create table agent_run_log (
    run_id text not null references agent_runs (id) on delete cascade,
    seq bigint not null,
    at bigint not null,
    message text not null,
    constraint agent_run_log_pkey primary key (run_id, seq)
);

-- The run's work list, written by its select phase: each row is one prospect (or, for
-- `inbox_triage`, one conversation) to process. The process phase takes them in order, a batch
-- per transaction, and marks each done with its outcome, so a resumed run skips what is done.
create table agent_run_items (
    run_id text not null references agent_runs (id) on delete cascade,
    position bigint not null,
    prospect_id text not null,
    -- the conversation, for `inbox_triage`
    conversation_id text,
    -- `pending`, then `proposed`, `skipped` or `done`
    state text not null,
    -- why it was selected (score, tier, matched criteria), as JSON
    reasons text,
    -- what became of it, as a sentence
    outcome text,
    constraint agent_run_items_pkey primary key (run_id, position)
);

create index agent_run_items_pending_idx on agent_run_items (run_id, state, position);

-- inbox_triage's reply templates, by classification (JSON)
alter table agents add column templates text;

-- What runs add to approval items: who drafted the texts, why the prospect was chosen, when an
-- agent's proposal expires (72 hours), and the last person to edit the texts.
alter table approvals add column drafted_by text;
alter table approvals add column reasons text;
alter table approvals add column expires_at bigint;
alter table approvals add column edited_at bigint;
alter table approvals add column edited_by text;

-- pending items past their expiry, found by the expiry job
create index approvals_expiry_idx on approvals (status, expires_at) where expires_at is not null;

-- What inbox_triage concluded of an inbound message, and which run did.
alter table messages add column classification text;
alter table messages add column triaged_at bigint;
alter table messages add column triaged_by text;

-- inbound messages not triaged yet, by workspace
create index messages_untriaged_idx on messages (workspace_id, at) where direction = 'inbound' and triaged_at is null;
