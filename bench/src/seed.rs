//! Seeds prospects straight into the SQLite file, in one transaction: creating 100,000 through the
//! API would take minutes and measure the create path instead of the list.
//!
//! Each row is what `create_prospect` would have stored: every not-null column filled, the profile
//! URL normalised (`host/path`), `search_text` as `normalize::search_text` builds it (lowercased
//! full name, company and title joined by ` | `), `tags` a JSON array mirrored in `prospect_tags`,
//! `custom_fields` a JSON object, `source` = `import`, ids of the `prs_` + 20 base62 shape.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};

const FIRST: [&str; 16] = [
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Frances",
    "John",
    "Katherine",
    "Linus",
    "Margaret",
    "Niklaus",
    "Radia",
    "Tim",
    "Sophie",
    "Ken",
];
const LAST: [&str; 16] = [
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Allen",
    "McCarthy",
    "Johnson",
    "Torvalds",
    "Hamilton",
    "Wirth",
    "Perlman",
    "Berners-Lee",
    "Wilson",
    "Thompson",
];
const TITLES: [&str; 8] = [
    "Head of Growth",
    "VP Sales",
    "Chief Executive Officer",
    "Engineering Manager",
    "Marketing Director",
    "Account Executive",
    "Founder",
    "Head of Partnerships",
];
const SENIORITY: [&str; 4] = ["c_level", "vp", "director", "manager"];
const DEPARTMENTS: [&str; 4] = ["sales", "marketing", "engineering", "operations"];
const INDUSTRIES: [&str; 5] = [
    "Software",
    "Financial Services",
    "Healthcare",
    "Retail",
    "Logistics",
];
const PLACES: [(&str, &str, &str); 4] = [
    ("Berlin, Germany", "DE", "Europe/Berlin"),
    ("London, United Kingdom", "GB", "Europe/London"),
    ("New York, United States", "US", "America/New_York"),
    ("Paris, France", "FR", "Europe/Paris"),
];

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A `prs_` id with 20 base62 characters, derived from the row number (distinct per row).
fn prospect_id(index: u64) -> String {
    let mut id = String::with_capacity(24);
    id.push_str("prs_");
    for half in 0..2u64 {
        let mut bits = splitmix64(index.wrapping_mul(2).wrapping_add(half));
        for _ in 0..10 {
            id.push(char::from(BASE62[(bits % 62) as usize]));
            bits /= 62;
        }
    }
    id
}

/// Inserts `count` prospects into `workspace_id`; returns how long it took.
pub async fn prospects(db_path: &Path, workspace_id: &str, count: u64) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let options = SqliteConnectOptions::new()
        .filename(db_path)
        .foreign_keys(true);
    let mut conn = SqliteConnection::connect_with(&options).await?;
    let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    let count_i64 = i64::try_from(count)?;
    let mut tx = conn.begin().await?;
    for index in 0..count {
        let i = usize::try_from(index)?;
        let first = FIRST[i % FIRST.len()];
        let last = LAST[(i / FIRST.len()) % LAST.len()];
        let title = TITLES[i % TITLES.len()];
        let company_number = i % 5_000;
        let company = format!("Company {company_number}");
        let domain = format!("company{company_number}.com");
        let (location, country, timezone) = PLACES[i % PLACES.len()];
        let slug = format!("{}-{}-{index}", first.to_lowercase(), last.to_lowercase());
        let full_name = format!("{first} {last}");
        let search_text = [full_name.as_str(), company.as_str(), title]
            .iter()
            .map(|part| part.to_lowercase())
            .collect::<Vec<_>>()
            .join(" | ");
        let segment = format!("segment-{}", i % 10);
        let tags = serde_json::to_string(&["bench", segment.as_str()])?;
        let custom_fields = serde_json::json!({"seed_row": index}).to_string();
        // Oldest first, one second apart, the newest a little before now.
        let created_at = now_ms - (count_i64 - i64::try_from(index)?) * 1_000;
        let id = prospect_id(index);
        sqlx::query(
            "insert into prospects (id, workspace_id, first_name, last_name, headline, title, seniority, department, \
             company_name, company_domain, company_industry, company_size, location, country, timezone, profile_url, \
             email, phone, tags, custom_fields, score, tier, do_not_contact, source, search_text, created_at, updated_at) \
             values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
             null, null, 0, 'import', ?21, ?22, ?22)",
        )
        .bind(&id)
        .bind(workspace_id)
        .bind(first)
        .bind(last)
        .bind(format!("{title} at {company}"))
        .bind(title)
        .bind(SENIORITY[i % SENIORITY.len()])
        .bind(DEPARTMENTS[i % DEPARTMENTS.len()])
        .bind(&company)
        .bind(&domain)
        .bind(INDUSTRIES[i % INDUSTRIES.len()])
        .bind(i64::try_from(10 + (i % 50) * 100)?)
        .bind(location)
        .bind(country)
        .bind(timezone)
        .bind(format!("linkedin.com/in/{slug}"))
        .bind(format!("{slug}@{domain}"))
        .bind(format!("+1 555 {:04}", i % 10_000))
        .bind(&tags)
        .bind(&custom_fields)
        .bind(&search_text)
        .bind(created_at)
        .execute(&mut *tx)
        .await?;
        for tag in ["bench", segment.as_str()] {
            sqlx::query(
                "insert into prospect_tags (prospect_id, workspace_id, tag) values (?1, ?2, ?3)",
            )
            .bind(&id)
            .bind(workspace_id)
            .bind(tag)
            .execute(&mut *tx)
            .await?;
        }
    }
    // The service keeps each workspace's total beside its prospects; so must a seed that writes
    // them behind its back.
    sqlx::query(
        "insert into prospect_totals (workspace_id, total) values (?1, ?2) \
         on conflict (workspace_id) do update set total = prospect_totals.total + excluded.total",
    )
    .bind(workspace_id)
    .bind(count_i64)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    conn.close().await?;
    Ok(started.elapsed())
}
