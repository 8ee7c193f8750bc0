//! Targeting: a workspace's ideal-customer profiles, the yardstick scoring runs measure by.
//!
//! A targeting is a set of point-earning criteria (titles, seniorities, departments, industries,
//! company sizes, locations, keywords), gates that disqualify outright, and tier thresholds. The
//! rules are validated here, once, so the scoring engine (`scoring::engine`) can trust them, and
//! stored as JSON text: they are always read and written whole. Every change bumps `version`, and
//! each score records the version that produced it, so an old score can be told from a new one.
//! Names are unique per workspace (409 `conflict` with `existing_id`).

use std::collections::BTreeSet;

use crate::common::{Deleted, IdKind, json_text, words_into};
use crate::prospects::normalize;
use outreach_runtime::prelude::is_unique_violation;
use outreach_runtime::prelude::paged;
use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, Timestamp, action, ids};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::any::AnyRow;

outreach_runtime::prelude::resource_tag!(
    "targetings",
    toolset = "prospecting",
    "Ideal-customer profiles that scoring compares prospects against."
);

pub const MAX_NAME_CHARS: usize = 100;
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
pub const MAX_KEYWORD_CHARS: usize = 100;
/// Entries per criterion or gate list: plenty for a profile, and a bound on scoring work.
pub const MAX_ENTRIES: usize = 100;
/// The schema pattern of a keyword: a letter or a digit somewhere (`[^\W_]`, a word character
/// that is not `_`), and no NUL.
pub const KEYWORD_PATTERN: &str = "^[^\\x00]*[^\\W_\\x00][^\\x00]*$";
pub const MAX_POINTS: i64 = 100;
pub const DEFAULT_TIERS: Tiers = Tiers {
    a: 80,
    b: 60,
    c: 40,
};

/// The points a criterion entry given as a bare string earns (`"cto"` is `{"value": "cto",
/// "points": 10}`).
pub const DEFAULT_POINTS: i64 = 10;

/// Implements `Deserialize` (and `Serialize`) for a struct derived with `#[serde(remote =
/// "Self")]`, taking a JSON object only. serde's derived structs also take a list of the fields in
/// order (`[[...], []]` for `{"include": [...], "exclude": []}`), which the schema does not say and
/// nobody means; here a list is refused with the expected shape.
macro_rules! object_only {
    ($type:ident, $expecting:expr) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Fields;
                impl<'de> serde::de::Visitor<'de> for Fields {
                    type Value = $type;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        map: A,
                    ) -> Result<$type, A::Error> {
                        $type::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                deserializer.deserialize_map(Fields)
            }
        }
    };
    ($type:ident, $expecting:expr, serialize) => {
        object_only!($type, $expecting);
        impl Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $type::serialize(self, serializer)
            }
        }
    };
}

/// A criterion entry: a word or phrase and the points a match earns. Given as `{"value": "cto",
/// "points": 30}`, or as a bare string (`"cto"`) that earns the default 10 points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ValuePoints {
    /// A word or phrase, matched case-insensitively on whole words; punctuation counts as a space
    /// (`vp sales` matches `VP, Sales`; `cto` does not match `director`). 1 to 100 characters.
    pub value: String,
    /// The points a match earns: 1 to 100.
    pub points: i64,
}

impl Serialize for ValuePoints {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ValuePoints::serialize(self, serializer)
    }
}

const VALUE_POINTS_SHAPE: &str = "a string or an object like {\"value\": ..., \"points\": ...}";

impl<'de> Deserialize<'de> for ValuePoints {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> serde::de::Visitor<'de> for Entry {
            type Value = ValuePoints;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(VALUE_POINTS_SHAPE)
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<ValuePoints, E> {
                Ok(ValuePoints {
                    value: value.to_owned(),
                    points: DEFAULT_POINTS,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ValuePoints, A::Error> {
                ValuePoints::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_any(Entry)
    }
}

impl JsonSchema for ValuePoints {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ValuePoints".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An entry: `{\"value\": \"cto\", \"points\": 30}`, or a bare string worth 10 points. Matches whole words, in any case.\n\nPunctuation counts as a space (`vp sales` matches `VP, Sales`; `cto` does not match `director`).",
            "anyOf": [
                {"type": "string", "maxLength": MAX_KEYWORD_CHARS, "pattern": KEYWORD_PATTERN},
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "value": {"description": "A word or phrase with a letter or a digit.", "type": "string", "maxLength": MAX_KEYWORD_CHARS, "pattern": KEYWORD_PATTERN},
                        "points": {"type": "integer", "minimum": 1, "maximum": 100}
                    },
                    "required": ["value", "points"]
                }
            ]
        })
    }
}

/// Employees, both ends included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
#[schemars(rename = "SizeRange", extend("not" = {"properties": {"min": {"type": "null"}, "max": {"type": "null"}}}))]
pub struct SizeRange {
    /// Omit for no lower bound.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub min: Option<i64>,
    /// Omit for no upper bound; `min` or `max` is required.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max: Option<i64>,
    #[schemars(range(min = 1, max = 100))]
    pub points: i64,
}

object_only!(
    SizeRange,
    "an object like {\"min\": ..., \"max\": ..., \"points\": ...}",
    serialize
);

/// Title criteria: entries that earn points, and keywords that cancel them. Also taken as a bare
/// list, which is `include`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct TitleCriteria {
    /// Title entries that earn points (e.g. `cto` 30, `vp engineering` 25).
    #[serde(default)]
    pub include: Vec<ValuePoints>,
    /// Title keywords that cancel the title points without disqualifying (e.g. `assistant`,
    /// `intern`: "Assistant to the CTO" earns nothing for `cto`). To disqualify, use the gate
    /// `excluded_title_keywords`.
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl Serialize for TitleCriteria {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        TitleCriteria::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for TitleCriteria {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Titles;
        impl<'de> serde::de::Visitor<'de> for Titles {
            type Value = TitleCriteria;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "an object like {\"include\": ..., \"exclude\": ...} or a list of strings or objects like {\"value\": ..., \"points\": ...}",
                )
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<TitleCriteria, A::Error> {
                Ok(TitleCriteria {
                    include: Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?,
                    exclude: Vec::new(),
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<TitleCriteria, A::Error> {
                TitleCriteria::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_any(Titles)
    }
}

// The object form of [`TitleCriteria`], for its schema.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TitleCriteriaObject {
    // Title entries that earn points (e.g. `cto` 30, `vp engineering` 25).
    #[serde(default)]
    #[schemars(length(max = 100))]
    include: Vec<ValuePoints>,
    /// Cancel the title points without disqualifying (`excluded_title_keywords` disqualifies).
    ///
    /// E.g. `assistant`, `intern`: "Assistant to the CTO" earns nothing for `cto`.
    #[serde(default)]
    #[schemars(length(max = 100), inner(length(max = MAX_KEYWORD_CHARS), regex(pattern = KEYWORD_PATTERN)))]
    exclude: Vec<String>,
}

impl JsonSchema for TitleCriteria {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TitleCriteria".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let object = TitleCriteriaObject::json_schema(generator);
        let mut list = Vec::<ValuePoints>::json_schema(generator);
        list.insert("maxItems".into(), MAX_ENTRIES.into());
        schemars::json_schema!({
            "description": "`{\"include\": [...], \"exclude\": [...]}`, or a bare list: the `include` entries.",
            "anyOf": [object, list]
        })
    }
}

/// The criteria that earn points. Within each group only the best match counts; the score is the
/// points earned over the points available (the sum of each group's best entry), 0 to 100. Every
/// group but `company_sizes` takes entries `{"value": ..., "points": ...}` or bare strings (10
/// points each).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
#[schemars(rename = "Criteria")]
pub struct Criteria {
    // Each group is matched against the prospect's field of the same name: `title`, `seniority`
    // (e.g. `vp`, `director`, `c-level`), `department`, `company_industry` (`software` matches
    // `Computer Software`), `company_size`.
    #[serde(default)]
    pub titles: TitleCriteria,
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub seniorities: Vec<ValuePoints>,
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub departments: Vec<ValuePoints>,
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub industries: Vec<ValuePoints>,
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub company_sizes: Vec<SizeRange>,
    /// Matches `location`, else `country`.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub locations: Vec<ValuePoints>,
    /// Matches `title`, `headline`, `company_name` and `company_industry`.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub keywords: Vec<ValuePoints>,
}

object_only!(
    Criteria,
    "an object like {\"titles\": ..., \"industries\": ..., \"keywords\": ...}",
    serialize
);

/// Any failed gate disqualifies (score 0, tier `disqualified`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
#[schemars(rename = "Gates")]
pub struct Gates {
    /// Whole words of `company_industry` (e.g. `gambling`).
    #[serde(default)]
    #[schemars(length(max = 100), inner(length(max = MAX_KEYWORD_CHARS), regex(pattern = KEYWORD_PATTERN)))]
    pub excluded_industries: Vec<String>,
    /// `acme.com` also covers `eu.acme.com`.
    ///
    /// E.g. customers, competitors. Stored normalised (lowercase, no scheme, no `www.`).
    #[serde(default)]
    #[schemars(length(max = 100), inner(regex(pattern = crate::common::DOMAIN)))]
    pub excluded_domains: Vec<String>,
    /// Whole words of `title` (e.g. `student`).
    #[serde(default)]
    #[schemars(length(max = 100), inner(length(max = MAX_KEYWORD_CHARS), regex(pattern = KEYWORD_PATTERN)))]
    pub excluded_title_keywords: Vec<String>,
}

object_only!(
    Gates,
    "an object like {\"excluded_industries\": ..., \"excluded_domains\": ..., \"excluded_title_keywords\": ...}",
    serialize
);

/// Tier thresholds: a score at or above `a` is tier `a`, at or above `b` tier `b`, at or above
/// `c` tier `c`, and below `c` tier `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tiers {
    pub a: i64,
    pub b: i64,
    pub c: i64,
}

impl Default for Tiers {
    fn default() -> Self {
        DEFAULT_TIERS
    }
}

/// Tier thresholds as given: each 0 to 100, `a` > `b` > `c`. A threshold left out keeps its
/// current value (defaults: `a` 80, `b` 60, `c` 40).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
#[schemars(rename = "TiersInput")]
pub struct TiersInput {
    #[schemars(range(min = 0, max = 100))]
    pub a: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub b: Option<i64>,
    #[schemars(range(min = 0, max = 100))]
    pub c: Option<i64>,
}

object_only!(
    TiersInput,
    "an object like {\"a\": ..., \"b\": ..., \"c\": ...}"
);

/// A targeting as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Targeting {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub criteria: Criteria,
    pub gates: Gates,
    pub tiers: Tiers,
    /// 1 when created, plus one for every change.
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

const COLUMNS: &str = "id, name, description, criteria, gates, tier_a, tier_b, tier_c, version, created_at, updated_at";

impl Targeting {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let criteria: String = row.try_get("criteria")?;
        let gates: String = row.try_get("gates")?;
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            criteria: stored_criteria(&criteria)?,
            gates: serde_json::from_str(&gates).map_err(ApiError::internal)?,
            tiers: Tiers {
                a: row.try_get("tier_a")?,
                b: row.try_get("tier_b")?,
                c: row.try_get("tier_c")?,
            },
            version: row.try_get("version")?,
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// Reads stored criteria. Targetings saved before every group took `{value, points}` spell the
/// entries of `titles.include`, `locations` and `keywords` `{keyword, points}`; they are read as
/// `{value, points}` (and written so at their next change).
pub(crate) fn stored_criteria(text: &str) -> Result<Criteria, ApiError> {
    let mut criteria: serde_json::Value = serde_json::from_str(text).map_err(ApiError::internal)?;
    for pointer in ["/titles/include", "/locations", "/keywords"] {
        let Some(serde_json::Value::Array(entries)) = criteria.pointer_mut(pointer) else {
            continue;
        };
        for entry in entries
            .iter_mut()
            .filter_map(serde_json::Value::as_object_mut)
        {
            if let Some(keyword) = entry.remove("keyword") {
                entry.entry("value").or_insert(keyword);
            }
        }
    }
    serde_json::from_value(criteria).map_err(ApiError::internal)
}

// ----- validation -----

fn bad(message: String) -> ApiError {
    ApiError::invalid_request(message)
}

fn name(value: &str) -> Result<String, ApiError> {
    let name = value.trim();
    if name.is_empty() {
        return Err(bad("`name` must not be empty.".into()));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(bad(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters."
        )));
    }
    Ok(name.to_owned())
}

fn description(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    let trimmed = value.trim();
    if trimmed.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(bad(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters."
        )));
    }
    Ok((!trimmed.is_empty()).then(|| trimmed.to_owned()))
}

fn points(field: &str, points: i64) -> Result<(), ApiError> {
    if !(1..=MAX_POINTS).contains(&points) {
        return Err(bad(format!(
            "`{field}` must be between 1 and {MAX_POINTS}; got {points}."
        )));
    }
    Ok(())
}

fn entries<T>(field: &str, list: &[T]) -> Result<(), ApiError> {
    if list.len() > MAX_ENTRIES {
        return Err(bad(format!(
            "`{field}` holds at most {MAX_ENTRIES} entries; got {}.",
            list.len()
        )));
    }
    Ok(())
}

/// Checks the keywords of one list: trimmed, not too long, at least one letter or digit, each
/// once (as the engine compares them: lowercase, punctuation as spaces).
fn keywords<'a>(
    field: &str,
    values: impl Iterator<Item = (String, &'a mut String)>,
) -> Result<(), ApiError> {
    let mut seen = BTreeSet::new();
    let mut words = String::new();
    for (path, value) in values {
        let trimmed = value.trim();
        if trimmed.chars().count() > MAX_KEYWORD_CHARS {
            return Err(bad(format!(
                "`{path}` is longer than {MAX_KEYWORD_CHARS} characters."
            )));
        }
        words_into(trimmed, &mut words);
        if words.trim().is_empty() {
            return Err(bad(format!(
                "`{path}` must contain a letter or a digit; got `{trimmed}`."
            )));
        }
        if !seen.insert(words.clone()) {
            return Err(bad(format!("`{field}` lists `{trimmed}` more than once.")));
        }
        *value = trimmed.to_owned();
    }
    Ok(())
}

fn value_points(field: &str, list: &mut [ValuePoints]) -> Result<(), ApiError> {
    entries(field, list)?;
    for (index, entry) in list.iter().enumerate() {
        points(&format!("{field}[{index}].points"), entry.points)?;
    }
    keywords(
        field,
        list.iter_mut()
            .enumerate()
            .map(|(index, entry)| (format!("{field}[{index}].value"), &mut entry.value)),
    )
}

fn plain_keywords(field: &str, list: &mut [String]) -> Result<(), ApiError> {
    entries(field, list)?;
    keywords(
        field,
        list.iter_mut()
            .enumerate()
            .map(|(index, value)| (format!("{field}[{index}]"), value)),
    )
}

fn size_ranges(list: &[SizeRange]) -> Result<(), ApiError> {
    entries("criteria.company_sizes", list)?;
    for (index, range) in list.iter().enumerate() {
        let field = format!("criteria.company_sizes[{index}]");
        points(&format!("{field}.points"), range.points)?;
        for (end, value) in [("min", range.min), ("max", range.max)] {
            if let Some(value) = value.filter(|value| *value < 0) {
                return Err(bad(format!(
                    "`{field}.{end}` must not be negative; got {value}."
                )));
            }
        }
        match (range.min, range.max) {
            (None, None) => return Err(bad(format!("`{field}` needs `min`, `max` or both."))),
            (Some(min), Some(max)) if min > max => {
                return Err(bad(format!(
                    "`{field}`: `min` ({min}) must not be greater than `max` ({max})."
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Validates criteria in place (keywords trimmed); at least one criterion must earn points.
fn criteria(mut criteria: Criteria) -> Result<Criteria, ApiError> {
    value_points("criteria.titles.include", &mut criteria.titles.include)?;
    plain_keywords("criteria.titles.exclude", &mut criteria.titles.exclude)?;
    value_points("criteria.seniorities", &mut criteria.seniorities)?;
    value_points("criteria.departments", &mut criteria.departments)?;
    value_points("criteria.industries", &mut criteria.industries)?;
    size_ranges(&criteria.company_sizes)?;
    value_points("criteria.locations", &mut criteria.locations)?;
    value_points("criteria.keywords", &mut criteria.keywords)?;
    let scored = !criteria.titles.include.is_empty()
        || !criteria.seniorities.is_empty()
        || !criteria.departments.is_empty()
        || !criteria.industries.is_empty()
        || !criteria.company_sizes.is_empty()
        || !criteria.locations.is_empty()
        || !criteria.keywords.is_empty();
    if !scored {
        return Err(bad(
            "`criteria` needs at least one entry that earns points (in `titles.include`, `seniorities`, `departments`, \
             `industries`, `company_sizes`, `locations` or `keywords`)."
                .into(),
        ));
    }
    Ok(criteria)
}

fn gates(mut gates: Gates) -> Result<Gates, ApiError> {
    plain_keywords("gates.excluded_industries", &mut gates.excluded_industries)?;
    plain_keywords(
        "gates.excluded_title_keywords",
        &mut gates.excluded_title_keywords,
    )?;
    entries("gates.excluded_domains", &gates.excluded_domains)?;
    let mut seen = BTreeSet::new();
    for (index, value) in gates.excluded_domains.iter_mut().enumerate() {
        let normalised = normalize::domain(&format!("gates.excluded_domains[{index}]"), value)?;
        if !seen.insert(normalised.clone()) {
            return Err(bad(format!(
                "`gates.excluded_domains` lists `{normalised}` more than once."
            )));
        }
        *value = normalised;
    }
    Ok(gates)
}

fn tiers(input: TiersInput, current: Tiers) -> Result<Tiers, ApiError> {
    let tiers = Tiers {
        a: input.a.unwrap_or(current.a),
        b: input.b.unwrap_or(current.b),
        c: input.c.unwrap_or(current.c),
    };
    for (field, value) in [("a", tiers.a), ("b", tiers.b), ("c", tiers.c)] {
        if !(0..=100).contains(&value) {
            return Err(bad(format!(
                "`tiers.{field}` must be between 0 and 100; got {value}."
            )));
        }
    }
    if !(tiers.a > tiers.b && tiers.b > tiers.c) {
        return Err(bad(format!(
            "`tiers` must descend: `a` > `b` > `c`; got a = {}, b = {}, c = {}.",
            tiers.a, tiers.b, tiers.c
        )));
    }
    Ok(tiers)
}

// ----- storage -----

// SQL built with format! here interpolates only constants; values are bound.

/// Reads one targeting of the caller's workspace, or 404.
pub(crate) async fn fetch<'c, E>(
    executor: E,
    workspace_id: &str,
    id: &str,
) -> Result<Targeting, ApiError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    IdKind::Targeting.check(id)?;
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {COLUMNS} from targetings where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| IdKind::Targeting.not_found(id))?;
    Targeting::from_row(&row)
}

/// Maps a unique violation on the name to a 409 naming the targeting that has it.
async fn name_conflict(ctx: &Ctx, error: sqlx::Error, name: &str) -> ApiError {
    if !is_unique_violation(&error, "targetings_name_key") {
        return error.into();
    }
    let existing = sqlx::query("select id from targetings where workspace_id = $1 and name = $2")
        .bind(ctx.workspace_id())
        .bind(name)
        .fetch_optional(ctx.db().pool())
        .await;
    match existing {
        Ok(Some(row)) => {
            let existing_id: String = row.try_get("id").unwrap_or_default();
            ApiError::conflict(format!(
                "A targeting named `{name}` already exists: `{existing_id}`."
            ))
            .with_extra("existing_id", existing_id)
        }
        Ok(None) => ApiError::conflict(format!("A targeting named `{name}` already exists.")),
        Err(error) => error.into(),
    }
}

// ----- actions -----

/// The input of `create_targeting`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateTargetingInput {
    #[schemars(length(min = 1, max = 100), regex(pattern = crate::common::NOT_BLANK))]
    pub name: String,
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    /// At least one entry in all.
    pub criteria: Criteria,
    #[serde(default)]
    pub gates: Gates,
    /// The lowest score of each tier, `a` > `b` > `c` (default 80, 60, 40); below `c` is `d`.
    #[serde(default)]
    pub tiers: TiersInput,
}

/// Create a targeting (an ideal-customer profile).
///
/// Each criterion group earns the points of its best matching entry; the score (0 to 100) is the
/// points earned over the points available. A name another targeting has is a 409 `conflict`
/// whose `existing_id` names it.
///
/// The score is rounded half up. Gates disqualify. Tiers `a`, `b`, `c` start at their thresholds;
/// lower scores are `d`. Starts at version 1.
#[action(scope = "write", idempotent, http = "POST /targetings")]
pub async fn create_targeting(
    ctx: Ctx,
    input: CreateTargetingInput,
) -> Result<Targeting, ApiError> {
    let name = name(&input.name)?;
    let description = description(input.description)?;
    let criteria = criteria(input.criteria)?;
    let gates = gates(input.gates)?;
    let tiers = tiers(input.tiers, DEFAULT_TIERS)?;
    let id = ids::new_id("tgt");
    let inserted = sqlx::query(
        "insert into targetings (id, workspace_id, name, description, criteria, gates, tier_a, tier_b, tier_c, version, \
         created_at, updated_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $10)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&name)
    .bind(&description)
    .bind(json_text(&criteria)?)
    .bind(json_text(&gates)?)
    .bind(tiers.a)
    .bind(tiers.b)
    .bind(tiers.c)
    .bind(ctx.now_ms())
    .execute(ctx.db().writes())
    .await;
    if let Err(error) = inserted {
        return Err(name_conflict(&ctx, error, &name).await);
    }
    fetch(ctx.db().pool(), ctx.workspace_id(), &id).await
}

outreach_runtime::prelude::example!(create_targeting,
    request: {
        "criteria": {
            "company_sizes": [{"max": 500, "min": 50, "points": 20}],
            "industries": [{"points": 30, "value": "software"}],
            "locations": [{"value": "germany", "points": 10}],
            "titles": {
                "include": [{"value": "head of sales", "points": 40}, {"value": "vp sales", "points": 40}]
            }
        },
        "description": "Our core buyers.",
        "name": "Old profile"
    },
    response: {
        "created_at": "2026-11-23T18:22:30.039Z",
        "criteria": {
            "company_sizes": [{"max": 500, "min": 50, "points": 20}],
            "departments": [],
            "industries": [{"points": 30, "value": "software"}],
            "keywords": [],
            "locations": [{"value": "germany", "points": 10}],
            "seniorities": [],
            "titles": {
                "exclude": [],
                "include": [{"value": "head of sales", "points": 40}, {"value": "vp sales", "points": 40}]
            }
        },
        "description": "Our core buyers.",
        "gates": {"excluded_domains": [], "excluded_industries": [], "excluded_title_keywords": []},
        "id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "name": "Heads of sales at software companies",
        "tiers": {"a": 80, "b": 60, "c": 40},
        "updated_at": "2026-11-23T18:22:30.039Z",
        "version": 1
    }
);

outreach_runtime::prelude::parity!(create_targeting, write,
    ok: {
        "criteria": {
            "seniorities": [{"points": 40, "value": "senior"}],
            "titles": {"exclude": ["intern"], "include": [{"points": 60, "value": "engineer"}]}
        },
        "description": "made twice",
        "name": "Second ICP ${tag}",
        "tiers": {"a": 90, "b": 70, "c": 50}
    },
    fails: {"name": "No criteria"} => INVALID_REQUEST
);

/// The input of `get_targeting` and `delete_targeting`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TargetingId {
    /// `tgt_...`
    pub id: String,
}

/// Get a targeting by id.
#[action(scope = "read", http = "GET /targetings/{id}")]
pub async fn get_targeting(ctx: Ctx, input: TargetingId) -> Result<Targeting, ApiError> {
    fetch(ctx.db().pool(), ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_targeting,
    request: {"id": "tgt_vGZf5Xhp2UaJ5CH2dq84"},
    response: {
        "created_at": "2026-11-23T18:22:30.039Z",
        "criteria": {
            "company_sizes": [{"max": 500, "min": 50, "points": 20}],
            "departments": [],
            "industries": [{"points": 30, "value": "software"}],
            "keywords": [],
            "locations": [{"value": "germany", "points": 10}],
            "seniorities": [],
            "titles": {
                "exclude": [],
                "include": [{"value": "head of sales", "points": 40}, {"value": "vp sales", "points": 40}]
            }
        },
        "description": "Our core buyers.",
        "gates": {"excluded_domains": [], "excluded_industries": [], "excluded_title_keywords": []},
        "id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "name": "Heads of sales at software companies",
        "tiers": {"a": 80, "b": 60, "c": 40},
        "updated_at": "2026-11-23T18:22:30.039Z",
        "version": 1
    }
);

outreach_runtime::prelude::parity!(get_targeting, read,
    ok: {"id": "$targeting"},
    fails: {"id": "$missing:tgt"} => NOT_FOUND
);

/// The input of `list_targetings`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTargetingsInput {
    #[serde(flatten)]
    pub page: PageParams,
}

/// List targetings, newest first.
#[action(scope = "read", http = "GET /targetings")]
pub async fn list_targetings(
    ctx: Ctx,
    input: ListTargetingsInput,
) -> Result<Page<Targeting>, ApiError> {
    paged(
        ctx.db().pool(),
        input.page,
        "select count(*) from targetings where workspace_id = $1".to_owned(),
        format!(
            "select {COLUMNS} from targetings where workspace_id = $1 order by created_at desc, id desc limit $2 offset $3"
        ),
        |query| query.bind(ctx.workspace_id()),
        Targeting::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_targetings,
    request: {"limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "created_at": "2026-11-23T18:22:30.039Z",
                "criteria": {
                    "company_sizes": [{"max": 500, "min": 50, "points": 20}],
                    "departments": [],
                    "industries": [{"points": 30, "value": "software"}],
                    "keywords": [],
                    "locations": [{"value": "germany", "points": 10}],
                    "seniorities": [],
                    "titles": {
                        "exclude": [],
                        "include": [
                            {"value": "head of sales", "points": 40},
                            {"value": "vp sales", "points": 40}
                        ]
                    }
                },
                "description": "Our core buyers in software.",
                "gates": {
                    "excluded_domains": [],
                    "excluded_industries": [],
                    "excluded_title_keywords": []
                },
                "id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
                "name": "Heads of sales at software companies",
                "tiers": {"a": 80, "b": 60, "c": 40},
                "updated_at": "2026-11-23T18:22:30.087Z",
                "version": 2
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_targetings, read,
    ok: {"limit": 10},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// The input of `update_targeting`: only the fields given change.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateTargetingInput {
    /// `tgt_...`
    pub id: String,
    #[schemars(length(min = 1, max = 100), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
    /// `null` clears it.
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub description: Option<Option<String>>,
    /// Replaces all the criteria.
    pub criteria: Option<Criteria>,
    /// Replaces all the gates.
    pub gates: Option<Gates>,
    /// Changes the thresholds given (`a` > `b` > `c`); the others keep their values.
    pub tiers: Option<TiersInput>,
}

/// Update a targeting.
///
/// Only the fields given change; `criteria` and `gates` replace the whole group. A name another
/// targeting has is a 409 `conflict`; so is a change made by another request at once (retry).
///
/// `tiers` changes the thresholds given. Every change bumps `version` by one (an update that
/// changes nothing keeps it); scores already given keep the version that produced them.
#[action(scope = "write", idempotent, http = "PATCH /targetings/{id}")]
pub async fn update_targeting(
    ctx: Ctx,
    input: UpdateTargetingInput,
) -> Result<Targeting, ApiError> {
    let current = fetch(ctx.db().pool(), ctx.workspace_id(), &input.id).await?;
    let mut next = current.clone();
    if let Some(value) = &input.name {
        next.name = name(value)?;
    }
    if let Some(value) = input.description {
        next.description = description(value)?;
    }
    if let Some(value) = input.criteria {
        next.criteria = criteria(value)?;
    }
    if let Some(value) = input.gates {
        next.gates = gates(value)?;
    }
    if let Some(value) = input.tiers {
        next.tiers = tiers(value, current.tiers)?;
    }
    let unchanged = next.name == current.name
        && next.description == current.description
        && next.criteria == current.criteria
        && next.gates == current.gates
        && next.tiers == current.tiers;
    if unchanged {
        return Ok(current);
    }
    // The version read is the version replaced: a concurrent change makes this match nothing,
    // so no change is lost silently.
    let updated = sqlx::query(
        "update targetings set name = $4, description = $5, criteria = $6, gates = $7, tier_a = $8, tier_b = $9, \
         tier_c = $10, version = version + 1, updated_at = $11 where workspace_id = $1 and id = $2 and version = $3",
    )
    .bind(ctx.workspace_id())
    .bind(&current.id)
    .bind(current.version)
    .bind(&next.name)
    .bind(&next.description)
    .bind(json_text(&next.criteria)?)
    .bind(json_text(&next.gates)?)
    .bind(next.tiers.a)
    .bind(next.tiers.b)
    .bind(next.tiers.c)
    .bind(ctx.now_ms())
    .execute(ctx.db().writes())
    .await;
    match updated {
        Ok(result) if result.rows_affected() == 1 => {
            fetch(ctx.db().pool(), ctx.workspace_id(), &current.id).await
        }
        Ok(_) => {
            let now = fetch(ctx.db().pool(), ctx.workspace_id(), &current.id).await?;
            Err(ApiError::conflict(format!(
                "The targeting `{}` was changed by another request (version {} is now {}); nothing was changed. Read it again and retry.",
                current.id, current.version, now.version
            )))
        }
        Err(error) => Err(name_conflict(&ctx, error, &next.name).await),
    }
}

outreach_runtime::prelude::example!(update_targeting,
    request: {"description": "Our core buyers in software.", "id": "tgt_vGZf5Xhp2UaJ5CH2dq84"},
    response: {
        "created_at": "2026-11-23T18:22:30.039Z",
        "criteria": {
            "company_sizes": [{"max": 500, "min": 50, "points": 20}],
            "departments": [],
            "industries": [{"points": 30, "value": "software"}],
            "keywords": [],
            "locations": [{"value": "germany", "points": 10}],
            "seniorities": [],
            "titles": {
                "exclude": [],
                "include": [{"value": "head of sales", "points": 40}, {"value": "vp sales", "points": 40}]
            }
        },
        "description": "Our core buyers in software.",
        "gates": {"excluded_domains": [], "excluded_industries": [], "excluded_title_keywords": []},
        "id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "name": "Heads of sales at software companies",
        "tiers": {"a": 80, "b": 60, "c": 40},
        "updated_at": "2026-11-23T18:22:30.087Z",
        "version": 2
    }
);

outreach_runtime::prelude::parity!(update_targeting, write,
    ok: {
        "description": "sharper",
        "gates": {"excluded_domains": ["rival.test"]},
        "id": "$targeting"
    },
    fails: {
        "description": "nothing",
        "id": "$missing:tgt"
    } => NOT_FOUND
);

/// Delete a targeting.
///
/// Lists that used it as their default lose it; scores made with it keep its id and version.
///
/// Removed for good. Scoring runs and prospects scored with it keep its id and version as a
/// record.
#[action(scope = "write", idempotent, http = "DELETE /targetings/{id}")]
pub async fn delete_targeting(ctx: Ctx, input: TargetingId) -> Result<Deleted, ApiError> {
    let targeting = fetch(ctx.db().pool(), ctx.workspace_id(), &input.id).await?;
    let mut tx = ctx.tx().await?;
    let result = sqlx::query("delete from targetings where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&targeting.id)
        .execute(&mut *tx)
        .await?;
    if result.rows_affected() == 0 {
        return Err(IdKind::Targeting.not_found(&targeting.id));
    }
    // The lists that default to it forget it: the database's own rule (a foreign key `on delete
    // set null` on PostgreSQL, a trigger on SQLite; migration `lists_forget_a_deleted_targeting`).
    Ok(Deleted {
        id: targeting.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_targeting,
    request: {"id": "tgt_Cc9aCctvdSuygq8FJQrJ"},
    response: {"deleted": true, "id": "tgt_Cc9aCctvdSuygq8FJQrJ"}
);

outreach_runtime::prelude::parity!(delete_targeting, write,
    ok: {"id": "$targeting"},
    fails: {"id": "$missing:tgt"} => NOT_FOUND
);
