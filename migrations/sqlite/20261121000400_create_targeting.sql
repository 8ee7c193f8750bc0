-- Targeting: a workspace's ideal-customer profiles, the yardstick scoring runs measure prospects by.

create table targetings (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    name text not null,
    description text,
    -- json object: the point-earning criteria (titles, seniorities, departments, industries,
    -- company sizes, locations, keywords); validated by the service, read whole
    criteria text not null,
    -- json object: the gates that disqualify (excluded industries, domains, title keywords)
    gates text not null,
    -- tier thresholds: a score at or above tier_a is tier a, and so on; below tier_c is tier d
    tier_a integer not null,
    tier_b integer not null,
    tier_c integer not null,
    -- starts at 1 and grows with every change, so a score can say which rules produced it
    version integer not null,
    created_at integer not null,
    updated_at integer not null,
    -- names are how people tell targetings apart
    constraint targetings_name_key unique (workspace_id, name),
    constraint targetings_tiers_check check (tier_a <= 100 and tier_a > tier_b and tier_b > tier_c and tier_c >= 0),
    constraint targetings_version_check check (version >= 1)
);

-- paging order is newest first with the id as tie-break, always within one workspace
create index targetings_page_idx on targetings (workspace_id, created_at desc, id desc);
