//! Reading an import's rows, from CSV text or JSON objects, into validated prospect fields.
//!
//! Problems with the file as a whole (bad quoting, ragged rows, an unknown mapping column, a JSON
//! row of the wrong shape, too many rows) refuse the whole import with a 4xx that names the row:
//! nothing is written and nothing is charged, so the caller fixes the file and sends it again.
//! Problems with one row's values (no name, URL or email; a malformed email or URL) only make that
//! row invalid: it is counted and reported, and the rest of the file is imported.
//!
//! Rows are numbered from 1 for the first data row (the CSV header is not counted, nor are blank
//! lines); for JSON, row 1 is `rows[0]`.
//!
//! An import reads its rows twice, one at a time ([`Rows`]): first to count them and keep only
//! what deduplication needs ([`summarize`], which the price function runs), then to write them in
//! batches. A 100,000-row file is never held as 100,000 rows of prospect fields (some 450 bytes
//! each before their strings), only as its text and its keys.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use outreach_runtime::prelude::{ApiError, ErrorCode};
use serde_json::Value;

use super::{ImportRow, RowError};
use crate::prospects::Fields;
use crate::prospects::normalize::{self, MAX_CUSTOM_FIELDS, MAX_TAGS};

/// The most rows one import takes.
pub const MAX_ROWS: usize = 100_000;

/// The most columns a CSV may have (and `mapping` may name): the prospect fields, 50 custom
/// fields, and room for the columns an export carries that are mapped away.
pub const MAX_COLUMNS: usize = 1000;

/// How many invalid rows an outcome describes.
pub const MAX_REPORTED_ERRORS: usize = 100;

/// One valid row, normalised.
#[derive(Debug)]
pub struct Row {
    pub fields: Fields,
    /// Whether the row said anything about `do_not_contact` (an update changes it only then).
    pub do_not_contact_given: bool,
}

/// What deduplication matches a valid row by.
#[derive(Debug, Default)]
pub struct Keys {
    pub profile_url: Option<String>,
    pub email: Option<String>,
}

/// A whole import, read and validated once, with only the keys of its valid rows kept.
#[derive(Debug, Default)]
pub struct Summary {
    /// Data rows read, valid or not.
    pub rows: u64,
    /// The keys of the valid rows, in file order.
    pub keys: Vec<Keys>,
    pub invalid: u64,
    /// The first [`MAX_REPORTED_ERRORS`] invalid rows.
    pub errors: Vec<RowError>,
    /// What the caller should know about the file as a whole (columns not mapped to a field).
    pub warnings: Vec<String>,
}

/// Reads every row of `rows`, keeping the keys of the valid ones and the first errors.
pub fn summarize(mut rows: Rows<'_>) -> Result<Summary, ApiError> {
    let mut summary = Summary {
        keys: Vec::with_capacity(rows.size_hint()),
        ..Summary::default()
    };
    while let Some(row) = rows.next_row()? {
        summary.rows += 1;
        match row {
            Ok(row) => summary.keys.push(Keys {
                profile_url: row.fields.profile_url,
                email: row.fields.email,
            }),
            Err(error) => {
                summary.invalid += 1;
                if summary.errors.len() < MAX_REPORTED_ERRORS {
                    summary.errors.push(error);
                }
            }
        }
    }
    summary.warnings = rows.warnings;
    Ok(summary)
}

/// An import's rows, read one at a time from its CSV text or its JSON objects.
pub struct Rows<'a> {
    source: Source<'a>,
    /// What the caller should know about the file as a whole.
    pub warnings: Vec<String>,
    /// Data rows read so far.
    read: u64,
}

enum Source<'a> {
    Csv {
        reader: csv::Reader<std::io::Cursor<Cow<'a, [u8]>>>,
        targets: Vec<Target>,
        record: csv::StringRecord,
        /// How many lines the text has: more than its rows, never fewer.
        lines: usize,
    },
    Json {
        values: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
        count: usize,
    },
}

impl Rows<'_> {
    /// The next row, valid or with the reason it is not (which names its number); `None` after
    /// the last. A problem with the file as a whole (see the module header) is an error.
    pub fn next_row(&mut self) -> Result<Option<Result<Row, RowError>>, ApiError> {
        let row = match &mut self.source {
            Source::Csv {
                reader,
                targets,
                record,
                ..
            } => {
                if !reader
                    .read_record(record)
                    .map_err(|error| csv_error(&error))?
                {
                    if self.read == 0 {
                        return Err(ApiError::invalid_request(
                            "The CSV has a header row but no data rows.",
                        ));
                    }
                    return Ok(None);
                }
                if self.read as usize >= MAX_ROWS {
                    return Err(too_many_rows());
                }
                csv_row(self.read + 1, record, targets)
            }
            Source::Json { values, .. } => {
                let Some((index, value)) = values.next() else {
                    return Ok(None);
                };
                match oversized(index, value) {
                    Some(error) => Err(error),
                    None => Ok(json_row(index, value)?),
                }
            }
        };
        self.read += 1;
        let number = self.read;
        Ok(Some(row.and_then(|row| validate(number, row))))
    }

    /// About how many rows there are (an upper bound for CSV: its lines).
    fn size_hint(&self) -> usize {
        match &self.source {
            Source::Csv { lines, .. } => (*lines).min(MAX_ROWS),
            Source::Json { count, .. } => *count,
        }
    }
}

fn too_many_rows() -> ApiError {
    ApiError::new(
        ErrorCode::PAYLOAD_TOO_LARGE,
        format!(
            "The import has more than {MAX_ROWS} rows; split it into imports of at most {MAX_ROWS} rows each."
        ),
    )
}

// ----- JSON rows -----

/// Opens JSON rows; a row of the wrong shape refuses the import, naming the row and the field.
pub fn json_rows(rows: &[Value]) -> Result<Rows<'_>, ApiError> {
    if rows.is_empty() {
        return Err(ApiError::invalid_request(
            "`rows` is empty; send at least one row.",
        ));
    }
    if rows.len() > MAX_ROWS {
        return Err(too_many_rows());
    }
    Ok(Rows {
        source: Source::Json {
            values: rows.iter().enumerate(),
            count: rows.len(),
        },
        warnings: Vec::new(),
        read: 0,
    })
}

/// A row with more `tags` or `custom_fields` than a prospect holds is reported by their count,
/// before they are decoded: a 1 MB row of either would otherwise take most of a second to be
/// found too big.
fn oversized(index: usize, value: &Value) -> Option<RowError> {
    let number = index as u64 + 1;
    if let Some(tags) = value.get("tags").and_then(Value::as_array)
        && tags.len() > MAX_TAGS
    {
        return Some(too_many_tags(number, tags.len()));
    }
    let keys = value.get("custom_fields")?.as_object()?.len();
    (keys > MAX_CUSTOM_FIELDS).then(|| RowError {
        row: number,
        field: Some("custom_fields".to_owned()),
        message: format!("`custom_fields` holds at most {MAX_CUSTOM_FIELDS} keys; got {keys}."),
    })
}

fn too_many_tags(row: u64, count: usize) -> RowError {
    RowError {
        row,
        field: Some("tags".to_owned()),
        message: format!("`tags` holds {count} entries; a prospect holds at most {MAX_TAGS}."),
    }
}

/// Decodes `rows[index]`.
fn json_row(index: usize, value: &Value) -> Result<ImportRow, ApiError> {
    let number = index as u64 + 1;
    let where_ = format!("`rows[{index}]` (row {number})");
    if !value.is_object() {
        return Err(ApiError::invalid_request(format!(
            "{where_} must be an object of prospect fields, got {}.",
            kind(value)
        )));
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            ApiError::invalid_request(format!("{where_}: {inner}."))
        } else {
            ApiError::invalid_request(format!("{where_}, field `{path}`: {inner}."))
        }
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// ----- CSV -----

/// A prospect field a CSV column can fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Field {
    FirstName,
    LastName,
    /// Split into first and last name when those are not given.
    FullName,
    Headline,
    Title,
    Seniority,
    Department,
    CompanyName,
    CompanyDomain,
    CompanyIndustry,
    CompanySize,
    Location,
    Country,
    Timezone,
    ProfileUrl,
    Email,
    Phone,
    Tags,
    DoNotContact,
    /// Exports' `City` and `State`: joined into `location` when there is no location column.
    /// Not a mapping target (map such a column to `location`).
    City,
    State,
}

impl Field {
    const ALL: [Field; 19] = [
        Field::FirstName,
        Field::LastName,
        Field::FullName,
        Field::Headline,
        Field::Title,
        Field::Seniority,
        Field::Department,
        Field::CompanyName,
        Field::CompanyDomain,
        Field::CompanyIndustry,
        Field::CompanySize,
        Field::Location,
        Field::Country,
        Field::Timezone,
        Field::ProfileUrl,
        Field::Email,
        Field::Phone,
        Field::Tags,
        Field::DoNotContact,
    ];

    fn name(self) -> &'static str {
        match self {
            Field::FirstName => "first_name",
            Field::LastName => "last_name",
            Field::FullName => "full_name",
            Field::Headline => "headline",
            Field::Title => "title",
            Field::Seniority => "seniority",
            Field::Department => "department",
            Field::CompanyName => "company_name",
            Field::CompanyDomain => "company_domain",
            Field::CompanyIndustry => "company_industry",
            Field::CompanySize => "company_size",
            Field::Location => "location",
            Field::Country => "country",
            Field::Timezone => "timezone",
            Field::ProfileUrl => "profile_url",
            Field::Email => "email",
            Field::Phone => "phone",
            Field::Tags => "tags",
            Field::DoNotContact => "do_not_contact",
            Field::City | Field::State => "location",
        }
    }

    /// The field a header names by convention, compared without case, spaces or punctuation,
    /// with its rank: when several columns name one field, the lowest rank fills it (Apollo's
    /// `First Phone` before its `Mobile Phone`, a public profile URL before a Sales Navigator one)
    /// and the others are kept in `custom_fields` with a warning. The names cover the exports of
    /// Apollo, Sales Navigator, HeyReach, lemlist and LinkedIn's connections export.
    fn from_header(header: &str) -> Option<(Field, u8)> {
        Some(match squash(header).as_str() {
            "firstname" | "first" | "givenname" | "forename" => (Field::FirstName, 0),
            "lastname" | "last" | "surname" | "familyname" => (Field::LastName, 0),
            "fullname" | "name" | "contactname" | "personname" | "leadname" => (Field::FullName, 0),
            "headline" | "linkedinheadline" => (Field::Headline, 0),
            "title" | "jobtitle" | "position" | "role" | "currenttitle" | "currentposition" => {
                (Field::Title, 0)
            }
            "seniority" | "senioritylevel" => (Field::Seniority, 0),
            "department" | "function" | "departments" => (Field::Department, 0),
            "company" | "companyname" | "organization" | "organisation" | "organizationname"
            | "employer" | "account" | "accountname" | "currentcompany" => (Field::CompanyName, 0),
            "companynameforemails" => (Field::CompanyName, 1),
            "companydomain" | "domain" | "website" | "companywebsite" | "companyurl"
            | "companywebsiteurl" => (Field::CompanyDomain, 0),
            "industry" | "companyindustry" => (Field::CompanyIndustry, 0),
            "companysize"
            | "employees"
            | "employeecount"
            | "numberofemployees"
            | "headcount"
            | "companyheadcount"
            | "companyemployeecount" => (Field::CompanySize, 0),
            "location" | "geography" | "personlocation" => (Field::Location, 0),
            "city" | "personcity" => (Field::City, 0),
            "state" | "region" | "province" | "personstate" => (Field::State, 0),
            "country" | "personcountry" => (Field::Country, 0),
            "timezone" | "tz" => (Field::Timezone, 0),
            "linkedinurl" | "linkedin" | "linkedinprofile" | "linkedinprofileurl"
            | "profileurl" | "profile" | "personlinkedinurl" | "url" | "publicprofileurl"
            | "linkedinpublicurl" => (Field::ProfileUrl, 0),
            "salesnavigatorurl"
            | "salesnavigatorprofileurl"
            | "salesnavurl"
            | "linkedinsalesnavigatorurl" => (Field::ProfileUrl, 1),
            "email" | "emailaddress" | "workemail" | "mail" | "businessemail" => (Field::Email, 0),
            "customemailaddress" | "enrichedemailaddress" | "personalemail" => (Field::Email, 1),
            "phone" | "phonenumber" | "mobile" | "telephone" | "firstphone" => (Field::Phone, 0),
            "workdirectphone" | "directphone" | "mobilephone" => (Field::Phone, 1),
            "corporatephone" | "homephone" | "otherphone" => (Field::Phone, 2),
            "tags" => (Field::Tags, 0),
            "donotcontact" => (Field::DoNotContact, 0),
            _ => return None,
        })
    }
}

/// Lowercase letters and digits only: `"First Name"`, `"first_name"` and `"FirstName"` agree.
fn squash(header: &str) -> String {
    header
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Where a CSV column goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    Field(Field),
    Custom(String),
    Ignore,
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Field(field) => format!("`{}`", field.name()),
            Target::Custom(key) => format!("the custom field `{key}`"),
            Target::Ignore => "nothing".to_owned(),
        }
    }

    /// A mapping's target: a field name, `custom_fields.<key>`, or null to ignore the column.
    fn parse(column: &str, target: Option<&str>) -> Result<Target, ApiError> {
        let Some(target) = target.map(str::trim) else {
            return Ok(Target::Ignore);
        };
        if let Some(key) = target.strip_prefix("custom_fields.") {
            let key = key.trim();
            if key.is_empty() {
                return Err(ApiError::invalid_request(format!(
                    "`mapping` maps `{column}` to `{target}`; name the custom field after the dot, e.g. `custom_fields.source`."
                )));
            }
            return Ok(Target::Custom(key.to_owned()));
        }
        Field::ALL.iter().copied().find(|field| field.name() == target).map(Target::Field).ok_or_else(|| {
            let names: Vec<String> = Field::ALL.iter().map(|field| format!("`{}`", field.name())).collect();
            ApiError::invalid_request(format!(
                "`mapping` maps `{column}` to `{target}`, which is not a prospect field; use one of {}, \
                 `custom_fields.<name>`, or null to ignore the column.",
                names.join(", ")
            ))
        })
    }
}

/// Works out where each column goes: the explicit mapping first, then the usual header names, and
/// anything else into `custom_fields` under its header, with a warning for each column that was
/// not mapped to a prospect field (unless the mapping asked for it).
fn plan_columns(
    headers: &[String],
    mapping: Option<&BTreeMap<String, Option<String>>>,
) -> Result<(Vec<Target>, Vec<String>), ApiError> {
    let mut targets: Vec<Option<Target>> = vec![None; headers.len()];
    for (column, target) in mapping.into_iter().flatten() {
        let index = find_column(headers, column)?;
        targets[index] = Some(Target::parse(column, target.as_deref())?);
    }
    let mapped = targets.clone();
    // Recognised headers: the best-ranked column of each field fills it (an explicitly mapped one
    // always does); two columns with the same header name are ambiguous, and refused below.
    let recognised: Vec<Option<(Field, u8)>> = headers
        .iter()
        .zip(&mapped)
        .map(|(header, mapped)| {
            mapped
                .is_none()
                .then(|| Field::from_header(header))
                .flatten()
        })
        .collect();
    let has_location = targets.contains(&Some(Target::Field(Field::Location)))
        || recognised
            .iter()
            .any(|found| matches!(found, Some((Field::Location, _))));
    let mut warnings = Vec::new();
    let targets: Vec<Target> = targets
        .into_iter()
        .enumerate()
        .map(|(index, target)| {
            let header = &headers[index];
            if let Some(target) = target {
                return target;
            }
            if header.is_empty() {
                // Spreadsheets often add unnamed, empty columns at the end.
                return Target::Ignore;
            }
            let Some((field, rank)) = recognised[index] else {
                warnings.push(format!(
                    "Column `{header}` is not a prospect field; it was kept in `custom_fields.{header}`."
                ));
                return Target::Custom(header.clone());
            };
            if matches!(field, Field::City | Field::State) && has_location {
                warnings.push(format!(
                    "Column `{header}` was not joined into `location`, which the location column fills; it was kept in `custom_fields.{header}`."
                ));
                return Target::Custom(header.clone());
            }
            let better = (0..headers.len()).find(|&other| {
                other != index
                    && squash(&headers[other]) != squash(header)
                    && (mapped[other] == Some(Target::Field(field))
                        || matches!(recognised[other], Some((f, r))
                            if f == field && (r < rank || (r == rank && other < index))))
            });
            match better {
                Some(other) => {
                    warnings.push(format!(
                        "Column `{header}` also looks like `{}`, which `{}` fills; it was kept in `custom_fields.{header}`.",
                        field.name(),
                        headers[other]
                    ));
                    Target::Custom(header.clone())
                }
                None => Target::Field(field),
            }
        })
        .collect();
    // City and State share `location`; they are joined, not competing.
    let mut seen: HashMap<&Target, &str> = HashMap::new();
    for (target, header) in targets.iter().zip(headers) {
        if matches!(
            target,
            Target::Ignore | Target::Field(Field::City | Field::State)
        ) {
            continue;
        }
        if let Some(first) = seen.insert(target, header) {
            return Err(ApiError::invalid_request(format!(
                "The columns `{first}` and `{header}` both go to {}; map one of them elsewhere, or to null to ignore it, with `mapping`.",
                target.describe()
            )));
        }
    }
    let custom = targets
        .iter()
        .filter(|target| matches!(target, Target::Custom(_)))
        .count();
    if custom > MAX_CUSTOM_FIELDS {
        return Err(ApiError::invalid_request(format!(
            "The CSV has {custom} columns that are not prospect fields, and a prospect holds at most {MAX_CUSTOM_FIELDS} \
             custom fields; map the extra columns to null with `mapping` to leave them out."
        )));
    }
    let identifies = targets.iter().any(|target| {
        matches!(
            target,
            Target::Field(
                Field::FirstName
                    | Field::LastName
                    | Field::FullName
                    | Field::ProfileUrl
                    | Field::Email
            )
        )
    });
    if !identifies {
        return Err(ApiError::invalid_request(format!(
            "No column of the CSV holds a name, a profile URL or an email, so no row could make a prospect; \
             the columns are {}. Name the right ones with `mapping`, e.g. {{\"Full Name\": \"full_name\"}}.",
            list(headers)
        )));
    }
    Ok((targets, warnings))
}

fn list(headers: &[String]) -> String {
    headers
        .iter()
        .map(|header| format!("`{header}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The column a mapping key names: the same text, or else the same squashed text.
fn find_column(headers: &[String], column: &str) -> Result<usize, ApiError> {
    let wanted = column.trim();
    if let Some(index) = headers.iter().position(|header| header == wanted) {
        return Ok(index);
    }
    let squashed = squash(wanted);
    let matches: Vec<usize> = (0..headers.len())
        .filter(|&index| !squashed.is_empty() && squash(&headers[index]) == squashed)
        .collect();
    match matches.as_slice() {
        [index] => Ok(*index),
        _ => Err(ApiError::invalid_request(format!(
            "`mapping` names the column `{column}`, which is not in the CSV header; the columns are {}.",
            list(headers)
        ))),
    }
}

/// "row 3 (line 4)", or "the header row (line 1)".
fn at(record: u64, line: u64) -> String {
    if record == 0 {
        format!("The header row (line {line})")
    } else {
        format!("Row {record} (line {line})")
    }
}

/// Checks the quoting strictly, which the `csv` crate does not: it reads `"a"b` as `ab` and an
/// unclosed quote as a field running to the end of the file. Records are counted as the reader
/// counts them (blank lines skipped), so row numbers agree.
fn check_quotes(text: &str) -> Result<(), ApiError> {
    let bytes = text.strip_prefix('\u{feff}').unwrap_or(text).as_bytes();
    if !bytes.contains(&b'"') {
        return Ok(());
    }
    let (mut record, mut line, mut i) = (0u64, 1u64, 0usize);
    let mut at_record_start = true;
    let mut started = false;
    while i < bytes.len() {
        if at_record_start {
            match bytes[i] {
                b'\n' => {
                    line += 1;
                    i += 1;
                    continue;
                }
                b'\r' => {
                    i += 1;
                    continue;
                }
                _ => {}
            }
            at_record_start = false;
            if started {
                record += 1;
            }
            started = true;
        }
        if bytes[i] == b'"' {
            let (open_record, open_line) = (record, line);
            i += 1;
            loop {
                match bytes.get(i) {
                    None => {
                        return Err(ApiError::invalid_request(format!(
                            "{}: a quoted value opens here and is never closed; close it with `\"`.",
                            at(open_record, open_line)
                        )));
                    }
                    Some(b'"') if bytes.get(i + 1) == Some(&b'"') => i += 2,
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(b'\n') => {
                        line += 1;
                        i += 1;
                    }
                    Some(_) => i += 1,
                }
            }
            match bytes.get(i) {
                None => {}
                Some(b',') => i += 1,
                Some(b'\n') => {
                    line += 1;
                    i += 1;
                    at_record_start = true;
                }
                Some(b'\r') => {
                    i += 1;
                    at_record_start = true;
                }
                Some(_) => {
                    return Err(ApiError::invalid_request(format!(
                        "{}: a closing quote must be followed by a comma or the end of the line; \
                         write a quote inside a quoted value as `\"\"`.",
                        at(record, line)
                    )));
                }
            }
        } else {
            while i < bytes.len() && !matches!(bytes[i], b',' | b'\n' | b'\r') {
                i += 1;
            }
            match bytes.get(i) {
                Some(b',') => i += 1,
                Some(b'\n') => {
                    line += 1;
                    i += 1;
                    at_record_start = true;
                }
                Some(b'\r') => {
                    i += 1;
                    at_record_start = true;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// LinkedIn's connections export starts with a `Notes:` paragraph and a blank line before the
/// header. Blanks it out (keeping its line breaks, so line numbers stay those of the file); `None`
/// when the text does not start that way.
fn skip_notes_preamble(text: &str) -> Option<String> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !body.trim_start().to_ascii_lowercase().starts_with("notes:") {
        return None;
    }
    let blank = body.find("\n\n").or_else(|| body.find("\r\n\r\n"))?;
    let (preamble, rest) = body.split_at(blank);
    let newlines = preamble.matches('\n').count();
    Some(format!("{}{rest}", "\n".repeat(newlines)))
}

/// Opens CSV text with a header row.
pub fn csv<'a>(
    text: &'a str,
    mapping: Option<&BTreeMap<String, Option<String>>>,
) -> Result<Rows<'a>, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid_request(
            "The CSV is empty; send a header row and at least one data row.",
        ));
    }
    let unnoted = skip_notes_preamble(text);
    let noted = unnoted.is_some();
    let text: Cow<'a, str> = match unnoted {
        Some(unnoted) => Cow::Owned(unnoted),
        None => Cow::Borrowed(text),
    };
    check_quotes(&text)?;
    let lines = text.bytes().filter(|byte| *byte == b'\n').count() + 1;
    let bytes: Cow<'a, [u8]> = match text {
        Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
        Cow::Owned(text) => Cow::Owned(text.into_bytes()),
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(std::io::Cursor::new(bytes));
    let record = reader.headers().map_err(|error| csv_error(&error))?;
    // Measured before the columns are copied and planned (planning compares columns with columns).
    if record.len() > MAX_COLUMNS {
        return Err(ApiError::invalid_request(format!(
            "The `csv` header has {} columns; an import takes at most {MAX_COLUMNS}.",
            record.len()
        )));
    }
    let headers: Vec<String> = record
        .iter()
        .map(|header| header.trim().to_owned())
        .collect();
    let (targets, mut warnings) = plan_columns(&headers, mapping)?;
    if noted {
        warnings.insert(
            0,
            "The `Notes:` paragraph above the header (LinkedIn's connections export) was skipped."
                .to_owned(),
        );
    }
    Ok(Rows {
        source: Source::Csv {
            reader,
            targets,
            record: csv::StringRecord::new(),
            lines,
        },
        warnings,
        read: 0,
    })
}

fn csv_error(error: &csv::Error) -> ApiError {
    match error.kind() {
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => {
            let (record, line) = pos
                .as_ref()
                .map_or((0, 0), |pos| (pos.record(), pos.line()));
            ApiError::invalid_request(format!(
                "{} has {len} values but the header has {expected_len} columns; every row needs one value per column \
                 (quote values that contain commas).",
                at(record, line)
            ))
        }
        _ => {
            let place = error
                .position()
                .map(|pos| format!("{}: ", at(pos.record(), pos.line())))
                .unwrap_or_default();
            ApiError::invalid_request(format!("{place}the CSV cannot be read: {error}."))
        }
    }
}

/// Turns one CSV record into a row, or the reason it is invalid.
fn csv_row(
    number: u64,
    record: &csv::StringRecord,
    targets: &[Target],
) -> Result<ImportRow, RowError> {
    let mut row = ImportRow::default();
    let mut place: Vec<&str> = Vec::new();
    for (value, target) in record.iter().zip(targets) {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        let field = match target {
            Target::Ignore => continue,
            Target::Custom(key) => {
                row.custom_fields
                    .insert(key.clone(), Value::String(value.to_owned()));
                continue;
            }
            Target::Field(field) => *field,
        };
        let text = Some(value.to_owned());
        match field {
            Field::FirstName => row.first_name = text,
            Field::LastName => row.last_name = text,
            Field::FullName => row.full_name = text,
            Field::Headline => row.headline = text,
            Field::Title => row.title = text,
            Field::Seniority => row.seniority = text,
            Field::Department => row.department = text,
            Field::CompanyName => row.company_name = text,
            Field::CompanyDomain => row.company_domain = text,
            Field::CompanyIndustry => row.company_industry = text,
            Field::Location => row.location = text,
            Field::Country => row.country = text,
            Field::Timezone => row.timezone = text,
            Field::ProfileUrl => row.profile_url = text,
            Field::Email => row.email = text,
            Field::Phone => row.phone = text,
            Field::City | Field::State => place.push(value),
            Field::CompanySize => {
                row.company_size = Some(company_size(value).ok_or_else(|| RowError {
                    row: number,
                    field: Some("company_size".to_owned()),
                    message: format!("`company_size` must be a number of employees such as `250` or `51-200`; got `{value}`."),
                })?);
            }
            Field::Tags => {
                // Counted before they are copied: a cell can hold 60,000 tags.
                let count = value
                    .split([';', '|'])
                    .filter(|tag| !tag.trim().is_empty())
                    .take(MAX_TAGS + 1)
                    .count();
                if count > MAX_TAGS {
                    return Err(RowError {
                        row: number,
                        field: Some("tags".to_owned()),
                        message: format!(
                            "`tags` holds more than {MAX_TAGS} entries; a prospect holds at most {MAX_TAGS}."
                        ),
                    });
                }
                row.tags = value
                    .split([';', '|'])
                    .map(str::trim)
                    .filter(|tag| !tag.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            Field::DoNotContact => {
                row.do_not_contact = Some(boolean(value).ok_or_else(|| RowError {
                    row: number,
                    field: Some("do_not_contact".to_owned()),
                    message: format!("`do_not_contact` must be `true` or `false` (or yes/no, 1/0); got `{value}`."),
                })?);
            }
        }
    }
    if row.location.is_none() && !place.is_empty() {
        row.location = Some(place.join(", "));
    }
    Ok(row)
}

/// `250`, `1,000`, `10000+`, or a range `51-200` (its lower bound).
fn company_size(value: &str) -> Option<u32> {
    let lower = match value.split_once(['-', '–']) {
        Some((lower, upper)) if !lower.trim().is_empty() && !upper.trim().is_empty() => lower,
        _ => value,
    };
    let digits: String = lower
        .trim()
        .trim_end_matches('+')
        .chars()
        .filter(|c| !matches!(c, ',' | '_' | ' '))
        .collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn boolean(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "1" => Some(true),
        "false" | "no" | "n" | "0" => Some(false),
        _ => None,
    }
}

// ----- validation, shared by both shapes -----

/// `Jane Doe` -> (`Jane`, `Doe`); `Doe, Jane` -> (`Jane`, `Doe`); `Cher` -> (`Cher`, none).
fn split_full_name(full: &str) -> (Option<String>, Option<String>) {
    let full = full.trim();
    if let Some((last, first)) = full.split_once(',') {
        let (first, last) = (first.trim(), last.trim());
        return (
            (!first.is_empty()).then(|| first.to_owned()),
            (!last.is_empty()).then(|| last.to_owned()),
        );
    }
    match full.split_once(char::is_whitespace) {
        Some((first, last)) => (Some(first.to_owned()), Some(last.trim().to_owned())),
        None => ((!full.is_empty()).then(|| full.to_owned()), None),
    }
}

/// Normalises a row the way `create_prospect` does; the first problem makes it invalid.
fn validate(number: u64, row: ImportRow) -> Result<Row, RowError> {
    let fail = |field: Option<&str>, error: ApiError| RowError {
        row: number,
        field: field.map(str::to_owned),
        message: error.message,
    };
    let text = |field: &'static str, value: Option<String>| {
        normalize::text(field, value).map_err(|error| fail(Some(field), error))
    };
    let (mut first_name, mut last_name) = (
        text("first_name", row.first_name)?,
        text("last_name", row.last_name)?,
    );
    if first_name.is_none()
        && last_name.is_none()
        && let Some(full) = text("full_name", row.full_name)?
    {
        (first_name, last_name) = split_full_name(&full);
    }
    let fields = Fields {
        first_name,
        last_name,
        headline: text("headline", row.headline)?,
        title: text("title", row.title)?,
        seniority: text("seniority", row.seniority)?,
        department: text("department", row.department)?,
        company_name: text("company_name", row.company_name)?,
        company_domain: normalize::company_domain(row.company_domain)
            .map_err(|error| fail(Some("company_domain"), error))?,
        company_industry: text("company_industry", row.company_industry)?,
        company_size: row.company_size.map(i64::from),
        location: text("location", row.location)?,
        country: text("country", row.country)?,
        timezone: text("timezone", row.timezone)?,
        profile_url: normalize::profile_url(row.profile_url)
            .map_err(|error| fail(Some("profile_url"), error))?,
        email: normalize::email(row.email).map_err(|error| fail(Some("email"), error))?,
        phone: text("phone", row.phone)?,
        tags: normalize::tags(row.tags).map_err(|error| fail(Some("tags"), error))?,
        custom_fields: normalize::custom_fields(row.custom_fields)
            .map_err(|error| fail(Some("custom_fields"), error))?,
        do_not_contact: row.do_not_contact.unwrap_or(false),
    };
    if fields.first_name.is_none()
        && fields.last_name.is_none()
        && fields.profile_url.is_none()
        && fields.email.is_none()
    {
        return Err(RowError {
            row: number,
            field: None,
            message:
                "The row has no name, profile URL or email; a prospect needs at least one of them."
                    .to_owned(),
        });
    }
    Ok(Row {
        fields,
        do_not_contact_given: row.do_not_contact.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of a file, as the tests look at it.
    #[derive(Debug, Default)]
    struct Parsed {
        rows: u64,
        valid: Vec<Row>,
        invalid: u64,
        errors: Vec<RowError>,
        warnings: Vec<String>,
    }

    fn collect(rows: Result<Rows<'_>, ApiError>) -> Result<Parsed, String> {
        let mut rows = rows.map_err(|error| error.message)?;
        let mut parsed = Parsed::default();
        while let Some(row) = rows.next_row().map_err(|error| error.message)? {
            parsed.rows += 1;
            match row {
                Ok(row) => parsed.valid.push(row),
                Err(error) => {
                    parsed.invalid += 1;
                    parsed.errors.push(error);
                }
            }
        }
        parsed.warnings = rows.warnings;
        Ok(parsed)
    }

    fn parse(text: &str) -> Result<Parsed, String> {
        collect(csv(text, None))
    }

    #[test]
    fn headers_map_without_case_spaces_or_punctuation() {
        let parsed = parse("First Name,LAST_NAME,Company Name,Job Title,LinkedIn URL,E-mail Address,Notes\n\
                            Jane,Doe,Acme,CTO,https://www.linkedin.com/in/jane/,Jane@Acme.com,met at expo\n")
        .unwrap_or_else(|error| panic!("{error}"));
        let row = &parsed.valid[0].fields;
        assert_eq!(row.first_name.as_deref(), Some("Jane"));
        assert_eq!(row.last_name.as_deref(), Some("Doe"));
        assert_eq!(row.company_name.as_deref(), Some("Acme"));
        assert_eq!(row.title.as_deref(), Some("CTO"));
        assert_eq!(row.profile_url.as_deref(), Some("linkedin.com/in/jane"));
        assert_eq!(row.email.as_deref(), Some("jane@acme.com"));
        assert_eq!(
            row.custom_fields.get("Notes"),
            Some(&Value::String("met at expo".into()))
        );
    }

    #[test]
    fn full_names_split_and_tags_separate() {
        let parsed = parse("Name,Tags,Employees\nAda King Lovelace,vip; met|vip,51-200\n\"Hopper, Grace\",,\"1,000\"\n")
            .unwrap_or_else(|error| panic!("{error}"));
        let ada = &parsed.valid[0].fields;
        assert_eq!(
            (ada.first_name.as_deref(), ada.last_name.as_deref()),
            (Some("Ada"), Some("King Lovelace"))
        );
        assert_eq!(ada.tags, vec!["vip".to_owned(), "met".to_owned()]);
        assert_eq!(ada.company_size, Some(51));
        let grace = &parsed.valid[1].fields;
        assert_eq!(
            (grace.first_name.as_deref(), grace.last_name.as_deref()),
            (Some("Grace"), Some("Hopper"))
        );
        assert_eq!(grace.company_size, Some(1000));
    }

    #[test]
    fn invalid_rows_are_numbered_from_the_first_data_row() {
        let parsed =
            parse("name,email\nJane,jane@acme.com\n,\nBob,not-an-email\n\nEve,eve@acme.com\n")
                .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!((parsed.rows, parsed.valid.len(), parsed.invalid), (4, 2, 2));
        assert_eq!(parsed.errors[0].row, 2);
        assert_eq!(parsed.errors[0].field, None);
        assert_eq!(parsed.errors[1].row, 3);
        assert_eq!(parsed.errors[1].field.as_deref(), Some("email"));
        assert_eq!(parsed.valid[1].fields.first_name.as_deref(), Some("Eve"));
    }

    #[test]
    fn bad_files_are_refused_with_the_row() {
        let error = parse("name,email\nJane,jane@acme.com\nBob\n")
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("Row 2 (line 3)") && error.contains("1 values"),
            "{error}"
        );
        let error = parse("name,email\n\"Jane\"x,jane@acme.com\n")
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("Row 1 (line 2)") && error.contains("closing quote"),
            "{error}"
        );
        let error = parse("name,email\nJane,jane@acme.com\n\"Bob,bob@acme.com\n")
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("Row 2 (line 3)") && error.contains("never closed"),
            "{error}"
        );
        assert!(parse("").err().unwrap_or_default().contains("empty"));
        assert!(
            parse("name,email\n")
                .err()
                .unwrap_or_default()
                .contains("no data rows")
        );
        assert!(
            parse("Title,Company\nCTO,Acme\n")
                .err()
                .unwrap_or_default()
                .contains("No column")
        );
        assert!(
            parse("Email,E-mail\na@b.co,c@d.co\n")
                .err()
                .unwrap_or_default()
                .contains("both go to `email`")
        );
    }

    #[test]
    fn quotes_that_are_well_formed_pass() {
        let parsed = parse("\u{feff}\"name\",\"email\"\r\n\"Jane \"\"JD\"\" Doe\",\"jane@acme.com\"\r\n\"Multi\nLine\",\r\n")
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(parsed.rows, 2);
        assert_eq!(
            parsed.valid[0].fields.last_name.as_deref(),
            Some("\"JD\" Doe")
        );
    }

    #[test]
    fn explicit_mappings_are_checked() {
        let mapping = |pairs: &[(&str, Option<&str>)]| -> BTreeMap<String, Option<String>> {
            pairs
                .iter()
                .map(|(column, target)| ((*column).to_owned(), target.map(str::to_owned)))
                .collect()
        };
        let text = "Who,Where,Junk\nJane,Paris,x\n";
        let parsed = collect(csv(
            text,
            Some(&mapping(&[
                ("Who", Some("full_name")),
                ("where", Some("location")),
                ("Junk", None),
            ])),
        ))
        .unwrap_or_else(|error| panic!("{error}"));
        let row = &parsed.valid[0].fields;
        assert_eq!(row.location.as_deref(), Some("Paris"));
        assert!(row.custom_fields.is_empty());
        let error = collect(csv(text, Some(&mapping(&[("Who", Some("nickname"))]))))
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("`nickname`, which is not a prospect field"),
            "{error}"
        );
        let error = collect(csv(text, Some(&mapping(&[("Whom", Some("full_name"))]))))
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("`Whom`, which is not in the CSV header"),
            "{error}"
        );
    }

    fn first(text: &str) -> (Fields, Vec<String>) {
        let mut parsed = parse(text).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(parsed.invalid, 0, "{:?}", parsed.errors);
        (parsed.valid.remove(0).fields, parsed.warnings)
    }

    #[test]
    fn apollo_exports_map_the_person_url_and_keep_the_rest_with_warnings() {
        let (row, warnings) = first(
            "First Name,Last Name,Title,Company,Company Name for Emails,Email,Email Status,Seniority,Departments,\
             First Phone,Work Direct Phone,Mobile Phone,# Employees,Industry,Person Linkedin Url,Website,\
             Company Linkedin Url,City,State,Country,Apollo Contact Id\n\
             Jane,Doe,CTO,Acme Inc,Acme,jane@acme.com,Verified,C suite,Engineering,\
             +1 555 0100,+1 555 0101,+1 555 0102,250,Computer Software,http://www.linkedin.com/in/Jane-Doe,\
             http://www.acme.com,http://www.linkedin.com/company/acme,Austin,Texas,United States,64f0c\n",
        );
        assert_eq!(row.profile_url.as_deref(), Some("linkedin.com/in/jane-doe"));
        assert_eq!(row.company_name.as_deref(), Some("Acme Inc"));
        assert_eq!(row.company_domain.as_deref(), Some("acme.com"));
        assert_eq!(row.company_size, Some(250));
        assert_eq!(row.company_industry.as_deref(), Some("Computer Software"));
        assert_eq!(row.department.as_deref(), Some("Engineering"));
        assert_eq!(row.phone.as_deref(), Some("+1 555 0100"));
        assert_eq!(row.location.as_deref(), Some("Austin, Texas"));
        assert_eq!(row.country.as_deref(), Some("United States"));
        for kept in [
            "Company Linkedin Url",
            "Email Status",
            "Mobile Phone",
            "Company Name for Emails",
            "Apollo Contact Id",
        ] {
            assert!(
                row.custom_fields.contains_key(kept),
                "{kept}: {:?}",
                row.custom_fields
            );
            assert!(
                warnings
                    .iter()
                    .any(|warning| warning.starts_with(&format!("Column `{kept}`"))),
                "{kept}: {warnings:?}"
            );
        }
        assert!(
            warnings.contains(&"Column `Mobile Phone` also looks like `phone`, which `First Phone` fills; it was kept in `custom_fields.Mobile Phone`.".to_owned()),
            "{warnings:?}"
        );
        assert!(
            !warnings
                .iter()
                .any(|warning| warning.contains("`Person Linkedin Url`")),
            "{warnings:?}"
        );
    }

    #[test]
    fn sales_navigator_exports_prefer_the_public_profile_url() {
        let (row, warnings) = first(
            "First Name,Last Name,Title,Company,Geography,LinkedIn Profile URL,Sales Navigator URL,Industry\n\
             Ada,Lovelace,VP Engineering,Analytical Engines,\"London, United Kingdom\",https://www.linkedin.com/in/ada/,\
             \"https://www.linkedin.com/sales/lead/ACwAAB1x2y3,NAME_SEARCH\",Software\n",
        );
        assert_eq!(row.profile_url.as_deref(), Some("linkedin.com/in/ada"));
        assert_eq!(row.location.as_deref(), Some("London, United Kingdom"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("Column `Sales Navigator URL` also looks like `profile_url`")
        );
        // Alone, a Sales Navigator address identifies the lead, with its case-sensitive id kept.
        let (row, _) = first(
            "First Name,Sales Navigator URL\nAda,https://www.linkedin.com/sales/lead/ACwAAB1x2y3\n",
        );
        assert_eq!(
            row.profile_url.as_deref(),
            Some("linkedin.com/sales/lead/ACwAAB1x2y3")
        );
    }

    #[test]
    fn heyreach_and_lemlist_exports_map_their_camel_case_headers() {
        let (row, warnings) = first(
            "firstName,lastName,profileUrl,location,companyName,position,emailAddress,customEmailAddress,headline,tags\n\
             Grace,Hopper,https://linkedin.com/in/GHopper,\"Arlington, VA\",Navy,Rear Admiral,grace@navy.mil,,Compilers,vip\n",
        );
        assert_eq!(row.profile_url.as_deref(), Some("linkedin.com/in/ghopper"));
        assert_eq!(row.title.as_deref(), Some("Rear Admiral"));
        assert_eq!(row.email.as_deref(), Some("grace@navy.mil"));
        assert_eq!(row.tags, vec!["vip".to_owned()]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let (row, warnings) = first(
            "email,firstName,lastName,companyName,companyDomain,linkedinUrl,jobTitle,phone,picture,icebreaker\n\
             ed@corp.io,Ed,Catmull,Pixar,pixar.com,linkedin.com/in/edcatmull,President,+1 510,https://img/x.png,Loved Toy Story\n",
        );
        assert_eq!(
            row.profile_url.as_deref(),
            Some("linkedin.com/in/edcatmull")
        );
        assert_eq!(row.company_domain.as_deref(), Some("pixar.com"));
        assert_eq!(row.title.as_deref(), Some("President"));
        assert_eq!(
            warnings,
            vec![
                "Column `picture` is not a prospect field; it was kept in `custom_fields.picture`.".to_owned(),
                "Column `icebreaker` is not a prospect field; it was kept in `custom_fields.icebreaker`.".to_owned(),
            ]
        );
    }

    #[test]
    fn linkedin_connections_exports_skip_the_notes_and_map_url() {
        let text = "Notes:\n\
             \"When exporting your connection data, you may notice that some of the email addresses are missing.\"\n\
             \n\
             First Name,Last Name,URL,Email Address,Company,Position,Connected On\n\
             Linus,Torvalds,https://www.linkedin.com/in/Linus-T,,Linux Foundation,Fellow,12 Mar 2024\n\
             Bad,Row,not a url,,,,01 Jan 2024\n";
        let parsed = parse(text).unwrap_or_else(|error| panic!("{error}"));
        let row = &parsed.valid[0].fields;
        assert_eq!(row.profile_url.as_deref(), Some("linkedin.com/in/linus-t"));
        assert_eq!(row.company_name.as_deref(), Some("Linux Foundation"));
        assert_eq!(row.title.as_deref(), Some("Fellow"));
        assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
        assert!(parsed.warnings[1].starts_with("Column `Connected On` is not a prospect field"));
        assert_eq!(
            (parsed.errors[0].row, parsed.errors[0].field.as_deref()),
            (2, Some("profile_url"))
        );
    }

    #[test]
    fn oversized_custom_fields_make_the_row_invalid() {
        let text = format!("Name,Notes\nJane,short\nJohn,{}\n", "x".repeat(10_001));
        let parsed = parse(&text).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!((parsed.valid.len(), parsed.invalid), (1, 1));
        assert_eq!(parsed.errors[0].field.as_deref(), Some("custom_fields"));
        assert!(
            parsed.errors[0].message.contains("custom_fields.Notes"),
            "{:?}",
            parsed.errors
        );
    }

    #[test]
    fn json_rows_of_the_wrong_shape_name_the_row_and_field() {
        let error = collect(json_rows(&[
            serde_json::json!({"email": "a@b.co"}),
            serde_json::json!({"company_size": "big"}),
        ]))
        .err()
        .unwrap_or_default();
        assert!(
            error.contains("`rows[1]` (row 2), field `company_size`"),
            "{error}"
        );
        let error = collect(json_rows(&[serde_json::json!({"nickname": "x"})]))
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("`rows[0]` (row 1)") && error.contains("nickname"),
            "{error}"
        );
        let error = collect(json_rows(&[serde_json::json!("x")]))
            .err()
            .unwrap_or_default();
        assert!(error.contains("must be an object"), "{error}");
    }
}
