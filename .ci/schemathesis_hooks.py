"""The rules the served schema cannot state, for schemathesis' `positive_data_acceptance` check.

Every rule of one field is in the schema (lengths, patterns, ranges, list and map sizes), and the
cross-field rules JSON Schema can say are there too (`not`/`if`/`then` with `required`: `csv` or
`rows`, `list_id` or `prospect_ids`, `sequence_id` and `run_id` not both, a prospect needs a name,
a profile URL or an email). What is left cannot be said in JSON Schema: it compares two values
(`min_score` <= `max_score`, tiers descending, a window's `end` after its `start`, an events
range's `created_before` after its `created_after`), reads the
order or the normalised text of a list's items, or depends on what the workspace holds (a sender
id that exists, a list's default targeting, an agent's own cap). Each is described in the field's
description in the schema, and each is listed here.

A schema-valid request the API refuses (ST202) is dropped only when the request breaks one of these
rules, checked on the request itself where the request shows it, and otherwise (the rule depends
on stored state) when the answer is a 4xx whose sentence is that rule's sentence. Any other ST202
still fails the run. Two more are dropped whatever the operation: a request with NUL in the keys
of a custom field's JSON value (any JSON, which the schema cannot follow down), and a request whose
path parameter held a `?` or `#` that schemathesis' stateful phase did not encode (the rest of the
value became a query string the operation does not take). The count of dropped failures is printed
in schemathesis' summary.

Loaded by `real_clients.py` through the `SCHEMATHESIS_HOOKS` environment variable.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

import schemathesis

# (operation, rule) for rules that depend on stored state or on text the request's shape cannot
# show: a 4xx whose `error` sentence matches `rule` is the documented refusal.
STATE_RULES: list[tuple[str, str]] = [
    # A time zone must be a name of the bundled IANA database: some 600 names, which the schema
    # leaves to the description rather than list in every tool (the MCP tool list has a budget).
    ("POST /senders", r"which is not an IANA time zone"),
    ("PATCH /senders/{id}", r"which is not an IANA time zone"),
    # An existing targeting's tiers combine with the given ones.
    ("PATCH /targetings/{id}", r"^`tiers` must descend"),
    # Senders must exist in the workspace.
    ("POST /sequences", r"^`sender_ids` names senders that do not exist"),
    ("PATCH /sequences/{id}", r"^`sender_ids` names senders that do not exist"),
    # The list's default targeting and its members are stored state.
    ("POST /lists/{id}/process", r"has no default targeting|has no prospects"),
    # Prospect ids must name prospects of the workspace.
    ("POST /scoring-runs", r"is not a prospect of this workspace|are not prospects of this workspace|has no prospects"),
    # An agent's `max_prospects_per_run` is stored state.
    ("POST /agents/{id}/run", r"^`max_prospects` must be between 1 and the agent's|^`prospect_ids` is for `writer` agents"),
    # What an agent needs depends on its stored kind and the references it keeps.
    ("PATCH /agents/{id}", r"^A `\w+` agent needs|^`templates` are the replies"),
    # An update must leave a prospect identifiable, which depends on the fields it has.
    ("PATCH /prospects/{id}", r"^A prospect needs at least a name"),
    # A CSV's content (a header and a data row, well-formed quotes, columns named once, `mapping`
    # naming its columns) is text the JSON Schema cannot read.
    ("POST /imports", r"CSV|[Cc]olumn|`mapping`|[Hh]eader|quote|[Rr]ow \d|line \d"),
    # A do-not-contact entry's value has the shape of its kind (a profile URL, an email, a
    # domain): a rule across two fields, described on `value` (an `if`/`then` schema of it fails
    # redocly's check of the examples).
    ("POST /do-not-contact", r"^`entries\[\d+\]\.value`"),
    # The same for a do-not-contact list's CSV: a header naming a usable column, readable rows.
    ("POST /do-not-contact/imports", r"^`csv` has no `profile_url`|^`csv` could not be read|^`csv` row \d|^`csv` holds more than"),
    # A variant's step and key must be the stored sequence's, and one variant must stay on.
    ("PATCH /sequences/{id}/variants", r"^`step` is `|has no variants|^`variant` is `|^This would leave step|^Give `enabled`, `weight` or both"),
    # `texts` must name steps the item has.
    ("PATCH /approvals/{id}", r"step"),
    # A webhook URL the pattern allows may still not parse (a port over 65535, a malformed
    # address), may point where webhooks may not go, or name a host that resolves there; and a
    # workspace holds at most 16 endpoints.
    ("POST /webhook-endpoints", r"^`url` is not an absolute URL|^`url` reaches|^`url` must be `https` outside development|^This workspace has \d+ webhook endpoints"),
    ("PATCH /webhook-endpoints/{id}", r"^`url` is not an absolute URL|^`url` reaches|^`url` must be `https` outside development"),
    # Whether an endpoint is enabled and which types it takes is stored state.
    ("POST /webhook-endpoints/{endpoint_id}/redeliver", r"is disabled, so nothing can be|does not take `"),
    # A replay's range compares two values (and `until` defaults to now); the endpoint's state is stored.
    ("POST /webhook-endpoints/{id}/replay", r"is disabled, so nothing can be|^`since` \(.*\) must be before|^A replay covers at most"),
]

# Rules on the request's own values.
HH_MM = re.compile(r"^(\d\d):(\d\d)$")


def _minutes(text: object) -> int | None:
    match = HH_MM.match(text) if isinstance(text, str) else None
    return int(match[1]) * 60 + int(match[2]) if match else None


def _windows_break_rules(body: object) -> bool:
    """A window's `end` must be after its `start`, and a day's windows must not overlap."""
    hours = body.get("working_hours") if isinstance(body, dict) else None
    if not isinstance(hours, dict):
        return False
    for windows in hours.values():
        spans = []
        for window in windows if isinstance(windows, list) else []:
            if not isinstance(window, dict):
                continue
            start, end = _minutes(window.get("start")), _minutes(window.get("end"))
            if start is not None and end is not None:
                if end <= start:
                    return True
                spans.append((start, end))
        spans.sort()
        if any(b_start < a_end for (_, a_end), (b_start, _) in zip(spans, spans[1:])):
            return True
    return False


DEFAULT_TIERS = {"a": 80, "b": 60, "c": 40}


def _tiers_break_rules(body: object) -> bool:
    """Tiers must descend: a > b > c (the defaults fill those not given)."""
    tiers = body.get("tiers") if isinstance(body, dict) else None
    if not isinstance(tiers, dict):
        return False
    merged = {key: tiers.get(key) if isinstance(tiers.get(key), (int, float)) else DEFAULT_TIERS[key] for key in "abc"}
    return not merged["a"] > merged["b"] > merged["c"]


def _words(text: str) -> str:
    """A keyword as the scoring engine compares it: lowercase, punctuation as spaces."""
    return " ".join("".join(c.lower() if c.isalnum() else " " for c in text).split())


def _criteria_break_rules(body: object) -> bool:
    """Targeting lists: each entry once (as compared: lowercase, punctuation as spaces), a size
    range's `min` not above its `max`, and at least one criterion that earns points."""
    if not isinstance(body, dict):
        return False
    lists = []
    for group in ("criteria", "gates"):
        section = body.get(group)
        if isinstance(section, dict):
            for name, value in section.items():
                if name == "titles" and isinstance(value, dict):
                    lists.extend(value.get(part) for part in ("include", "exclude"))
                else:
                    lists.append(value)
    for entries in lists:
        if not isinstance(entries, list):
            continue
        seen = set()
        for entry in entries:
            text = entry.get("value") if isinstance(entry, dict) else entry
            if isinstance(text, str):
                key = _words(text)
                if key in seen:
                    return True
                seen.add(key)
    criteria = body.get("criteria")
    if isinstance(criteria, dict) and isinstance(criteria.get("company_sizes"), list):
        for size in criteria["company_sizes"]:
            low, high = (size.get("min"), size.get("max")) if isinstance(size, dict) else (None, None)
            if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
                return True
    if isinstance(criteria, dict):
        titles = criteria.get("titles")
        include = titles.get("include") if isinstance(titles, dict) else titles
        earning = [include] + [criteria.get(name) for name in
                                ("seniorities", "departments", "industries", "company_sizes", "locations", "keywords")]
        if not any(isinstance(entries, list) and entries for entries in earning):
            return True
    return False


def _blank(text: object) -> bool:
    return not isinstance(text, str) or not text.strip()


def _template(text: object) -> bool:
    """A template may name a field the API does not know: left to the API (conservatively)."""
    return isinstance(text, str) and ("{{" in text or "}}" in text)


def _step_breaks_rules(index: int, step: dict) -> bool:
    """One step's own rules (see `actions/src/sequences/steps.rs`, `check_step`)."""
    kind = step.get("type")
    note, text, subject = step.get("note"), step.get("text"), step.get("subject")
    variants = step.get("variants")
    if kind != "connection_request" and note is not None:
        return True
    if kind not in ("message", "inmail") and text is not None:
        return True
    if kind != "inmail" and subject is not None:
        return True
    if kind not in ("message", "connection_request") and variants is not None:
        return True
    is_condition = kind == "condition"
    if not is_condition and any(step.get(f) is not None for f in ("condition", "then_step", "else_step")):
        return True
    if is_condition and step.get("next_step") is not None:
        return True
    if any(_template(t) for t in (note, text, subject)):
        return True
    if variants is not None:
        if not isinstance(variants, list) or (kind == "message" and not _blank(text)) \
                or (kind == "connection_request" and not _blank(note)):
            return True
        keys = set()
        for position, variant in enumerate(variants):
            if not isinstance(variant, dict):
                return True
            key = variant.get("key") or "abcde"[position % 5]
            if key in keys or key == "finish":
                return True
            keys.add(key)
            if kind == "connection_request" and variant.get("text") is not None:
                return True
            if kind == "message" and (variant.get("note") is not None or _blank(variant.get("text"))):
                return True
            if _template(variant.get("note")) or _template(variant.get("text")):
                return True
        if not any(v.get("enabled", True) and v.get("weight", 1) > 0 for v in variants):
            return True
    elif kind == "message" and _blank(text):
        return True
    if kind == "inmail" and (_blank(subject) or _blank(text)):
        return True
    if is_condition:
        condition = step.get("condition")
        if not isinstance(condition, dict) or step.get("then_step") is None or step.get("else_step") is None:
            return True
        if condition.get("kind") == "profile_has":
            if condition.get("within_days") is not None or condition.get("field") is None \
                    or _blank(condition.get("contains")):
                return True
        elif condition.get("field") is not None or condition.get("contains") is not None:
            return True
    return False


def _steps_break_rules(body: object) -> bool:
    """Sequence steps (see `actions/src/sequences/steps.rs`): each step's own rules, keys unique
    (`s1`, `s2`, ... by default) and never `finish`, every target naming a step (not itself) or
    `finish`, no cycle, every step reached from the first, and no path reaching a message before
    a connection request (or a `connected` condition's `then_step`)."""
    steps = body.get("steps") if isinstance(body, dict) else None
    if not isinstance(steps, list):
        return False
    if not all(isinstance(step, dict) for step in steps):
        return True
    keys = []
    for index, step in enumerate(steps):
        if _step_breaks_rules(index, step):
            return True
        key = step.get("key") or f"s{index + 1}"
        if key in keys or key == "finish":
            return True
        keys.append(key)
    by_key = {key: index for index, key in enumerate(keys)}

    def target(name):
        return None if name == "finish" else by_key.get(name, -1)

    edges = []
    for index, step in enumerate(steps):
        names = [step.get("then_step"), step.get("else_step")] if step.get("type") == "condition" \
            else [step.get("next_step")]
        out = []
        for name in names:
            if name is None:
                out.append(index + 1 if index + 1 < len(steps) else None)
                continue
            if name == keys[index]:
                return True
            to = target(name)
            if to == -1:
                return True
            out.append(to)
        edges.append(out)
    if not steps:
        return False
    # Cycles and reach, depth first from the first step.
    state = [0] * len(steps)

    def visit(node) -> bool:
        state[node] = 1
        for to in edges[node]:
            if to is None:
                continue
            if state[to] == 1 or (state[to] == 0 and visit(to)):
                return True
        state[node] = 2
        return False

    if visit(0) or 0 in state:
        return True
    # No path reaches a message before an invitation.
    seen, todo = set(), [(0, False)]
    while todo:
        node, invited = todo.pop()
        if (node, invited) in seen:
            continue
        seen.add((node, invited))
        step = steps[node]
        if step.get("type") == "message" and not invited:
            return True
        invited = invited or step.get("type") == "connection_request"
        connected = step.get("type") == "condition" and isinstance(step.get("condition"), dict) \
            and step["condition"].get("kind") == "connected"
        for branch, to in enumerate(edges[node]):
            if to is not None:
                todo.append((to, invited or (connected and branch == 0)))
    return False


def _scores_break_rules(query: object) -> bool:
    """`min_score` must not be above `max_score`."""
    if not isinstance(query, dict):
        return False
    low, high = query.get("min_score"), query.get("max_score")
    try:
        return low is not None and high is not None and int(low) > int(high)
    except (TypeError, ValueError):
        return False


def _range_breaks_rules(query: object) -> bool:
    """`created_before` must be after `created_after`."""
    if not isinstance(query, dict):
        return False
    after, before = query.get("created_after"), query.get("created_before")
    if not isinstance(after, str) or not isinstance(before, str):
        return False
    try:
        after = datetime.fromisoformat(after.replace("z", "Z").replace("t", "T"))
        before = datetime.fromisoformat(before.replace("z", "Z").replace("t", "T"))
        return before <= after
    except (TypeError, ValueError):
        return False


REQUEST_RULES = {
    "GET /prospects": lambda case: _scores_break_rules(case.query),
    "GET /events": lambda case: _range_breaks_rules(case.query),
    "POST /targetings": lambda case: _tiers_break_rules(case.body) or _criteria_break_rules(case.body),
    "PATCH /targetings/{id}": lambda case: _tiers_break_rules(case.body) or _criteria_break_rules(case.body),
    "POST /senders": lambda case: _windows_break_rules(case.body),
    "PATCH /senders/{id}": lambda case: _windows_break_rules(case.body),
    "POST /sequences": lambda case: _steps_break_rules(case.body),
    "PATCH /sequences/{id}": lambda case: _steps_break_rules(case.body),
}


def _holds_nul(value: object) -> bool:
    """Whether NUL is in any text of a JSON value, its object keys included."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    if isinstance(value, dict):
        return any("\x00" in key or _holds_nul(item) for key, item in value.items())
    return False


def _sentence(response) -> str:
    try:
        return str(json.loads(response.content).get("error", ""))
    except (ValueError, AttributeError):
        return ""


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """Keep every failure but an ST202 whose request breaks a rule listed above."""
    if getattr(failure, "code", None) != "ST202" or not 400 <= response.status_code < 500:
        return True
    # An `Idempotency-Key` promises the same request: schemathesis reuses keys across different
    # bodies, which the API answers 422 `idempotency_key_reused` by design (DESIGN.md section 8).
    if b'"idempotency_key_reused"' in response.content:
        return False
    # No text anywhere in an input may hold NUL (U+0000), keys inside a custom field's JSON value
    # included; the schema states it for every string it types, but a custom field's value is
    # any JSON, and the schema cannot follow it down.
    if _holds_nul(case.body):
        return False
    # A linked value put into a path without its `?` or `#` encoded (schemathesis' stateful
    # phase) makes the rest of it a query string or a fragment: not the request the schema
    # describes, and refused for its unknown query field.
    if any(isinstance(value, str) and ("?" in value or "#" in value)
           for value in (getattr(case, "path_parameters", None) or {}).values()):
        return False
    label = f"{case.method.upper()} {case.path}"
    rule = REQUEST_RULES.get(label)
    if rule is not None and rule(case):
        return False
    sentence = _sentence(response)
    return not any(label == operation and re.search(pattern, sentence) for operation, pattern in STATE_RULES)
