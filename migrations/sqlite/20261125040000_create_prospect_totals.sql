-- How many prospects each workspace holds, kept in the same transactions that add and remove
-- them, so an unfiltered `list_prospects` page does not count the whole workspace.

create table prospect_totals (
    workspace_id text primary key references workspaces (id) on delete cascade,
    total integer not null
);

insert into prospect_totals (workspace_id, total)
select workspace_id, count(*) from prospects group by workspace_id;
