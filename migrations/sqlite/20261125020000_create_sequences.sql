-- Sequences, their senders, enrollments with their history, and the approval queue.

-- A sequence's steps, schedule and settings are JSON on its row: they are read and replaced as
-- a whole (steps change only in `draft` and `paused`), and an enrollment refers to a step by its
-- index, so a table of steps would add joins and no query.
create table sequences (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    name text not null,
    -- `draft`, `active`, `paused`, `completed` or `stopped`
    status text not null default 'draft',
    steps text not null default '[]',
    schedule text not null default '{}',
    settings text not null default '{}',
    activated_at integer,
    finished_at integer,
    created_at integer not null,
    updated_at integer not null,
    constraint sequences_status_check check (status in ('draft', 'active', 'paused', 'completed', 'stopped'))
);

create index sequences_page_idx on sequences (workspace_id, created_at desc, id desc);

-- the senders a sequence sends from, in the order given (sender assignment breaks ties by it);
-- deleting a sender drops it from the sequences that name it
create table sequence_senders (
    sequence_id text not null references sequences (id) on delete cascade,
    sender_id text not null references senders (id) on delete cascade,
    workspace_id text not null,
    position integer not null,
    constraint sequence_senders_pkey primary key (sequence_id, sender_id)
);

create index sequence_senders_sender_idx on sequence_senders (sender_id);

-- No foreign key on sender_id: a finished enrollment must not keep its sender from being deleted
-- (deleting a sender with live enrollments is refused by the senders actions instead).
create table enrollments (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    sequence_id text not null references sequences (id) on delete cascade,
    prospect_id text not null references prospects (id) on delete cascade,
    sender_id text,
    -- `awaiting_approval`, `scheduled`, `active`, `paused`, `finished` or `failed`
    status text not null,
    -- set when finished: replied, completed_steps, not_accepted, stopped, do_not_contact, rejected
    exit_reason text,
    -- the next step to perform, 0-based
    step_index integer not null default 0,
    next_step_at integer,
    approved_at integer,
    approved_by text,
    last_error text,
    created_at integer not null,
    updated_at integer not null,
    -- a person is in a sequence once: adding them again is reported, not duplicated
    constraint enrollments_prospect_key unique (sequence_id, prospect_id),
    constraint enrollments_status_check check (status in ('awaiting_approval', 'scheduled', 'active', 'paused', 'finished', 'failed'))
);

create index enrollments_page_idx on enrollments (workspace_id, created_at desc, id desc);
-- "already in a live sequence" looks enrollments up by prospect
create index enrollments_prospect_idx on enrollments (prospect_id, status);
-- counts per status, and the enrollments a sequence action changes
create index enrollments_sequence_idx on enrollments (sequence_id, status);
-- what is due next (the scheduler's scan, a sequence's next send time)
create index enrollments_due_idx on enrollments (status, next_step_at);

-- An enrollment's history: added, approved, each step performed and its outcome, paused, stopped.
create table enrollment_events (
    id text primary key,
    workspace_id text not null,
    enrollment_id text not null references enrollments (id) on delete cascade,
    at integer not null,
    kind text not null,
    step_index integer,
    text text,
    outcome text
);

create index enrollment_events_enrollment_idx on enrollment_events (enrollment_id, at, id);

-- The approval queue: everything that waits for a person before it reaches the network. Kept
-- general (kind + subject) so other kinds (reply drafts) join the same queue.
create table approvals (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    -- `enrollment` (subject: the enrollment); later `reply_draft`
    kind text not null,
    subject_id text not null,
    sequence_id text references sequences (id) on delete cascade,
    prospect_id text not null references prospects (id) on delete cascade,
    sender_id text,
    -- `pending`, `approved`, `rejected` or `expired`
    status text not null default 'pending',
    -- json: the rendered texts a person approves
    texts text not null default '[]',
    -- json: who or what proposed it ({type, id, person_id, name})
    proposed_by text not null,
    decided_at integer,
    decided_by text,
    created_at integer not null,
    constraint approvals_status_check check (status in ('pending', 'approved', 'rejected', 'expired'))
);

create index approvals_page_idx on approvals (workspace_id, status, created_at desc, id desc);
create index approvals_sequence_idx on approvals (sequence_id, status);
create index approvals_subject_idx on approvals (subject_id);

-- What outreach knows of a prospect: the connection, the last outbound touch and the last reply.
alter table prospects add column connection_state text;
alter table prospects add column last_contacted_at integer;
alter table prospects add column last_replied_at integer;
