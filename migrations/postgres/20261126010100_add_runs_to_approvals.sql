-- Approval items remember the agent run that proposed them, so a person can review, approve or
-- reject a run's work as one batch. Both are null for items a person proposed directly.

alter table approvals add column run_id text;
alter table approvals add column agent_id text;

-- list_approvals filters by run and by agent, newest first
create index approvals_run_idx on approvals (run_id, status);
create index approvals_agent_idx on approvals (agent_id, status);
