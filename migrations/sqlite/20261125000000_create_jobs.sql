-- Jobs: the durable work queue of the runtime (River's and Oban's shape). A job is written in the
-- same transaction as the state change that needs it, claimed by one worker under a lease,
-- completed in the same transaction as the handler's writes (fenced by the lease token), retried
-- with backoff, snoozed without using an attempt, and rescued when its worker dies.

create table jobs (
    id text primary key,
    -- the registered handler that runs it
    kind text not null,
    -- null for jobs that belong to no workspace; a deleted workspace takes its jobs with it
    workspace_id text references workspaces (id) on delete cascade,
    -- the handler's input, JSON
    payload text not null,
    -- `available`, `running`, `completed`, `discarded` or `cancelled`
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
    constraint jobs_state_check check (state in ('available', 'running', 'completed', 'discarded', 'cancelled')),
    constraint jobs_attempts_check check (max_attempts >= 1)
);

-- the claim query: the oldest due available jobs; only available rows are in it, so finished
-- jobs piling up until they are purged cost the claim nothing
create index jobs_claim_idx on jobs (run_at, id) where state = 'available';

-- the rescue looks for running jobs whose lease lapsed
create index jobs_lease_idx on jobs (lease_until) where state = 'running';

-- enqueueing the same unique key twice while the first job is unfinished is a no-op
create unique index jobs_unique_key_idx on jobs (kind, unique_key)
    where unique_key is not null and state in ('available', 'running');

-- housekeeping deletes finished jobs after a while
create index jobs_finished_idx on jobs (finished_at) where finished_at is not null;
