//! The scoring engine: pure, deterministic and explainable; no I/O.
//!
//! The rule, in full:
//!
//! - **Gates first.** A prospect whose `company_industry` contains an excluded industry, whose
//!   `title` contains an excluded title keyword, or whose `company_domain` is an excluded domain
//!   (or a subdomain of one) is `disqualified` with score 0; every failed gate is listed and no
//!   criterion is scored.
//! - **Each criterion group earns its best single match.** The groups are titles, seniorities,
//!   departments, industries, company sizes, locations and keywords. Within a group the entry with
//!   the most points among those that match counts (the first one listed on a tie); the others add
//!   nothing, so synonyms (`cto`, `chief technology officer`) can sit side by side without
//!   inflating a score. A title that contains an excluded title keyword (`titles.exclude`) earns
//!   no title points, and the match lists the exclusion with 0 points.
//! - **Score = earned / available.** The points available are the sum of each group's best entry;
//!   the score is `100 * earned / available`, rounded half up with integer arithmetic, so it is
//!   0 to 100 and the same on every machine.
//! - **Tier** by the targeting's thresholds: at or above `a` is `a`, then `b`, then `c`; below `c`
//!   is `d`.
//! - **Missing data**: the fields a group or gate reads when the prospect has none of them (for
//!   locations: `location` and `country`; for keywords: `title`, `headline`, `company_name` and
//!   `company_industry`), in a fixed order. A group with missing data earns nothing; a gate with
//!   missing data passes.
//!
//! Keywords match case-insensitively on whole words: both sides are lowercased and every run of
//! characters that are not letters or digits becomes one space, then ` keyword ` is looked for in
//! ` text ` (so `vp sales` matches `VP, Sales` and `cto` does not match `Director`).
//!
//! Speed: a [`Scorer`] compiles a targeting once per run (padded lowercase patterns, groups sorted
//! by points so the first match is the best), and a [`Scratch`] keeps one reusable buffer per
//! prospect field, so scoring a prospect normalises each field it needs once and allocates only
//! the small vectors of its [`Outcome`].

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::words_into;
use crate::prospects::Tier;
use crate::targeting::{Criteria, Gates, SizeRange, Tiers, ValuePoints};

/// A prospect field the engine reads, in the order missing fields are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Field {
    Title,
    Headline,
    Seniority,
    Department,
    CompanyName,
    CompanyDomain,
    CompanyIndustry,
    CompanySize,
    Location,
    Country,
}

const FIELDS: [Field; 10] = [
    Field::Title,
    Field::Headline,
    Field::Seniority,
    Field::Department,
    Field::CompanyName,
    Field::CompanyDomain,
    Field::CompanyIndustry,
    Field::CompanySize,
    Field::Location,
    Field::Country,
];

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::Title => "title",
            Field::Headline => "headline",
            Field::Seniority => "seniority",
            Field::Department => "department",
            Field::CompanyName => "company_name",
            Field::CompanyDomain => "company_domain",
            Field::CompanyIndustry => "company_industry",
            Field::CompanySize => "company_size",
            Field::Location => "location",
            Field::Country => "country",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u8)
    }
}

/// The fields of a prospect the engine reads, borrowed from wherever they are stored.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProspectFields<'a> {
    pub title: Option<&'a str>,
    pub headline: Option<&'a str>,
    pub seniority: Option<&'a str>,
    pub department: Option<&'a str>,
    pub company_name: Option<&'a str>,
    pub company_domain: Option<&'a str>,
    pub company_industry: Option<&'a str>,
    pub company_size: Option<i64>,
    pub location: Option<&'a str>,
    pub country: Option<&'a str>,
}

impl<'a> ProspectFields<'a> {
    fn text(&self, field: Field) -> Option<&'a str> {
        match field {
            Field::Title => self.title,
            Field::Headline => self.headline,
            Field::Seniority => self.seniority,
            Field::Department => self.department,
            Field::CompanyName => self.company_name,
            Field::CompanyDomain => self.company_domain,
            Field::CompanyIndustry => self.company_industry,
            Field::Location => self.location,
            Field::Country => self.country,
            Field::CompanySize => None,
        }
    }
}

/// A criterion that earned points (or, for `titles.exclude`, cancelled them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatchedCriterion<'a> {
    /// The group: `titles`, `titles.exclude`, `seniorities`, `departments`, `industries`,
    /// `company_sizes`, `locations` or `keywords`.
    pub criterion: Cow<'a, str>,
    /// The keyword, value or size range that matched, as the targeting spells it.
    pub value: Cow<'a, str>,
    /// The prospect field it matched in.
    pub field: Cow<'a, str>,
    /// The points it earned.
    pub points: i64,
}

/// A gate that disqualified the prospect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FailedGate<'a> {
    /// `excluded_industries`, `excluded_domains` or `excluded_title_keywords`.
    pub gate: Cow<'a, str>,
    /// The excluded industry, domain or keyword that matched.
    pub value: Cow<'a, str>,
    /// The prospect field it matched in.
    pub field: Cow<'a, str>,
}

/// The score of one prospect, with its explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<'s> {
    pub score: i64,
    pub tier: Tier,
    pub matched: Vec<MatchedCriterion<'s>>,
    pub gates_failed: Vec<FailedGate<'s>>,
    pub missing: Vec<&'static str>,
}

/// A keyword compiled for matching: ` words ` padded, with its label and points.
#[derive(Debug)]
struct Pattern<'t> {
    label: &'t str,
    padded: String,
    points: i64,
}

impl<'t> Pattern<'t> {
    fn new(label: &'t str, points: i64) -> Self {
        let mut padded = String::new();
        words_into(label, &mut padded);
        Self {
            label,
            padded,
            points,
        }
    }

    fn found_in(&self, text: &str) -> bool {
        text.len() > 1 && text.contains(self.padded.as_str())
    }
}

/// Compiles a group, most points first; the sort is stable so ties keep the targeting's order.
fn group<'t, T>(entries: &'t [T], compile: impl Fn(&'t T) -> Pattern<'t>) -> Vec<Pattern<'t>> {
    let mut patterns: Vec<Pattern<'t>> = entries.iter().map(compile).collect();
    patterns.sort_by_key(|pattern| std::cmp::Reverse(pattern.points));
    patterns
}

fn value_group(entries: &[ValuePoints]) -> Vec<Pattern<'_>> {
    group(entries, |entry| Pattern::new(&entry.value, entry.points))
}

fn plain_group(entries: &[String]) -> Vec<Pattern<'_>> {
    group(entries, |entry| Pattern::new(entry, 0))
}

#[derive(Debug)]
struct Size {
    min: i64,
    max: i64,
    points: i64,
    label: String,
}

impl Size {
    fn new(range: &SizeRange) -> Self {
        let label = match (range.min, range.max) {
            (Some(min), Some(max)) => format!("{min}-{max}"),
            (Some(min), None) => format!("{min}+"),
            (None, Some(max)) => format!("up to {max}"),
            (None, None) => "any".to_owned(),
        };
        Self {
            min: range.min.unwrap_or(i64::MIN),
            max: range.max.unwrap_or(i64::MAX),
            points: range.points,
            label,
        }
    }
}

#[derive(Debug)]
struct Domain<'t> {
    label: &'t str,
    /// `.acme.com`, to recognise subdomains.
    dotted: String,
}

/// The fields the keywords group reads, in the order they are searched.
const KEYWORD_FIELDS: [Field; 4] = [
    Field::Title,
    Field::Headline,
    Field::CompanyName,
    Field::CompanyIndustry,
];
const LOCATION_FIELDS: [Field; 2] = [Field::Location, Field::Country];

/// A targeting compiled for scoring many prospects.
#[derive(Debug)]
pub struct Scorer<'t> {
    titles: Vec<Pattern<'t>>,
    title_excludes: Vec<Pattern<'t>>,
    seniorities: Vec<Pattern<'t>>,
    departments: Vec<Pattern<'t>>,
    industries: Vec<Pattern<'t>>,
    sizes: Vec<Size>,
    locations: Vec<Pattern<'t>>,
    keywords: Vec<Pattern<'t>>,
    gate_industries: Vec<Pattern<'t>>,
    gate_titles: Vec<Pattern<'t>>,
    gate_domains: Vec<Domain<'t>>,
    tiers: Tiers,
    available: i64,
    /// The text fields to normalise for each prospect.
    reads: u16,
}

impl<'t> Scorer<'t> {
    pub fn new(criteria: &'t Criteria, gates: &'t Gates, tiers: Tiers) -> Self {
        let mut sizes: Vec<Size> = criteria.company_sizes.iter().map(Size::new).collect();
        sizes.sort_by_key(|size| std::cmp::Reverse(size.points));
        let scorer = Self {
            titles: value_group(&criteria.titles.include),
            title_excludes: plain_group(&criteria.titles.exclude),
            seniorities: value_group(&criteria.seniorities),
            departments: value_group(&criteria.departments),
            industries: value_group(&criteria.industries),
            sizes,
            locations: value_group(&criteria.locations),
            keywords: value_group(&criteria.keywords),
            gate_industries: plain_group(&gates.excluded_industries),
            gate_titles: plain_group(&gates.excluded_title_keywords),
            gate_domains: gates
                .excluded_domains
                .iter()
                .map(|domain| Domain {
                    label: domain,
                    dotted: format!(".{}", domain.to_ascii_lowercase()),
                })
                .collect(),
            tiers,
            available: 0,
            reads: 0,
        };
        let available = [
            &scorer.titles,
            &scorer.seniorities,
            &scorer.departments,
            &scorer.industries,
            &scorer.locations,
            &scorer.keywords,
        ]
        .iter()
        .filter_map(|group| group.first().map(|best| best.points))
        .sum::<i64>()
            + scorer.sizes.first().map_or(0, |best| best.points);
        let mut reads = 0;
        let mut read = |used: bool, fields: &[Field]| {
            if used {
                reads |= fields.iter().fold(0, |bits, field| bits | field.bit());
            }
        };
        read(
            !scorer.titles.is_empty()
                || !scorer.title_excludes.is_empty()
                || !scorer.gate_titles.is_empty(),
            &[Field::Title],
        );
        read(!scorer.seniorities.is_empty(), &[Field::Seniority]);
        read(!scorer.departments.is_empty(), &[Field::Department]);
        read(
            !scorer.industries.is_empty() || !scorer.gate_industries.is_empty(),
            &[Field::CompanyIndustry],
        );
        read(!scorer.locations.is_empty(), &LOCATION_FIELDS);
        read(!scorer.keywords.is_empty(), &KEYWORD_FIELDS);
        read(!scorer.gate_domains.is_empty(), &[Field::CompanyDomain]);
        Self {
            available,
            reads,
            ..scorer
        }
    }

    /// The points a prospect matching every group's best entry earns.
    pub fn available_points(&self) -> i64 {
        self.available
    }

    fn tier(&self, score: i64) -> Tier {
        if score >= self.tiers.a {
            Tier::A
        } else if score >= self.tiers.b {
            Tier::B
        } else if score >= self.tiers.c {
            Tier::C
        } else {
            Tier::D
        }
    }

    /// Scores one prospect.
    pub fn score<'s>(
        &'s self,
        prospect: &ProspectFields<'_>,
        scratch: &mut Scratch,
    ) -> Outcome<'s> {
        scratch.load(prospect, self.reads);
        let mut outcome = Outcome {
            score: 0,
            tier: Tier::D,
            matched: Vec::new(),
            gates_failed: Vec::new(),
            missing: Vec::new(),
        };
        let mut missing = 0u16;
        let mut need = |used: bool, fields: &[Field]| {
            if used && fields.iter().all(|field| !scratch.present(*field)) {
                missing |= fields.iter().fold(0, |bits, field| bits | field.bit());
            }
        };
        need(
            !self.titles.is_empty()
                || !self.title_excludes.is_empty()
                || !self.gate_titles.is_empty(),
            &[Field::Title],
        );
        need(!self.seniorities.is_empty(), &[Field::Seniority]);
        need(!self.departments.is_empty(), &[Field::Department]);
        need(
            !self.industries.is_empty() || !self.gate_industries.is_empty(),
            &[Field::CompanyIndustry],
        );
        need(!self.sizes.is_empty(), &[Field::CompanySize]);
        need(!self.locations.is_empty(), &LOCATION_FIELDS);
        need(!self.keywords.is_empty(), &KEYWORD_FIELDS);
        need(!self.gate_domains.is_empty(), &[Field::CompanyDomain]);
        outcome.missing = FIELDS
            .iter()
            .filter(|field| missing & field.bit() != 0)
            .map(|field| field.name())
            .collect();

        self.check_gates(scratch, &mut outcome.gates_failed);
        if !outcome.gates_failed.is_empty() {
            outcome.tier = Tier::Disqualified;
            return outcome;
        }

        let mut earned = 0;
        let title = first_match(&self.titles, scratch, &[Field::Title]);
        match (
            title,
            first_match(&self.title_excludes, scratch, &[Field::Title]),
        ) {
            (Some(_), Some((exclude, field))) => {
                outcome
                    .matched
                    .push(matched("titles.exclude", exclude.label, field, 0));
            }
            (title, _) => earn(&mut outcome, &mut earned, "titles", title),
        }
        earn(
            &mut outcome,
            &mut earned,
            "seniorities",
            first_match(&self.seniorities, scratch, &[Field::Seniority]),
        );
        earn(
            &mut outcome,
            &mut earned,
            "departments",
            first_match(&self.departments, scratch, &[Field::Department]),
        );
        earn(
            &mut outcome,
            &mut earned,
            "industries",
            first_match(&self.industries, scratch, &[Field::CompanyIndustry]),
        );
        if let Some(size) = prospect.company_size
            && let Some(range) = self
                .sizes
                .iter()
                .find(|range| (range.min..=range.max).contains(&size))
        {
            earned += range.points;
            outcome.matched.push(matched(
                "company_sizes",
                &range.label,
                Field::CompanySize,
                range.points,
            ));
        }
        earn(
            &mut outcome,
            &mut earned,
            "locations",
            first_match(&self.locations, scratch, &LOCATION_FIELDS),
        );
        earn(
            &mut outcome,
            &mut earned,
            "keywords",
            first_match(&self.keywords, scratch, &KEYWORD_FIELDS),
        );

        outcome.score = if self.available > 0 {
            (earned * 200 + self.available) / (self.available * 2)
        } else {
            0
        };
        outcome.tier = self.tier(outcome.score);
        outcome
    }

    fn check_gates<'s>(&'s self, scratch: &Scratch, failed: &mut Vec<FailedGate<'s>>) {
        let gate = |gate: &'static str, value: &'s str, field: Field| FailedGate {
            gate: Cow::Borrowed(gate),
            value: Cow::Borrowed(value),
            field: Cow::Borrowed(field.name()),
        };
        let industry = scratch.text(Field::CompanyIndustry);
        for pattern in self
            .gate_industries
            .iter()
            .filter(|pattern| pattern.found_in(industry))
        {
            failed.push(gate(
                "excluded_industries",
                pattern.label,
                Field::CompanyIndustry,
            ));
        }
        let domain = scratch.text(Field::CompanyDomain);
        if !domain.is_empty() {
            for excluded in &self.gate_domains {
                if domain == &excluded.dotted[1..] || domain.ends_with(excluded.dotted.as_str()) {
                    failed.push(gate(
                        "excluded_domains",
                        excluded.label,
                        Field::CompanyDomain,
                    ));
                }
            }
        }
        let title = scratch.text(Field::Title);
        for pattern in self
            .gate_titles
            .iter()
            .filter(|pattern| pattern.found_in(title))
        {
            failed.push(gate("excluded_title_keywords", pattern.label, Field::Title));
        }
    }
}

/// Adds a group's best match (if any) to the outcome and its points to `earned`.
fn earn<'s>(
    outcome: &mut Outcome<'s>,
    earned: &mut i64,
    criterion: &'static str,
    found: Option<(&'s Pattern<'_>, Field)>,
) {
    if let Some((pattern, field)) = found {
        *earned += pattern.points;
        outcome
            .matched
            .push(matched(criterion, pattern.label, field, pattern.points));
    }
}

fn matched<'s>(
    criterion: &'static str,
    value: &'s str,
    field: Field,
    points: i64,
) -> MatchedCriterion<'s> {
    MatchedCriterion {
        criterion: Cow::Borrowed(criterion),
        value: Cow::Borrowed(value),
        field: Cow::Borrowed(field.name()),
        points,
    }
}

/// The first pattern (so the one with the most points) found in any of `fields`, with the field.
fn first_match<'p, 't>(
    patterns: &'p [Pattern<'t>],
    scratch: &Scratch,
    fields: &[Field],
) -> Option<(&'p Pattern<'t>, Field)> {
    patterns.iter().find_map(|pattern| {
        fields
            .iter()
            .find(|field| pattern.found_in(scratch.text(**field)))
            .map(|field| (pattern, *field))
    })
}

/// Reusable buffers: each prospect field the scorer reads, normalised.
#[derive(Debug, Default)]
pub struct Scratch {
    texts: [String; FIELDS.len()],
    size_present: bool,
}

impl Scratch {
    fn load(&mut self, prospect: &ProspectFields<'_>, reads: u16) {
        for field in FIELDS {
            let buffer = &mut self.texts[field as usize];
            buffer.clear();
            if reads & field.bit() == 0 {
                continue;
            }
            let Some(text) = prospect.text(field) else {
                continue;
            };
            if field == Field::CompanyDomain {
                buffer.push_str(text.trim());
                buffer.make_ascii_lowercase();
            } else {
                words_into(text, buffer);
            }
        }
        self.size_present = prospect.company_size.is_some();
    }

    /// The normalised text of a field: `" word "` form, a lowercase domain, or empty.
    fn text(&self, field: Field) -> &str {
        &self.texts[field as usize]
    }

    fn present(&self, field: Field) -> bool {
        match field {
            Field::CompanySize => self.size_present,
            Field::CompanyDomain => !self.texts[field as usize].is_empty(),
            _ => self.texts[field as usize].len() > 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targeting::TitleCriteria;

    fn kw(keyword: &str, points: i64) -> ValuePoints {
        val(keyword, points)
    }

    fn val(value: &str, points: i64) -> ValuePoints {
        ValuePoints {
            value: value.into(),
            points,
        }
    }

    fn size(min: Option<i64>, max: Option<i64>, points: i64) -> SizeRange {
        SizeRange { min, max, points }
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|value| (*value).to_owned()).collect()
    }

    /// The profile of the hand-checked table: 110 points available
    /// (titles 30 + seniorities 20 + departments 10 + industries 20 + sizes 15 + locations 10 + keywords 5).
    fn saas_profile() -> (Criteria, Gates) {
        let criteria = Criteria {
            titles: TitleCriteria {
                include: vec![
                    kw("VP Engineering", 25),
                    kw("CTO", 30),
                    kw("head of engineering", 20),
                ],
                exclude: strings(&["assistant"]),
            },
            seniorities: vec![val("vp", 15), val("c-level", 20)],
            departments: vec![val("engineering", 10)],
            industries: vec![val("software", 20), val("financial services", 10)],
            company_sizes: vec![
                size(Some(50), Some(500), 15),
                size(Some(501), Some(5000), 10),
            ],
            locations: vec![kw("germany", 10), kw("berlin", 5)],
            keywords: vec![kw("saas", 5), kw("machine learning", 5)],
        };
        let gates = Gates {
            excluded_industries: strings(&["gambling"]),
            excluded_domains: strings(&["competitor.com"]),
            excluded_title_keywords: strings(&["student", "intern"]),
        };
        (criteria, gates)
    }

    struct Case {
        name: &'static str,
        prospect: ProspectFields<'static>,
        score: i64,
        tier: Tier,
        /// (criterion, value, field, points)
        matched: &'static [(&'static str, &'static str, &'static str, i64)],
        /// (gate, value, field)
        gates_failed: &'static [(&'static str, &'static str, &'static str)],
        missing: &'static [&'static str],
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "the ideal prospect earns every group's best entry",
                prospect: ProspectFields {
                    title: Some("CTO"),
                    seniority: Some("C-Level"),
                    department: Some("Engineering"),
                    company_industry: Some("Computer Software"),
                    company_size: Some(120),
                    location: Some("Berlin, Germany"),
                    country: Some("Germany"),
                    headline: Some("Building SaaS for finance"),
                    company_domain: Some("acme.io"),
                    ..ProspectFields::default()
                },
                // 110 of 110
                score: 100,
                tier: Tier::A,
                matched: &[
                    ("titles", "CTO", "title", 30),
                    ("seniorities", "c-level", "seniority", 20),
                    ("departments", "engineering", "department", 10),
                    ("industries", "software", "company_industry", 20),
                    ("company_sizes", "50-500", "company_size", 15),
                    ("locations", "germany", "location", 10),
                    ("keywords", "saas", "headline", 5),
                ],
                gates_failed: &[],
                missing: &[],
            },
            Case {
                name: "second-best entries add up to tier b",
                prospect: ProspectFields {
                    title: Some("VP, Engineering"),
                    seniority: Some("VP"),
                    department: Some("Engineering"),
                    company_industry: Some("Financial Services"),
                    company_size: Some(1000),
                    location: Some("Munich"),
                    country: Some("Germany"),
                    company_name: Some("Acme"),
                    company_domain: Some("acme.de"),
                    ..ProspectFields::default()
                },
                // 25 + 15 + 10 + 10 + 10 + 10 + 0 = 80 of 110 = 72.7 -> 73
                score: 73,
                tier: Tier::B,
                matched: &[
                    ("titles", "VP Engineering", "title", 25),
                    ("seniorities", "vp", "seniority", 15),
                    ("departments", "engineering", "department", 10),
                    ("industries", "financial services", "company_industry", 10),
                    ("company_sizes", "501-5000", "company_size", 10),
                    ("locations", "germany", "country", 10),
                ],
                gates_failed: &[],
                missing: &[],
            },
            Case {
                name: "an excluded title keyword cancels the title points without disqualifying",
                prospect: ProspectFields {
                    title: Some("Assistant to the CTO"),
                    department: Some("Operations"),
                    company_industry: Some("Software"),
                    company_size: Some(30),
                    location: Some("Paris"),
                    country: Some("France"),
                    company_domain: Some("acme.fr"),
                    ..ProspectFields::default()
                },
                // industries 20 of 110 = 18.2 -> 18
                score: 18,
                tier: Tier::D,
                matched: &[
                    ("titles.exclude", "assistant", "title", 0),
                    ("industries", "software", "company_industry", 20),
                ],
                gates_failed: &[],
                missing: &["seniority"],
            },
            Case {
                name: "keywords match whole words only, anywhere they are looked for",
                prospect: ProspectFields {
                    title: Some("Director of Engineering"),
                    headline: Some("Machine-Learning platforms"),
                    department: Some("engineering"),
                    seniority: Some("Director"),
                    company_industry: Some("Softwarehouse"),
                    company_size: Some(500),
                    location: Some("Remote"),
                    company_domain: Some("acme.com"),
                    ..ProspectFields::default()
                },
                // departments 10 + sizes 15 (500 is inside 50-500) + keywords 5 = 30 of 110 = 27.3 -> 27
                score: 27,
                tier: Tier::D,
                matched: &[
                    ("departments", "engineering", "department", 10),
                    ("company_sizes", "50-500", "company_size", 15),
                    ("keywords", "machine learning", "headline", 5),
                ],
                gates_failed: &[],
                missing: &[],
            },
            Case {
                name: "an excluded title keyword disqualifies",
                prospect: ProspectFields {
                    title: Some("Student"),
                    company_industry: Some("Software"),
                    company_domain: Some("uni.edu"),
                    ..ProspectFields::default()
                },
                score: 0,
                tier: Tier::Disqualified,
                matched: &[],
                gates_failed: &[("excluded_title_keywords", "student", "title")],
                missing: &[
                    "seniority",
                    "department",
                    "company_size",
                    "location",
                    "country",
                ],
            },
            Case {
                name: "a subdomain of an excluded domain disqualifies, with every failed gate listed",
                prospect: ProspectFields {
                    title: Some("CTO and intern mentor"),
                    company_domain: Some("EU.Competitor.com"),
                    company_industry: Some("Online Gambling"),
                    seniority: Some("C-Level"),
                    department: Some("Engineering"),
                    company_size: Some(100),
                    location: Some("Berlin"),
                    ..ProspectFields::default()
                },
                score: 0,
                tier: Tier::Disqualified,
                matched: &[],
                gates_failed: &[
                    ("excluded_industries", "gambling", "company_industry"),
                    ("excluded_domains", "competitor.com", "company_domain"),
                    ("excluded_title_keywords", "intern", "title"),
                ],
                missing: &[],
            },
            Case {
                name: "a domain that only ends with the same letters passes the gate",
                prospect: ProspectFields {
                    title: Some("Head of Engineering"),
                    company_domain: Some("notcompetitor.com"),
                    ..ProspectFields::default()
                },
                // titles 20 of 110 = 18.2 -> 18
                score: 18,
                tier: Tier::D,
                matched: &[("titles", "head of engineering", "title", 20)],
                gates_failed: &[],
                missing: &[
                    "seniority",
                    "department",
                    "company_industry",
                    "company_size",
                    "location",
                    "country",
                ],
            },
            Case {
                name: "a prospect with nothing to read scores 0 and lists what is missing",
                prospect: ProspectFields::default(),
                score: 0,
                tier: Tier::D,
                matched: &[],
                gates_failed: &[],
                missing: &[
                    "title",
                    "headline",
                    "seniority",
                    "department",
                    "company_name",
                    "company_domain",
                    "company_industry",
                    "company_size",
                    "location",
                    "country",
                ],
            },
            Case {
                name: "blank text counts as missing",
                prospect: ProspectFields {
                    title: Some("  "),
                    headline: Some("--"),
                    company_name: Some(""),
                    company_industry: Some("Software"),
                    company_domain: Some(" "),
                    seniority: Some("vp"),
                    department: Some("sales"),
                    company_size: Some(10),
                    country: Some("Germany"),
                    ..ProspectFields::default()
                },
                // seniorities 15 + industries 20 + locations 10 = 45 of 110 = 40.9 -> 41, just over c
                score: 41,
                tier: Tier::C,
                matched: &[
                    ("seniorities", "vp", "seniority", 15),
                    ("industries", "software", "company_industry", 20),
                    ("locations", "germany", "country", 10),
                ],
                gates_failed: &[],
                missing: &["title", "company_domain"],
            },
        ]
    }

    #[test]
    fn hand_checked_prospects_score_as_expected() {
        let (criteria, gates) = saas_profile();
        let scorer = Scorer::new(
            &criteria,
            &gates,
            Tiers {
                a: 80,
                b: 60,
                c: 40,
            },
        );
        assert_eq!(scorer.available_points(), 110);
        let mut scratch = Scratch::default();
        for case in cases() {
            let outcome = scorer.score(&case.prospect, &mut scratch);
            let matched: Vec<(&str, &str, &str, i64)> = outcome
                .matched
                .iter()
                .map(|m| (&*m.criterion, &*m.value, &*m.field, m.points))
                .collect();
            let gates_failed: Vec<(&str, &str, &str)> = outcome
                .gates_failed
                .iter()
                .map(|g| (&*g.gate, &*g.value, &*g.field))
                .collect();
            assert_eq!(outcome.score, case.score, "{}: score", case.name);
            assert_eq!(outcome.tier, case.tier, "{}: tier", case.name);
            assert_eq!(matched, case.matched, "{}: matched", case.name);
            assert_eq!(
                gates_failed, case.gates_failed,
                "{}: gates failed",
                case.name
            );
            assert_eq!(outcome.missing, case.missing, "{}: missing", case.name);
            if outcome.tier != Tier::Disqualified {
                let earned: i64 = outcome.matched.iter().map(|m| m.points).sum();
                assert_eq!(
                    outcome.score,
                    (earned * 200 + 110) / 220,
                    "{}: the matches explain the score",
                    case.name
                );
            }
        }
    }

    #[test]
    fn scores_round_half_up_and_tiers_start_at_their_thresholds() {
        // 8 points available: 1 earned is 12.5 -> 13; 4 is 50; 5 is 62.5 -> 63; 7 is 87.5 -> 88.
        let criteria = Criteria {
            titles: TitleCriteria {
                include: vec![kw("cto", 4)],
                exclude: vec![],
            },
            departments: vec![val("engineering", 3)],
            keywords: vec![kw("rust", 1)],
            ..Criteria::default()
        };
        let gates = Gates::default();
        let scorer = Scorer::new(
            &criteria,
            &gates,
            Tiers {
                a: 88,
                b: 63,
                c: 13,
            },
        );
        let mut scratch = Scratch::default();
        let table = [
            (
                ProspectFields {
                    headline: Some("Rust!"),
                    ..ProspectFields::default()
                },
                13,
                Tier::C,
            ),
            (
                ProspectFields {
                    title: Some("CTO"),
                    ..ProspectFields::default()
                },
                50,
                Tier::C,
            ),
            (
                ProspectFields {
                    title: Some("CTO"),
                    headline: Some("rust"),
                    ..ProspectFields::default()
                },
                63,
                Tier::B,
            ),
            (
                ProspectFields {
                    title: Some("CTO"),
                    department: Some("Engineering"),
                    ..ProspectFields::default()
                },
                88,
                Tier::A,
            ),
            (
                ProspectFields {
                    title: Some("Rustacean"),
                    ..ProspectFields::default()
                },
                0,
                Tier::D,
            ),
        ];
        for (prospect, score, tier) in table {
            let outcome = scorer.score(&prospect, &mut scratch);
            assert_eq!((outcome.score, outcome.tier), (score, tier), "{prospect:?}");
        }
    }

    #[test]
    fn the_first_entry_wins_a_tie_and_the_most_points_win_otherwise() {
        let criteria = Criteria {
            titles: TitleCriteria {
                include: vec![kw("engineer", 5), kw("senior engineer", 9), kw("senior", 9)],
                exclude: vec![],
            },
            ..Criteria::default()
        };
        let gates = Gates::default();
        let scorer = Scorer::new(
            &criteria,
            &gates,
            Tiers {
                a: 80,
                b: 60,
                c: 40,
            },
        );
        let outcome = scorer.score(
            &ProspectFields {
                title: Some("Senior Engineer"),
                ..ProspectFields::default()
            },
            &mut Scratch::default(),
        );
        assert_eq!(outcome.matched.len(), 1);
        assert_eq!(outcome.matched[0].value, "senior engineer");
        assert_eq!(outcome.score, 100);
    }

    #[test]
    fn words_are_lowercased_and_punctuation_is_a_space() {
        let mut out = String::new();
        for (text, words) in [
            ("VP, Sales & Marketing", " vp sales marketing "),
            ("  Co-Founder/CEO ", " co founder ceo "),
            ("Ärztin für Innere Medizin", " ärztin für innere medizin "),
            ("", " "),
            ("...", " "),
        ] {
            words_into(text, &mut out);
            assert_eq!(out, words, "{text}");
        }
    }

    #[test]
    fn outcomes_are_the_same_however_often_they_are_computed() {
        let (criteria, gates) = saas_profile();
        let scorer = Scorer::new(
            &criteria,
            &gates,
            Tiers {
                a: 80,
                b: 60,
                c: 40,
            },
        );
        let mut scratch = Scratch::default();
        let first: Vec<Outcome<'_>> = cases()
            .iter()
            .map(|case| scorer.score(&case.prospect, &mut scratch))
            .collect();
        let again: Vec<Outcome<'_>> = cases()
            .iter()
            .rev()
            .map(|case| scorer.score(&case.prospect, &mut scratch))
            .collect();
        assert_eq!(
            first,
            again.into_iter().rev().collect::<Vec<_>>(),
            "scratch buffers leak nothing between prospects"
        );
    }

    #[test]
    fn scoring_is_fast_enough_for_a_large_run() {
        // Not a timed assertion: a smoke test that a large batch goes through without per-criterion
        // allocation blowing up. The benchmark in bench/ measures the rate.
        let (criteria, gates) = saas_profile();
        let scorer = Scorer::new(
            &criteria,
            &gates,
            Tiers {
                a: 80,
                b: 60,
                c: 40,
            },
        );
        let mut scratch = Scratch::default();
        let prospects = cases();
        let total: i64 = (0..20_000)
            .map(|i| {
                scorer
                    .score(&prospects[i % prospects.len()].prospect, &mut scratch)
                    .score
            })
            .sum();
        assert!(total > 0);
    }
}
