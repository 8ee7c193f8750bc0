//! What an MCP client that can ask its person confirms before a call reaches people, in the
//! person's terms: who, how many, from which account, and when the first goes out; a resumed
//! sequence or enrollment, and an autonomous agent's run (which approves its own proposals) too. The runtime
//! asks (`outreach_runtime::confirmations`); this module says, for each call, what to read first
//! and the sentence. A call that would reach nobody asks nothing. Priced calls over the
//! threshold are asked about by the runtime itself, with their price.

use outreach_runtime::prelude::{Look, Scope, confirmation};
use serde_json::{Map, Value};

confirmation! {
    action: "approve_outreach",
    look: Look::Preview,
    describe: approve_sentence,
}

confirmation! {
    action: "activate_sequence",
    look: Look::Read { action: "get_sequence", id_field: "id" },
    describe: activate_sentence,
}

confirmation! {
    action: "reply_to_conversation",
    look: Look::Read { action: "get_conversation", id_field: "id" },
    describe: reply_sentence,
}

confirmation! {
    action: "resume_sequence",
    look: Look::Read { action: "get_sequence", id_field: "id" },
    describe: resume_sentence,
}

confirmation! {
    action: "resume_enrollment",
    look: Look::Read { action: "get_enrollment", id_field: "id" },
    describe: resume_one_sentence,
}

// Started with `write`, an autonomous agent's run only proposes: nothing to confirm.
confirmation! {
    action: "run_agent",
    look: Look::Read { action: "get_agent", id_field: "id" },
    reaches_people_with: Scope::Send,
    describe: run_sentence,
}

/// From the dry run of `approve_outreach`.
fn approve_sentence(_arguments: &Map<String, Value>, preview: &Value) -> Option<String> {
    let people = count(&preview["items"]);
    let replies = count(&preview["replies"]);
    if people + replies == 0 {
        return None;
    }
    let senders = count(&preview["senders"]);
    let mut what = Vec::new();
    if people > 0 {
        what.push(format!(
            "{} for outreach",
            plural(people, "person", "people")
        ));
    }
    if replies > 0 {
        what.push(format!("{} to send", plural(replies, "reply", "replies")));
    }
    let first = preview["senders"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|plan| plan["first_send_at"].as_str())
        .chain(
            preview["replies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|reply| reply["send_at"].as_str()),
        )
        .min();
    let accounts = if senders == 0 {
        String::new()
    } else {
        format!(
            " from {}",
            plural(senders, "sender account", "sender accounts")
        )
    };
    let when = first.map_or_else(String::new, |at| {
        format!("; the first can go out at {at} (UTC), inside the sender's working hours")
    });
    Some(format!(
        "This approves {}{accounts}{when}.",
        what.join(" and ")
    ))
}

/// From the sequence `activate_sequence` would start.
fn activate_sentence(_arguments: &Map<String, Value>, sequence: &Value) -> Option<String> {
    if sequence["status"] != "draft" {
        return None;
    }
    let approved = sequence["enrollment_counts"]["scheduled"]
        .as_u64()
        .unwrap_or(0);
    if approved == 0 {
        return None;
    }
    let name = sequence["name"].as_str().unwrap_or("this sequence");
    let steps = count(&sequence["steps"]);
    let senders = count(&sequence["sender_ids"]);
    let waiting = sequence["enrollment_counts"]["awaiting_approval"]
        .as_u64()
        .unwrap_or(0);
    let later = if waiting > 0 {
        format!(
            ", and {} more once approved",
            plural(waiting, "person", "people")
        )
    } else {
        String::new()
    };
    Some(format!(
        "This starts `{name}` ({}) from {}: {} approved begin to receive real invitations and \
         messages{later}.",
        plural(steps, "step", "steps"),
        plural(senders, "sender account", "sender accounts"),
        plural(approved, "person", "people"),
    ))
}

/// From the sequence `resume_sequence` would start again.
fn resume_sentence(_arguments: &Map<String, Value>, sequence: &Value) -> Option<String> {
    if sequence["status"] != "paused" {
        return None;
    }
    let counts = &sequence["enrollment_counts"];
    let live = counts["scheduled"].as_u64().unwrap_or(0) + counts["active"].as_u64().unwrap_or(0);
    if live == 0 {
        return None;
    }
    let name = sequence["name"].as_str().unwrap_or("this sequence");
    Some(format!(
        "This resumes `{name}` from {}: {} get their next steps again, with real invitations \
         and messages.",
        plural(
            count(&sequence["sender_ids"]),
            "sender account",
            "sender accounts"
        ),
        plural(live, "person", "people"),
    ))
}

/// From the enrollment `resume_enrollment` would start again.
fn resume_one_sentence(_arguments: &Map<String, Value>, enrollment: &Value) -> Option<String> {
    if enrollment["status"] != "paused" {
        return None;
    }
    let prospect = enrollment["prospect_id"].as_str().unwrap_or("its prospect");
    let sequence = enrollment["sequence_id"].as_str().unwrap_or("its sequence");
    let sender = enrollment["sender_id"]
        .as_str()
        .map_or_else(String::new, |sender| {
            format!(" from sender account `{sender}`")
        });
    Some(format!(
        "This resumes prospect `{prospect}` in sequence `{sequence}`: their next step goes out \
         again{sender}, a real invitation or message."
    ))
}

/// From the agent `run_agent` would run: only an autonomous one decides on its own.
fn run_sentence(_arguments: &Map<String, Value>, agent: &Value) -> Option<String> {
    // A triage agent never sends, whatever its mode.
    if agent["mode"] != "autonomous" || agent["kind"] == "inbox_triage" {
        return None;
    }
    let name = agent["name"].as_str().unwrap_or("this agent");
    let most = agent["max_prospects_per_run"]
        .as_u64()
        .map_or_else(String::new, |most| {
            format!(" (up to {})", plural(most, "person", "people"))
        });
    Some(format!(
        "This runs `{name}`, an autonomous agent: started with `send`, it approves what it \
         proposes{most}, and what it approves reaches people."
    ))
}

/// From the conversation `reply_to_conversation` writes in.
fn reply_sentence(arguments: &Map<String, Value>, conversation: &Value) -> Option<String> {
    let name = conversation["prospect"]["name"].as_str().map_or_else(
        || "this person".to_owned(),
        |name| format!("\u{201c}{name}\u{201d}"),
    );
    let sender = conversation["sender_id"].as_str().unwrap_or("its sender");
    let text = arguments.get("text").and_then(Value::as_str).unwrap_or("");
    let shown: String = text.chars().take(280).collect();
    let cut = if shown.len() < text.len() { "..." } else { "" };
    Some(format!(
        "This sends {name} a message from sender account `{sender}`: \"{shown}{cut}\"."
    ))
}

fn count(list: &Value) -> u64 {
    list.as_array().map_or(0, |items| items.len() as u64)
}

fn plural(count: u64, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_approval_says_how_many_from_how_many_accounts_and_when() {
        let preview = json!({
            "items": [{}, {}],
            "replies": [{"send_at": "2026-12-08T09:00:00Z"}],
            "senders": [{"first_send_at": "2026-12-08T08:30:00Z"}],
        });
        assert_eq!(
            approve_sentence(&Map::new(), &preview).as_deref(),
            Some(
                "This approves 2 people for outreach and 1 reply to send from 1 sender account; \
                 the first can go out at 2026-12-08T08:30:00Z (UTC), inside the sender's working \
                 hours."
            )
        );
        let nothing = json!({"items": [], "replies": [], "senders": []});
        assert_eq!(approve_sentence(&Map::new(), &nothing), None);
    }

    #[test]
    fn an_activation_names_the_sequence_and_who_it_reaches() {
        let sequence = json!({
            "name": "Q1 founders", "status": "draft", "steps": [{}, {}, {}],
            "sender_ids": ["snd_1"],
            "enrollment_counts": {"scheduled": 25, "awaiting_approval": 3},
        });
        assert_eq!(
            activate_sentence(&Map::new(), &sequence).as_deref(),
            Some(
                "This starts `Q1 founders` (3 steps) from 1 sender account: 25 people approved \
                 begin to receive real invitations and messages, and 3 people more once approved."
            )
        );
        let paused = json!({"status": "paused", "enrollment_counts": {"scheduled": 5}});
        assert_eq!(activate_sentence(&Map::new(), &paused), None);
    }

    #[test]
    fn a_resume_and_an_autonomous_run_say_what_they_start() {
        let sequence = json!({
            "name": "Q1", "status": "paused", "sender_ids": ["snd_1", "snd_2"],
            "enrollment_counts": {"scheduled": 2, "active": 3},
        });
        assert_eq!(
            resume_sentence(&Map::new(), &sequence).as_deref(),
            Some(
                "This resumes `Q1` from 2 sender accounts: 5 people get their next steps again, \
                 with real invitations and messages."
            )
        );
        let agent = json!({"name": "Finder", "kind": "prospector", "mode": "autonomous",
            "max_prospects_per_run": 25});
        assert_eq!(
            run_sentence(&Map::new(), &agent).as_deref(),
            Some(
                "This runs `Finder`, an autonomous agent: started with `send`, it approves what \
                 it proposes (up to 25 people), and what it approves reaches people."
            )
        );
        let supervised = json!({"name": "Finder", "mode": "review"});
        assert_eq!(run_sentence(&Map::new(), &supervised), None);
    }

    #[test]
    fn a_resumed_enrollment_names_who_and_from_which_account() {
        let paused = json!({"status": "paused", "prospect_id": "prs_1", "sequence_id": "seq_1", "sender_id": "snd_1"});
        assert_eq!(
            resume_one_sentence(&Map::new(), &paused).as_deref(),
            Some(
                "This resumes prospect `prs_1` in sequence `seq_1`: their next step goes out again from sender account `snd_1`, a real invitation or message."
            )
        );
        let active = json!({"status": "active", "prospect_id": "prs_1", "sequence_id": "seq_1"});
        assert_eq!(resume_one_sentence(&Map::new(), &active), None);
    }

    #[test]
    fn a_reply_quotes_what_is_sent_and_to_whom() {
        let arguments = Map::from_iter([("text".to_owned(), json!("Thanks, Tuesday works."))]);
        let conversation = json!({"prospect": {"name": "Jane Doe"}, "sender_id": "snd_1"});
        assert_eq!(
            reply_sentence(&arguments, &conversation).as_deref(),
            Some(
                "This sends \u{201c}Jane Doe\u{201d} a message from sender account `snd_1`: \"Thanks, Tuesday works.\"."
            )
        );
    }
}
