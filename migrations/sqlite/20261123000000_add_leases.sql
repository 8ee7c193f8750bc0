-- Leases: what a running request holds (an idempotency key, a list being processed, credits kept
-- for a durable job) carries the time its hold lapses, renewed while the work runs. A process that
-- dies stops renewing, so within seconds its hold can be taken over or released by recovery,
-- instead of blocking a key for a day or a list forever.

-- the claim's owner (a random token, so only the owner can complete or drop it) and its lease;
-- null on records written before leases, which count as lapsed
alter table idempotency_records add column lease_token text;
alter table idempotency_records add column lease_expires_at integer;

-- a list's processing: the token of the call that marked it (kept afterwards, so a call planned
-- before another one marked the list cannot mark it again) and the lease of that mark
alter table lists add column processing_token text;
alter table lists add column processing_lease_expires_at integer;

-- a spend kept open by a durable job until the job settles it: recovery releases what is still
-- held when the hold lapses; null for spends settled in the transaction that made them
alter table credit_ledger add column held_until integer;

-- recovery looks for open holds and lapsed list marks
create index credit_ledger_held_idx on credit_ledger (held_until) where held_until is not null;
create index lists_processing_idx on lists (processing_lease_expires_at) where processing_status = 'processing';
