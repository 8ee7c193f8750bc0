//! The do-not-contact list: entries by profile URL, email and domain mark the prospects they
//! match (and those written later), the flag and the list are one rule both ways, a CSV import
//! folds repeats and reports refused rows, bad input changes nothing; and the list is applied
//! wherever a person could be reached: at enrollment, at approval and when a step comes due.

use serde_json::{Value, json};

use crate::helpers::{ApiResponse, TestApp, spawn_app};
use crate::outreach::{advance, always, no_worker_app, quiet_profile};
use crate::sequences::send_key;

fn id_of(body: &Value) -> String {
    body["id"].as_str().expect("an id").to_owned()
}

async fn prospect(app: &TestApp, body: Value) -> Value {
    app.post_json("/prospects", &app.key, body)
        .await
        .expect(201)
        .clone()
}

async fn flag(app: &TestApp, id: &str) -> bool {
    let prospect = app.get(&format!("/prospects/{id}"), &app.key).await;
    prospect.expect(200)["do_not_contact"]
        .as_bool()
        .expect("a flag")
}

async fn entries(app: &TestApp, query: &str) -> Vec<Value> {
    let page = app.get(&format!("/do-not-contact?{query}"), &app.key).await;
    page.expect(200)["items"].as_array().expect("items").clone()
}

#[tokio::test]
async fn entries_mark_the_people_they_match_now_and_later() {
    let app = spawn_app().await;
    let ada = prospect(
        &app,
        json!({"first_name": "Ada", "email": "ada@engines.example"}),
    )
    .await;
    let bob = prospect(
        &app,
        json!({"first_name": "Bob", "company_domain": "engines.example"}),
    )
    .await;
    let cy = prospect(
        &app,
        json!({"first_name": "Cy", "profile_url": "https://www.linkedin.com/in/Cy-Example/"}),
    )
    .await;
    let dee = prospect(
        &app,
        json!({"first_name": "Dee", "email": "dee@elsewhere.example"}),
    )
    .await;

    let added = app
        .post_json(
            "/do-not-contact",
            &app.key,
            json!({"entries": [
                {"kind": "domain", "value": "https://www.Engines.example/about", "reason": "customer"},
                {"kind": "profile_url", "value": "linkedin.com/in/cy-example"},
                {"kind": "domain", "value": "engines.example"},
            ]}),
        )
        .await;
    let added = added.expect(200).clone();
    assert_eq!(added["added"], 2, "{added}");
    assert_eq!(added["already_listed"], 1, "{added}");
    assert_eq!(added["prospects_marked"], 3, "{added}");
    assert_eq!(added["entries"].as_array().expect("entries").len(), 2);
    assert_eq!(added["entries"][0]["value"], "engines.example");
    assert_eq!(added["entries"][0]["reason"], "customer");
    assert_eq!(added["entries"][0]["source"], "manual");
    assert!(
        added["entries"][0]["added_by"]
            .as_str()
            .is_some_and(|by| !by.is_empty()),
        "{added}"
    );
    for (who, listed) in [(&ada, true), (&bob, true), (&cy, true), (&dee, false)] {
        assert_eq!(flag(&app, &id_of(who)).await, listed, "{who}");
    }
    assert_eq!(entries(&app, "kind=domain").await.len(), 1);
    assert_eq!(entries(&app, "").await.len(), 2);

    // Someone written later comes under the list at once.
    let eve = prospect(
        &app,
        json!({"first_name": "Eve", "email": "eve@ENGINES.example"}),
    )
    .await;
    assert_eq!(eve["do_not_contact"], true, "{eve}");
    let moved = app
        .patch_json(
            &format!("/prospects/{}", id_of(&dee)),
            &app.key,
            json!({"company_domain": "engines.example"}),
        )
        .await;
    assert_eq!(moved.expect(200)["do_not_contact"], true);

    // Removing the domain frees those only it matched.
    let domain = id_of(&added["entries"][0]);
    let removed = app
        .delete(&format!("/do-not-contact/{domain}"), &app.key)
        .await;
    let removed = removed.expect(200).clone();
    // Ada, Dee and Eve; Bob (no profile URL, no email) could have been marked by a person,
    // which no entry of his own records, so his mark stays.
    assert_eq!(removed["prospects_unmarked"], 3, "{removed}");
    assert!(!flag(&app, &id_of(&ada)).await);
    assert!(flag(&app, &id_of(&bob)).await);
    assert!(flag(&app, &id_of(&cy)).await, "cy's own entry stays");
    let again = app
        .delete(&format!("/do-not-contact/{domain}"), &app.key)
        .await;
    again.expect_error(404, "not_found");
}

#[tokio::test]
async fn the_flag_and_the_list_are_one_rule() {
    let app = spawn_app().await;
    let ada = prospect(
        &app,
        json!({"first_name": "Ada", "profile_url": "linkedin.com/in/ada-flagged", "company_domain": "flagged.example"}),
    )
    .await;
    let id = id_of(&ada);
    let marked = app
        .patch_json(
            &format!("/prospects/{id}"),
            &app.key,
            json!({"do_not_contact": true}),
        )
        .await;
    assert_eq!(marked.expect(200)["do_not_contact"], true);
    let listed = entries(&app, "kind=profile_url").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["value"], "linkedin.com/in/ada-flagged");
    assert_eq!(listed[0]["source"], "prospect");

    let cleared = app
        .patch_json(
            &format!("/prospects/{id}"),
            &app.key,
            json!({"do_not_contact": false}),
        )
        .await;
    assert_eq!(cleared.expect(200)["do_not_contact"], false);
    assert!(entries(&app, "").await.is_empty());

    // While the company's domain is listed, clearing the flag is refused and changes nothing.
    app.post_json(
        "/do-not-contact",
        &app.key,
        json!({"entries": [{"kind": "domain", "value": "flagged.example"}]}),
    )
    .await
    .expect(200);
    assert!(flag(&app, &id).await);
    let refused = app
        .patch_json(
            &format!("/prospects/{id}"),
            &app.key,
            json!({"do_not_contact": false, "title": "CTO"}),
        )
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(message.contains("flagged.example"), "{message}");
    let after = app.get(&format!("/prospects/{id}"), &app.key).await;
    let after = after.expect(200).clone();
    assert_eq!(after["do_not_contact"], true);
    assert!(after["title"].is_null(), "{after}");

    // Marked by the domain, then by a person too: removing the domain keeps the person's mark.
    app.patch_json(
        &format!("/prospects/{id}"),
        &app.key,
        json!({"do_not_contact": true}),
    )
    .await
    .expect(200);
    let own = entries(&app, "kind=profile_url").await;
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(own[0]["added_by"].is_string(), "{own:?}");
    let domain = entries(&app, "kind=domain").await;
    let domain = id_of(&domain[0]);
    let removed = app
        .delete(&format!("/do-not-contact/{domain}"), &app.key)
        .await;
    assert_eq!(removed.expect(200)["prospects_unmarked"], 0);
    assert!(flag(&app, &id).await, "a person's mark was cleared");
}

#[tokio::test]
async fn bad_entries_are_refused_whole_naming_the_entry() {
    let app = spawn_app().await;
    for (body, names) in [
        (
            json!({"entries": [{"kind": "domain", "value": "ok.example"}, {"kind": "email", "value": "nope"}]}),
            "`entries[1].value`",
        ),
        (
            json!({"entries": [{"kind": "profile_url", "value": "not a url"}]}),
            "`entries[0].value`",
        ),
        (
            json!({"entries": [{"kind": "domain", "value": "x.example", "reason": "r".repeat(501)}]}),
            "`entries[0].reason`",
        ),
        (json!({"entries": []}), "`entries`"),
        (
            json!({"entries": [{"kind": "phone", "value": "+1"}]}),
            "kind",
        ),
    ] {
        let refused = app.post_json("/do-not-contact", &app.key, body).await;
        let message = refused.expect_error(400, "invalid_request");
        assert!(message.contains(names), "{names}: {message}");
    }
    assert!(
        entries(&app, "").await.is_empty(),
        "a refused call saved something"
    );
    let bad_kind = app.get("/do-not-contact?kind=phone", &app.key).await;
    bad_kind.expect_error(400, "invalid_request");
}

async fn import(app: &TestApp, csv: &str) -> ApiResponse {
    let response = app
        .client
        .post(format!("{}/api/v1/do-not-contact/imports", app.base_url))
        .bearer_auth(&app.key)
        .header("content-type", "text/csv")
        .body(csv.to_owned())
        .send()
        .await
        .expect("send");
    ApiResponse::read(response).await
}

#[tokio::test]
async fn a_csv_import_folds_repeats_and_reports_refused_rows() {
    let app = spawn_app().await;
    let ada = prospect(
        &app,
        json!({"first_name": "Ada", "email": "ada@imported.example"}),
    )
    .await;
    let csv = "Email Address,Company Domain,LinkedIn URL,Reason\n\
               ada@imported.example,,,asked to stop\n\
               ,rival.example,,competitor\n\
               ADA@imported.example,,,\n\
               not-an-email,,,\n\
               ,,,\n\
               ,,https://www.linkedin.com/in/someone-listed,\n";
    let imported = import(&app, csv).await;
    let imported = imported.expect(200).clone();
    assert_eq!(imported["rows"], 6, "{imported}");
    assert_eq!(imported["added"], 3, "{imported}");
    assert_eq!(imported["duplicates"], 1, "{imported}");
    assert_eq!(imported["refused"], 2, "{imported}");
    assert_eq!(imported["prospects_marked"], 1, "{imported}");
    let rows: Vec<u64> = imported["refused_rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["row"].as_u64().expect("a row"))
        .collect();
    assert_eq!(rows, [4, 5], "{imported}");
    assert!(
        imported["refused_rows"][0]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("`email`"))
    );
    assert!(flag(&app, &id_of(&ada)).await);
    let listed = entries(&app, "kind=email").await;
    assert_eq!(listed[0]["reason"], "asked to stop");
    assert_eq!(listed[0]["source"], "import");

    // The same file again adds nothing; a file without a usable column is refused whole.
    let again = import(&app, csv).await;
    assert_eq!(again.expect(200)["added"], 0);
    let refused = import(&app, "Name,Company\nAda,Engines\n").await;
    let message = refused.expect_error(400, "invalid_request");
    assert!(
        message.contains("`Name`") && message.contains("`domain`"),
        "{message}"
    );
    let json_body = app
        .post_json(
            "/do-not-contact/imports",
            &app.key,
            json!({"csv": "domain\nnew-one.example\n", "reason": "from the CRM"}),
        )
        .await;
    assert_eq!(json_body.expect(200)["added"], 1);
    let domains = entries(&app, "kind=domain").await;
    assert_eq!(domains.len(), 2);
    assert_eq!(domains[0]["reason"], "from the CRM");
}

/// A sender, a sequence of one invitation then a message a day later, and `people` quiet
/// prospects; answers the sender, the sequence and the prospects' ids and profile URLs.
async fn outreach_world(app: &TestApp, people: usize) -> (String, Vec<(String, String)>) {
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Ann", "timezone": "Europe/Berlin", "working_hours": always()}),
        )
        .await;
    let sender = id_of(sender.expect(201));
    let mut prospects = Vec::new();
    for n in 0..people {
        let url = quiet_profile(&format!("dnc-{n}"));
        let made = prospect(
            app,
            json!({"first_name": format!("P{n}"), "profile_url": format!("https://www.{url}")}),
        )
        .await;
        prospects.push((id_of(&made), url));
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Listed", "sender_ids": [sender], "steps": [
                {"type": "view_profile"},
                {"type": "connection_request", "delay_hours": 24, "note": "Hi {{first_name}}"},
            ]}),
        )
        .await;
    (id_of(sequence.expect(201)), prospects)
}

async fn list(app: &TestApp, url: &str) {
    app.post_json(
        "/do-not-contact",
        &app.key,
        json!({"entries": [{"kind": "profile_url", "value": url, "reason": "asked to stop"}]}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn the_list_is_applied_at_enrollment_approval_and_send_time() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let (sequence, people) = outreach_world(&app, 4).await;
    let ids: Vec<&str> = people.iter().map(|(id, _)| id.as_str()).collect();
    // At enrollment: a listed person is skipped, with the reason.
    list(&app, &people[0].1).await;
    let added = app
        .post_json(
            &format!("/sequences/{sequence}/enrollments"),
            &app.key,
            json!({"prospect_ids": ids}),
        )
        .await;
    let added = added.expect(200).clone();
    assert_eq!(added["added"], 3, "{added}");
    assert_eq!(added["skipped"][0]["prospect_id"], people[0].0.as_str());
    assert_eq!(added["skipped"][0]["reason"], "do_not_contact");

    // At approval: listed after enrollment, refused.
    list(&app, &people[1].1).await;
    app.post_json(&format!("/sequences/{sequence}/activate"), &send, json!({}))
        .await
        .expect(200);
    let approved = app
        .post_json(
            "/approvals/approve",
            &send,
            json!({"sequence_id": sequence}),
        )
        .await;
    let approved = approved.expect(200).clone();
    assert!(
        approved.to_string().contains("do_not_contact"),
        "{approved}"
    );
    // Both approved people are viewed (a sender's calls are a minute or so apart).
    advance(&app, 600).await;

    // At send time: listed after approval, between the view and the invitation.
    list(&app, &people[2].1).await;
    advance(&app, 3 * 86_400).await;
    let log = app.get("/sandbox/log?limit=200", &app.key).await;
    let log = log.expect(200)["items"].as_array().expect("items").clone();
    let reached = |url: &str, kind: &str| {
        log.iter()
            .any(|entry| entry["profile_url"] == url && entry["kind"] == kind)
    };
    assert!(!reached(&people[0].1, "profile_view"));
    assert!(!reached(&people[1].1, "profile_view"));
    assert!(reached(&people[2].1, "profile_view"), "{log:?}");
    assert!(
        !reached(&people[2].1, "invitation"),
        "invited after being listed"
    );
    assert!(reached(&people[3].1, "invitation"), "{log:?}");
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={sequence}"), &app.key)
        .await;
    let third = enrollments.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|item| item["prospect_id"] == people[2].0.as_str())
        .cloned()
        .expect("the third's enrollment");
    assert_eq!(third["status"], "finished", "{third}");
    assert_eq!(third["exit_reason"], "do_not_contact", "{third}");
}
