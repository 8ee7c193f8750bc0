-- A list's default targeting is a reference to the targeting: deleting the targeting clears it
-- from the lists that default to it, as the database's own rule, so no code outside the lists'
-- owner writes their rows (actions/tests/owners.rs). PostgreSQL states it as a foreign key with
-- `on delete set null`; SQLite adds a foreign key only by rebuilding the table (which `list_members`
-- references), so here it is the same rule as a trigger. Defaults left naming a deleted targeting
-- are cleared first.
update lists set default_targeting_id = null
where default_targeting_id is not null
  and not exists (select 1 from targetings t where t.id = lists.default_targeting_id);

create trigger lists_forget_a_deleted_targeting after delete on targetings
begin
    update lists set default_targeting_id = null where default_targeting_id = old.id;
end;

create index lists_default_targeting_idx on lists (default_targeting_id)
    where default_targeting_id is not null;
