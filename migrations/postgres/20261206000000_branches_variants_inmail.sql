-- Branching sequences, A/B variants and InMail (steps are JSON on the sequence row; these are
-- what the engine records as it walks them).

-- When a `condition` step waiting `within_days` gives up and takes its `else_step`; null when
-- the enrollment is not waiting on a condition.
alter table enrollments add column condition_until bigint;

-- The A/B variant a step's intent and its history entry were sent with (null: the step has none).
alter table outbound_intents add column variant text;
alter table enrollment_events add column variant text;

-- The InMail credits of a sandbox account (null: the account cannot send InMail at all).
alter table sandbox_accounts add column inmail_credits integer;

-- InMails count against their own daily limit: the kind check gains `inmail`.
alter table sender_usage drop constraint sender_usage_kind_check;
alter table sender_usage add constraint sender_usage_kind_check
    check (kind in ('connection_request', 'message', 'profile_view', 'inmail'));
