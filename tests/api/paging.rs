//! Paging (DESIGN.md section 5): `limit` 1 to 200, `offset`, and `{total, count, offset,
//! has_more, next_offset, items}`; following `next_offset` while `has_more` visits each row once.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

async fn seed(app: &TestApp, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for index in 0..count {
        let prospect = app
            .create_prospect(json!({"first_name": format!("P{index:02}"), "tags": ["seed"]}))
            .await;
        ids.push(prospect["id"].as_str().expect("id").to_owned());
    }
    ids
}

#[tokio::test]
async fn walking_next_offset_visits_each_prospect_exactly_once_newest_first() {
    let app = spawn_app().await;
    let created = seed(&app, 60).await;

    let mut seen: Vec<Value> = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let page = app
            .get(&format!("/prospects?limit=7&offset={offset}"), &app.key)
            .await
            .expect(200)
            .clone();
        pages += 1;
        assert!(pages <= 9, "the walk does not end");
        let items = page["items"].as_array().expect("items").clone();
        assert_eq!(page["total"], json!(60));
        assert_eq!(page["offset"], json!(offset));
        assert_eq!(page["count"], json!(items.len()));
        assert!(items.len() <= 7, "a page holds at most `limit` items");
        seen.extend(items);
        if page["has_more"] == json!(true) {
            let next = page["next_offset"]
                .as_u64()
                .expect("next_offset while has_more");
            assert_eq!(next, offset + 7, "next_offset follows the page");
            offset = next;
        } else {
            assert_eq!(
                page["next_offset"],
                Value::Null,
                "no next_offset on the last page"
            );
            break;
        }
    }
    assert_eq!(pages, 9, "60 items in pages of 7");

    let ids: Vec<&str> = seen
        .iter()
        .map(|item| item["id"].as_str().expect("id"))
        .collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 60, "every prospect once");
    assert_eq!(unique.len(), 60, "no prospect twice");
    assert_eq!(
        unique,
        created.iter().map(String::as_str).collect::<HashSet<_>>()
    );

    // Newest first, the id breaking ties between prospects created in the same millisecond.
    for pair in seen.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (a_time, b_time) = (
            a["created_at"].as_str().expect("time"),
            b["created_at"].as_str().expect("time"),
        );
        assert!(
            a_time > b_time || (a_time == b_time && a["id"].as_str() > b["id"].as_str()),
            "out of order: {} {a_time} before {} {b_time}",
            a["id"],
            b["id"]
        );
    }
    assert_eq!(
        ids.first().copied(),
        created.last().map(String::as_str),
        "the newest comes first"
    );
}

#[tokio::test]
async fn the_default_page_is_25_and_200_is_allowed() {
    let app = spawn_app().await;
    seed(&app, 30).await;
    let page = app.get("/prospects", &app.key).await.expect(200).clone();
    assert_eq!(page["count"], json!(25));
    assert_eq!(page["has_more"], json!(true));
    assert_eq!(page["next_offset"], json!(25));
    let page = app
        .get("/prospects?limit=200", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(page["count"], json!(30));
    assert_eq!(page["has_more"], json!(false));
}

#[tokio::test]
async fn limit_out_of_range_is_a_400_naming_the_bound() {
    let app = spawn_app().await;
    for limit in ["0", "201", "99999999999"] {
        let message = app
            .get(&format!("/prospects?limit={limit}"), &app.key)
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(
            message.contains("`limit`") && message.contains("between 1 and 200"),
            "limit={limit}: the sentence names the bound: {message}"
        );
    }
    let (is_error, body) = app
        .mcp_call(&app.key, "service_list_prospects", json!({"limit": 201}))
        .await;
    assert!(is_error);
    assert!(
        body["error"].as_str().unwrap_or_default().contains("200"),
        "{body}"
    );
    let message = app
        .get("/prospects?limit=ten", &app.key)
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("limit"), "{message}");
}

#[tokio::test]
async fn a_negative_limit_or_offset_is_a_400_naming_the_field() {
    let app = spawn_app().await;
    for query in ["limit=-1", "offset=-3"] {
        let field = query.split('=').next().expect("field");
        let message = app
            .get(&format!("/prospects?{query}"), &app.key)
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(
            message.contains(&format!("`{field}`")),
            "{query}: the sentence names `{field}`: {message}"
        );
    }
}

#[tokio::test]
async fn offset_past_the_end_gives_an_empty_last_page() {
    let app = spawn_app().await;
    seed(&app, 3).await;
    for offset in [3, 4, 1000] {
        let page = app
            .get(&format!("/prospects?offset={offset}"), &app.key)
            .await
            .expect(200)
            .clone();
        assert_eq!(page["items"], json!([]), "offset={offset}");
        assert_eq!(page["count"], json!(0));
        assert_eq!(page["total"], json!(3));
        assert_eq!(page["has_more"], json!(false));
        assert_eq!(page["next_offset"], Value::Null);
    }
}

#[tokio::test]
async fn filters_page_over_the_matching_prospects_only() {
    let app = spawn_app().await;
    seed(&app, 12).await;
    for index in 0..5 {
        app.create_prospect(json!({"first_name": format!("Tagged{index}"), "tags": ["chosen"]}))
            .await;
    }
    let first = app
        .get("/prospects?tag=chosen&limit=3", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(first["total"], json!(5));
    assert_eq!(first["next_offset"], json!(3));
    let second = app
        .get("/prospects?tag=chosen&limit=3&offset=3", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(second["count"], json!(2));
    assert_eq!(second["has_more"], json!(false));
}

/// Sixty prospects of some 3 KB each (`P00` to `P59`), so that 200 of them pass a page's bound;
/// their ids.
async fn sixty_large_prospects(app: &TestApp) -> HashSet<String> {
    let long = |what: &str| format!("{what} {}", "x".repeat(480));
    let mut created = HashSet::new();
    for index in 0..60 {
        let prospect = app
            .create_prospect(json!({
                "first_name": format!("P{index:02}"),
                "headline": long("headline"),
                "title": long("title"),
                "company_name": long("company"),
                "location": long("location"),
                "company_industry": long("industry"),
                "department": long("department"),
            }))
            .await;
        created.insert(prospect["id"].as_str().expect("id").to_owned());
    }
    created
}

/// A page whose answer would pass 100 KB (25,000 tokens, what MCP hosts take) is cut short with
/// `has_more` and `next_offset`, on both faces alike; walking it still visits every prospect
/// once, and no page is empty.
#[tokio::test]
async fn a_page_too_large_for_an_assistant_is_cut_short_and_walks_to_the_end() {
    let app = spawn_app().await;
    let created = sixty_large_prospects(&app).await;

    let mut seen = HashSet::new();
    let mut offset = 0;
    let mut cut = false;
    loop {
        let response = app
            .get(&format!("/prospects?limit=200&offset={offset}"), &app.key)
            .await;
        assert!(
            response.raw.len() <= 100 * 1024,
            "{} bytes",
            response.raw.len()
        );
        let page = response.expect(200).clone();
        let items = page["items"].as_array().expect("items");
        assert!(!items.is_empty(), "an empty page at {offset}");
        assert_eq!(page["count"], json!(items.len()));
        assert_eq!(page["total"], json!(60));
        assert_eq!(page["offset"], json!(offset));
        cut |= items.len() < 60 - offset;
        for item in items {
            assert!(seen.insert(item["id"].as_str().expect("id").to_owned()));
        }
        if page["has_more"] == json!(false) {
            assert_eq!(page["next_offset"], Value::Null);
            break;
        }
        assert_eq!(page["next_offset"], json!(offset + items.len()));
        offset += items.len();
    }
    assert!(cut, "no page was cut short");
    assert_eq!(seen, created, "every prospect once");

    // MCP answers the same page.
    let rest = app
        .get("/prospects?limit=200", &app.key)
        .await
        .expect(200)
        .clone();
    let (is_error, mcp) = app
        .mcp_call(&app.key, "service_list_prospects", json!({"limit": 200}))
        .await;
    assert!(!is_error);
    assert_eq!(mcp, rest);
    assert_eq!(rest["has_more"], json!(true));
}

/// An MCP list call's `fields` keeps only those fields of each item (and `id`), and the page's
/// bound counts what is sent: names and ids of 60 large prospects fit in one page that would be
/// cut short whole. REST, which takes no `fields`, answers whole items.
#[tokio::test]
async fn an_assistant_asks_for_some_fields_and_gets_those_in_a_fuller_page() {
    let app = spawn_app().await;
    sixty_large_prospects(&app).await;
    let (is_error, whole) = app
        .mcp_call(&app.key, "service_list_prospects", json!({"limit": 200}))
        .await;
    assert!(!is_error, "{whole}");
    assert_eq!(whole["has_more"], json!(true), "the whole page is cut");

    let (is_error, page) = app
        .mcp_call(
            &app.key,
            "service_list_prospects",
            json!({"limit": 200, "fields": ["first_name", "full_name"]}),
        )
        .await;
    assert!(!is_error, "{page}");
    assert_eq!(page["count"], json!(60));
    assert_eq!(page["has_more"], json!(false));
    assert_eq!(page["next_offset"], Value::Null);
    let items = page["items"].as_array().expect("items");
    let ids: HashSet<&str> = items
        .iter()
        .map(|item| item["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids.len(), 60);
    for item in items {
        let mut keys: Vec<&str> = item
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["first_name", "full_name", "id"], "{item}");
    }
    assert_eq!(items[0]["first_name"], json!("P59"));
}

/// `fields` naming what an item does not have, not a list, empty, or on a tool that answers no
/// page is a tool error `invalid_request` naming it; REST takes no `fields` at all.
#[tokio::test]
async fn fields_that_are_not_the_items_are_refused_by_name() {
    let app = spawn_app().await;
    let cases = [
        (
            "service_list_prospects",
            json!({"fields": ["full_name", "salary"]}),
            "Unknown field `salary` in `fields`: the items have",
        ),
        (
            "service_list_prospects",
            json!({"fields": []}),
            "Invalid field `fields`: expected a non-empty list",
        ),
        (
            "service_list_prospects",
            json!({"fields": "full_name"}),
            "Invalid field `fields`",
        ),
        (
            "service_get_workspace",
            json!({"fields": ["name"]}),
            "Unknown field `fields`: `service_get_workspace` answers no list of items.",
        ),
    ];
    for (tool, arguments, sentence) in cases {
        let (is_error, body) = app.mcp_call(&app.key, tool, arguments.clone()).await;
        assert!(is_error, "{tool} {arguments}: {body}");
        assert_eq!(body["code"], json!("invalid_request"), "{body}");
        let message = body["error"].as_str().expect("a sentence");
        assert!(message.contains(sentence), "{tool} {arguments}: {message}");
    }
    let response = app.get("/prospects?fields=full_name", &app.key).await;
    let body = response.expect(400);
    assert!(
        body["error"]
            .as_str()
            .expect("a sentence")
            .contains("Unknown field `fields`"),
        "{body}"
    );
}

/// The dashboard is no page, but it is held to the same bound: a workspace with hundreds of
/// live sequences gets the most active that fit in 100 KB, and `left_out` counts the rest.
#[tokio::test]
async fn the_dashboard_stays_within_the_bound_and_says_what_it_left_out() {
    let app = spawn_app().await;
    const SEQUENCES: usize = 300;
    for index in 0..SEQUENCES {
        // A long name makes each entry about 400 bytes, so 300 of them pass 100 KB.
        let name = format!("{index:03} {}", "long sequence name ".repeat(10));
        app.post_json(
            "/sequences",
            &app.key,
            json!({"name": name, "steps": crate::sequences::steps(), "sender_ids": []}),
        )
        .await
        .expect(201);
    }
    // Only sequences past their draft are on the dashboard.
    sqlx::query("update sequences set status = 'stopped' where workspace_id = $1")
        .bind(&app.workspace_id)
        .execute(app.db.pool())
        .await
        .expect("stop them");

    let dashboard = app
        .get("/dashboard?period=30d", &app.key)
        .await
        .expect(200)
        .clone();
    let bytes = dashboard.to_string().len();
    let shown = dashboard["outreach"]["by_sequence"]
        .as_array()
        .expect("by_sequence")
        .len();
    let left_out = dashboard["left_out"]["sequences"]
        .as_u64()
        .expect("a count") as usize;
    println!("dashboard: {bytes} bytes, {shown} sequences shown, {left_out} left out");
    assert!(bytes <= 100 * 1024, "{bytes} bytes");
    assert!(
        left_out > 0 && shown > 0,
        "{shown} shown, {left_out} left out"
    );
    assert_eq!(
        shown + left_out,
        SEQUENCES,
        "every sequence shown or counted"
    );

    // The MCP tool answers the same, within the bound too.
    let (failed, tool) = app
        .mcp_call(&app.key, "service_get_dashboard", json!({"period": "30d"}))
        .await;
    assert!(!failed, "{tool}");
    assert_eq!(
        tool["left_out"], dashboard["left_out"],
        "{}",
        tool["left_out"]
    );
}
