#!/usr/bin/env python3
"""Drives N requests over one keep-alive connection: drive.py PORT KEY KIND N (bench/profile/callgrind.sh runs it)
KIND: rest | mcp | list | seed (imports N prospects) | import (N rows shaped as the issue3 phase's, into a list)
| score (N = 0: makes the targeting and prints the list and targeting ids; N = 1: reads them on stdin, one scoring run)"""
import http.client, sys, json, os
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
    def row(i):
        return f"{first[i % 16]},{last[(i // 16) % 16]},Company {i % 5000},{titles[(i // 7) % 8]},linkedin.com/in/{first[i % 16].lower()}-{i},{first[i % 16].lower()}{i}@co{i % 5000}.com"
    header = "First Name,Last Name,Company,Title,LinkedIn URL,Email"
    extra = lambda i: ""
    if os.environ.get("SPREAD"):
        # SPREAD=1: also a seniority, industry, company size and location per row, so the
        # `score` kind's targeting spreads the scores over 0-100 and every tier, as real ones are.
        seniorities = ["VP", "C-Level", "Director", "Manager", "Senior"]
        industries = ["Software", "Financial Services", "Retail", "Software", "Healthcare"]
        sizes = [12, 80, 250, 900, 3000, 12000]
        locations = ["Berlin, Germany", "Munich, Germany", "London, United Kingdom", "New York, United States"]
        header += ",Seniority,Industry,Company Size,Location"
        extra = lambda i: f",{seniorities[(i // 13) % 5]},{industries[i % 5]},{sizes[(i // 3) % 6]},\"{locations[(i // 11) % 4]}\""
    rows = "".join(row(i) + extra(i) + "\n" for i in range(n))
    body = json.dumps({"csv": header + "\n" + rows, "list_name": "Bench import"})
    conn.request("POST", "/api/v1/imports", body=body, headers={"authorization": "Bearer " + key, "content-type": "application/json"})
    r = conn.getresponse(); print(r.status, r.read()[:300]); sys.exit(0 if r.status == 200 else 1)
if kind == "score":
    # One scoring run over the list the `import` kind made, with the targeting of bench/src/issue3.rs.
    headers = {"authorization": "Bearer " + key, "content-type": "application/json"}
    if n == 0:
        conn.request("GET", "/api/v1/lists?limit=1", headers=headers)
        list_id = json.loads(conn.getresponse().read())["items"][0]["id"]
        targeting = {"name": "SaaS engineering leaders", "criteria": {
            "titles": {"include": [{"value": "VP Engineering", "points": 25}, {"value": "CTO", "points": 30}, {"value": "head of engineering", "points": 20}], "exclude": ["assistant"]},
            "seniorities": [{"value": "vp", "points": 15}, {"value": "c-level", "points": 20}],
            "departments": [{"value": "engineering", "points": 10}],
            "industries": [{"value": "software", "points": 20}, {"value": "financial services", "points": 10}],
            "company_sizes": [{"min": 50, "max": 500, "points": 15}, {"min": 501, "max": 5000, "points": 10}],
            "locations": [{"value": "germany", "points": 10}, {"value": "berlin", "points": 5}],
            "keywords": [{"value": "saas", "points": 5}, {"value": "machine learning", "points": 5}]},
            "gates": {"excluded_industries": ["gambling"], "excluded_domains": ["competitor.com"], "excluded_title_keywords": ["student", "intern"]},
            "tiers": {"a": 80, "b": 60, "c": 40}}
        conn.request("POST", "/api/v1/targetings", body=json.dumps(targeting), headers=headers)
        targeting_id = json.loads(conn.getresponse().read())["id"]
        print(list_id, targeting_id); sys.exit(0)
    list_id, targeting_id = sys.stdin.read().split()
    conn.request("POST", "/api/v1/scoring-runs", body=json.dumps({"targeting_id": targeting_id, "list_id": list_id}), headers=headers)
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
