-- One spelling of `canceled` in every face: a job that was canceled before it ran is `canceled`,
-- as agent runs already are (the MCP task status keeps the specification's `cancelled`).
alter table jobs drop constraint jobs_state_check;
update jobs set state = 'canceled' where state = 'cancelled';
alter table jobs add constraint jobs_state_check
    check (state in ('available', 'running', 'completed', 'discarded', 'canceled'));
