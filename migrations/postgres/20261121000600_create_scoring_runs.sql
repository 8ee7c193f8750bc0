-- Scoring runs: one row per run, one result per prospect scored, and each prospect's latest score.

create table scoring_runs (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    -- no foreign keys to the targeting or the list: a run is a record of what happened and
    -- outlives both; the version says which rules were applied
    targeting_id text not null,
    targeting_version bigint not null,
    list_id text,
    -- runs are synchronous: `running` is only ever seen inside the run's own transaction
    status text not null,
    total bigint not null default 0,
    tier_a bigint not null default 0,
    tier_b bigint not null default 0,
    tier_c bigint not null default 0,
    tier_d bigint not null default 0,
    disqualified bigint not null default 0,
    credits_spent bigint not null default 0,
    created_at bigint not null,
    completed_at bigint,
    constraint scoring_runs_status_check check (status in ('running', 'completed'))
);

create index scoring_runs_page_idx on scoring_runs (workspace_id, created_at desc, id desc);

create table scoring_results (
    run_id text not null references scoring_runs (id) on delete cascade,
    -- deleting a prospect deletes what was recorded about it
    prospect_id text not null references prospects (id) on delete cascade,
    score bigint not null,
    tier text not null,
    -- json arrays: the criteria that earned points, the gates failed, the fields that were missing
    matched text not null,
    gates_failed text not null,
    missing text not null,
    constraint scoring_results_pkey primary key (run_id, prospect_id),
    constraint scoring_results_score_check check (score between 0 and 100),
    constraint scoring_results_tier_check check (tier in ('a', 'b', 'c', 'd', 'disqualified'))
);

-- results are read best first (score desc, then prospect id) within a run
create index scoring_results_page_idx on scoring_results (run_id, score desc, prospect_id);
-- the cascade from a deleted prospect finds its results by prospect
create index scoring_results_prospect_idx on scoring_results (prospect_id);

-- A prospect keeps its latest score and tier (columns of the prospects migration) and now also
-- which targeting, at which version, produced them, and when.
alter table prospects add column targeting_id text;
alter table prospects add column targeting_version bigint;
alter table prospects add column scored_at bigint;
