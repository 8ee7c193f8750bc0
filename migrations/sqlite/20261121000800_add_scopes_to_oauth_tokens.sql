-- A refresh may ask for fewer scopes than the grant holds (RFC 6749 section 6). The narrower
-- scopes belong to the access token issued by that refresh only; the grant, and the rotated
-- refresh token, keep the original ones. Null means the grant's scopes.
alter table oauth_tokens add column scopes text;
