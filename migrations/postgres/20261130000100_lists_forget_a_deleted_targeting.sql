-- A list's default targeting is a reference to the targeting: deleting the targeting clears it
-- from the lists that default to it, as the database's own rule, so no code outside the lists'
-- owner writes their rows (actions/tests/owners.rs). Defaults left naming a deleted targeting are
-- cleared first.
update lists set default_targeting_id = null
where default_targeting_id is not null
  and not exists (select 1 from targetings t where t.id = lists.default_targeting_id);

alter table lists add constraint lists_default_targeting_fk
    foreign key (default_targeting_id) references targetings (id) on delete set null;

create index lists_default_targeting_idx on lists (default_targeting_id)
    where default_targeting_id is not null;
