-- Send slots: a step that finds its sender busy (inside the 30-90 s gap between two of its
-- actions, or behind steps already waiting) takes the next slot in the sender's queue instead of
-- waking with every other waiting step and finding the sender busy again.

-- the latest slot handed out (epoch ms); a step without a slot queues behind it while it is ahead
alter table senders add column queued_until bigint;

-- the slot the enrollment's next step holds (epoch ms), set when it queued, cleared when it moves
alter table enrollments add column slot_at bigint;

-- a busy sender's due steps without a slot, found to queue them together
create index enrollments_sender_queue_idx on enrollments (sender_id) where slot_at is null and status in ('scheduled', 'active');
