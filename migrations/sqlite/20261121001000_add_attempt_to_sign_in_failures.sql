-- Each sign-in attempt is recorded against its account and its address before the password is
-- checked (so parallel guesses cannot outrun the count). A successful attempt takes its own rows
-- back, so the address budget counts failures only; `attempt` names the rows one attempt wrote.
alter table sign_in_failures add column attempt text;
