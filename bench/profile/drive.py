#!/usr/bin/env python3
"""Drives N requests over one keep-alive connection: drive.py PORT KEY KIND N (bench/profile/callgrind.sh runs it)
KIND: rest | mcp | list | seed (imports N prospects) | import (N rows shaped as the issue3 phase's, into a list)"""
import http.client, sys, json
port, key, kind, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
conn = http.client.HTTPConnection("127.0.0.1", port)
if kind == "seed":
    # 1,000 prospects for the list to page through (a full page of 200 and more).
    rows = "\n".join(f"Person{i},Number{i},Company {i % 50},Engineer,https://www.linkedin.com/in/person-{i},person{i}@example.com" for i in range(n))
    body = json.dumps({"csv": "First Name,Last Name,Company,Title,LinkedIn URL,Email\n" + rows})
    conn.request("POST", "/api/v1/imports", body=body, headers={"authorization": "Bearer " + key, "content-type": "application/json"})
    r = conn.getresponse(); print(r.status, r.read()[:200]); sys.exit(0 if r.status == 200 else 1)
if kind == "import":
    # The rows of bench/src/issue3.rs: distinct URLs and emails, so every row creates a prospect.
    first = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Fran", "John", "Kate", "Linus", "Meg", "Klaus", "Radia", "Tim", "Sophie", "Ken"]
    last = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Johnson", "Torvalds", "Hamilton", "Wirth", "Perlman", "Lee", "Wilson", "Thompson"]
    titles = ["VP Engineering", "CTO", "Head of Engineering", "VP Sales", "Founder", "Engineering Intern", "Account Executive", "Marketing Director"]
    rows = "".join(f"{first[i % 16]},{last[(i // 16) % 16]},Company {i % 5000},{titles[(i // 7) % 8]},linkedin.com/in/{first[i % 16].lower()}-{i},{first[i % 16].lower()}{i}@co{i % 5000}.com\n" for i in range(n))
    body = json.dumps({"csv": "First Name,Last Name,Company,Title,LinkedIn URL,Email\n" + rows, "list_name": "Bench import"})
    conn.request("POST", "/api/v1/imports", body=body, headers={"authorization": "Bearer " + key, "content-type": "application/json"})
    r = conn.getresponse(); print(r.status, r.read()[:300]); sys.exit(0 if r.status == 200 else 1)
mcp_body = json.dumps({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"service_get_workspace","arguments":{}}})
for i in range(n):
    if kind == "rest":
        conn.request("GET", "/api/v1/workspace", headers={"authorization": "Bearer " + key})
    elif kind == "list":
        conn.request("GET", "/api/v1/prospects?limit=200", headers={"authorization": "Bearer " + key})
    else:
        conn.request("POST", "/api/mcp", body=mcp_body, headers={"authorization": "Bearer " + key,
            "content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18"})
    r = conn.getresponse(); body = r.read()
    if r.status != 200 or b'"isError":true' in body:
        print("bad", r.status, body[:300]); sys.exit(1)
print("done", n, len(body))
