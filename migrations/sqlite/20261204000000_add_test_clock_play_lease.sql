-- advance_clock plays an interval out; one play-out at a time on the database, so concurrent
-- calls each move the clock by their own amount, one after another. The holder renews
-- `played_until` (real time, ms) while it plays; a crashed holder's lease lapses.
alter table test_clock add column played_by text;
alter table test_clock add column played_until bigint;
