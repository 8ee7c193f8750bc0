-- `list_prospects` filters by tier and score and sorts by score or update time; each index
-- serves one of those within a workspace, with the id as the paging tie-break. Email lookups use
-- `prospects_email_idx`, profile URL lookups the unique key, list filters `list_members_pkey`.
create index prospects_tier_idx on prospects (workspace_id, tier, created_at desc, id desc);
create index prospects_score_idx on prospects (workspace_id, score desc, id desc);
create index prospects_updated_idx on prospects (workspace_id, updated_at desc, id desc);

-- what an import reports about the file as a whole (columns kept in custom_fields), json array
alter table imports add column warnings text not null default '[]';
