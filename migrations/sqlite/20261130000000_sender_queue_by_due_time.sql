-- A busy sender's due steps without a slot are found through the enrollments alone, in the order
-- they fell due (the step's `next_step_at`), instead of through a join on the jobs table, which
-- belongs to the runtime.
drop index enrollments_sender_queue_idx;
create index enrollments_sender_queue_idx on enrollments (sender_id, next_step_at) where slot_at is null and status in ('scheduled', 'active');
