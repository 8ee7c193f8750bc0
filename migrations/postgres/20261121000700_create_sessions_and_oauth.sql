-- Web sign-in sessions, sign-in throttling, and the OAuth 2.1 authorization server's state.
-- Everything lives in the database, not in a process, so any instance can serve any request and
-- a disconnection or sign-out takes effect everywhere on the next call.

-- A signed-in browser. The cookie holds a random value; only its sha-256 is stored.
create table web_sessions (
    id text primary key,
    token_hash text not null,
    person_id text not null references people (id) on delete cascade,
    -- the workspace the person is looking at (the switcher changes it); null until chosen
    workspace_id text references workspaces (id) on delete set null,
    -- synchronizer token for every form posted by this session
    csrf_token text not null,
    -- a value to show exactly once on the next page (a new key's secret), then cleared
    flash text,
    created_at bigint not null,
    expires_at bigint not null,
    constraint web_sessions_token_hash_key unique (token_hash)
);

create index web_sessions_person_idx on web_sessions (person_id);

-- Failed sign-ins, counted per account (`account:<email>`) and per client address
-- (`address:<ip>`) over a sliding window to throttle password guessing.
create table sign_in_failures (
    subject text not null,
    failed_at bigint not null
);

create index sign_in_failures_subject_idx on sign_in_failures (subject, failed_at);

-- Clients registered through dynamic client registration (RFC 7591). Clients identified by a
-- metadata document URL are not stored here: their document is fetched and cached instead.
create table oauth_clients (
    client_id text primary key,
    client_name text not null,
    -- JSON array of the registered redirect URIs
    redirect_uris text not null,
    -- the registered metadata as JSON, echoed by the registration response
    metadata text not null,
    created_at bigint not null
);

-- One consent: a client acting for a person in a workspace with the approved scopes. Every
-- token belongs to a grant; revoking the grant (Disconnect, refresh reuse, code replay) ends them all.
create table oauth_grants (
    id text primary key,
    workspace_id text not null references workspaces (id) on delete cascade,
    person_id text not null references people (id) on delete cascade,
    client_id text not null,
    client_name text not null,
    -- `registration` or `metadata_document`: where the client's name and redirect URIs came from
    client_source text not null,
    -- comma-separated, from `read`, `write`, `send`
    scopes text not null,
    -- the resource (RFC 8707) the tokens are bound to
    resource text not null,
    created_at bigint not null,
    last_used_at bigint,
    revoked_at bigint,
    constraint oauth_grants_source_check check (client_source in ('registration', 'metadata_document'))
);

create index oauth_grants_workspace_idx on oauth_grants (workspace_id, created_at);

-- Authorization codes: 10 minutes, single use. Only the sha-256 of a code is stored.
create table oauth_codes (
    code_hash text primary key,
    grant_id text not null references oauth_grants (id) on delete cascade,
    client_id text not null,
    redirect_uri text not null,
    -- PKCE S256 challenge (base64url of the verifier's sha-256)
    code_challenge text not null,
    expires_at bigint not null,
    used_at bigint
);

-- Access tokens (1 h) and refresh tokens (30 days), stored as sha-256. A refresh token is used
-- once: `used_at` marks the rotation, and a second use is reuse, which revokes the grant.
create table oauth_tokens (
    token_hash text primary key,
    grant_id text not null references oauth_grants (id) on delete cascade,
    kind text not null,
    expires_at bigint not null,
    created_at bigint not null,
    used_at bigint,
    revoked_at bigint,
    constraint oauth_tokens_kind_check check (kind in ('access', 'refresh'))
);

create index oauth_tokens_grant_idx on oauth_tokens (grant_id);
