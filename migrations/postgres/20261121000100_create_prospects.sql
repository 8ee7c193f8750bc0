-- Prospects: the people a workspace may reach out to.

create table prospects (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    first_name text,
    last_name text,
    headline text,
    title text,
    seniority text,
    department text,
    company_name text,
    company_domain text,
    company_industry text,
    company_size bigint,
    location text,
    country text,
    timezone text,
    -- normalised (no scheme, no `www.`, no query, no trailing slash) so one person is one row
    profile_url text,
    email text,
    phone text,
    -- json array of strings; prospect_tags below indexes them for filtering
    tags text not null default '[]',
    -- json object with string keys
    custom_fields text not null default '{}',
    score bigint,
    tier text,
    do_not_contact bigint not null default 0,
    source text not null,
    -- lowercased full name, company and title: what the `q` filter searches
    search_text text not null default '',
    created_at bigint not null,
    updated_at bigint not null,
    constraint prospects_profile_url_key unique (workspace_id, profile_url)
);

-- paging order is newest first with the id as tie-break, always within one workspace
create index prospects_page_idx on prospects (workspace_id, created_at desc, id desc);
create index prospects_email_idx on prospects (workspace_id, email);

create table prospect_tags (
    prospect_id text not null references prospects (id) on delete cascade,
    workspace_id text not null,
    tag text not null,
    constraint prospect_tags_pkey primary key (prospect_id, tag)
);

-- the `tag` filter looks up prospects by (workspace, tag)
create index prospect_tags_lookup_idx on prospect_tags (workspace_id, tag, prospect_id);
