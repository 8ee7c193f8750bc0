-- Scoring results stored in their primary key's order (`without rowid`): a run's results sit
-- together, by prospect id, instead of in a rowid table with the key as a second B-tree.
--
-- A run writes one result per prospect and then copies each score to its prospect with one
-- `update prospects ... from scoring_results` join. With the rowid table SQLite read the run's
-- results through the page index, best score first, so it updated the prospects in score order:
-- a random walk over the prospects table and its indexes. Read from this table, in prospect id
-- order, the update walks the prospects in the order they are stored, and an insert writes one
-- B-tree fewer (bench/RESULTS.md, issue 13 round 6).
--
-- SQLite only: a PostgreSQL table has no rowid, and its planner joins the run's results by hash.

create table scoring_results_by_run (
    run_id text not null references scoring_runs (id) on delete cascade,
    -- deleting a prospect deletes what was recorded about it
    prospect_id text not null references prospects (id) on delete cascade,
    score integer not null,
    tier text not null,
    -- json arrays: the criteria that earned points, the gates failed, the fields that were missing
    matched text not null,
    gates_failed text not null,
    missing text not null,
    constraint scoring_results_pkey primary key (run_id, prospect_id),
    constraint scoring_results_score_check check (score between 0 and 100),
    constraint scoring_results_tier_check check (tier in ('a', 'b', 'c', 'd', 'disqualified'))
) without rowid;

insert into scoring_results_by_run (run_id, prospect_id, score, tier, matched, gates_failed, missing)
select run_id, prospect_id, score, tier, matched, gates_failed, missing from scoring_results;

drop table scoring_results;
alter table scoring_results_by_run rename to scoring_results;

-- results are read best first (score desc, then prospect id) within a run
create index scoring_results_page_idx on scoring_results (run_id, score desc, prospect_id);
-- the cascade from a deleted prospect finds its results by prospect
create index scoring_results_prospect_idx on scoring_results (prospect_id);
