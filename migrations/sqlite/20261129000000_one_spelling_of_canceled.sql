-- One spelling of `canceled` in every face: a job that was canceled before it ran is `canceled`,
-- as agent runs already are (the MCP task status keeps the specification's `cancelled`).
-- SQLite cannot change a check constraint in place: the table is rebuilt (nothing refers to it).
create table jobs_new (
    id text primary key,
    -- the registered handler that runs it
    kind text not null,
    -- null for jobs that belong to no workspace; a deleted workspace takes its jobs with it
    workspace_id text references workspaces (id) on delete cascade,
    -- the handler's input, JSON
    payload text not null,
    -- `available`, `running`, `completed`, `discarded` or `canceled`
    state text not null default 'available',
    -- attempts started so far (counted when claimed; a snooze gives its attempt back)
    attempt integer not null default 0,
    max_attempts integer not null,
    -- when it is due, on the service clock (epoch ms)
    run_at integer not null,
    -- the claim's owner and when its lease lapses (real time, epoch ms); null unless running
    lease_token text,
    lease_until integer,
    last_error text,
    -- at most one unfinished job per (kind, unique_key)
    unique_key text,
    created_at integer not null,
    updated_at integer not null,
    finished_at integer,
    constraint jobs_state_check check (state in ('available', 'running', 'completed', 'discarded', 'canceled')),
    constraint jobs_attempts_check check (max_attempts >= 1)
);

insert into jobs_new (id, kind, workspace_id, payload, state, attempt, max_attempts, run_at, lease_token,
                      lease_until, last_error, unique_key, created_at, updated_at, finished_at)
select id, kind, workspace_id, payload, case state when 'cancelled' then 'canceled' else state end, attempt,
       max_attempts, run_at, lease_token, lease_until, last_error, unique_key, created_at, updated_at, finished_at
from jobs;

drop table jobs;
alter table jobs_new rename to jobs;

create index jobs_claim_idx on jobs (run_at, id) where state = 'available';
create index jobs_lease_idx on jobs (lease_until) where state = 'running';
create unique index jobs_unique_key_idx on jobs (kind, unique_key)
    where unique_key is not null and state in ('available', 'running');
create index jobs_finished_idx on jobs (finished_at) where finished_at is not null;
