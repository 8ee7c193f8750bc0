-- Profile URLs are stored lowercased (path included): `linkedin.com/in/CaseTest-XY` and
-- `.../casetest-xy` are one person, and were two prospects charged twice. New rows arrive
-- lowercased; this brings the stored ones in line, except LinkedIn Sales Navigator addresses
-- (`linkedin.com/sales/...`), whose ids are case-sensitive and are left as they are.
--
-- Rows that differ only in case are not merged here (that would move list memberships, scores
-- and tags without anyone deciding): within each such group the oldest row is lowercased, unless
-- one is lowercase already, and the others keep their spelling. They stay visible duplicates to
-- merge or delete by hand; imports and creates match the lowercased one from now on.
update prospects
set profile_url = lower(profile_url)
where profile_url is not null
  and profile_url <> lower(profile_url)
  and profile_url not like 'linkedin.com/sales/%'
  and not exists (
      select 1
      from prospects other
      where other.workspace_id = prospects.workspace_id
        and other.id <> prospects.id
        and other.profile_url is not null
        and lower(other.profile_url) = lower(prospects.profile_url)
        and (
            other.profile_url = lower(other.profile_url)
            or other.created_at < prospects.created_at
            or (other.created_at = prospects.created_at and other.id < prospects.id)
        )
  );
