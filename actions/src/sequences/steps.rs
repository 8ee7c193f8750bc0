//! A sequence's steps: what each kind holds, the graph they form, and the texts they render to.
//!
//! Steps are a list, and the list is also a graph: every step has a `key` (`s1`, `s2`, ... by
//! position when the author gives none), a step goes on to the next one in the list unless it
//! names its `next_step`, and a `condition` step goes to its `then_step` or its `else_step`
//! (by key, or `finish`). Everything is checked when a sequence is written ([`check_steps`]):
//! shapes, limits, templates, variants, and the graph (every target exists, no cycle so every
//! path ends, every step is reached, and no path reaches a message before an invitation), so a
//! stored sequence always runs. The engine walks the graph with [`Flow`].
//!
//! A `message` or `connection_request` step may carry 2 to 5 A/B `variants` in place of its text;
//! rendering gives one text per variant, so the approval item shows the person every text that
//! may go out, and which variant an enrollment gets is decided by [`super::variants`].

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::templates::{Template, TemplateError};
use crate::prospects::Prospect;
use outreach_runtime::prelude::ApiError;

pub const MAX_STEPS: usize = 20;
/// A connection request's note, as the network allows it.
pub const MAX_NOTE_CHARS: usize = 300;
/// A message's text, as the network allows it.
pub const MAX_MESSAGE_CHARS: usize = 8000;
/// An InMail's body, as the network allows it.
pub const MAX_INMAIL_CHARS: usize = 1900;
/// An InMail's subject, as the network allows it.
pub const MAX_SUBJECT_CHARS: usize = 200;
/// Ninety days: a longer wait is almost surely a unit mistake.
pub const MAX_DELAY_HOURS: u32 = 2160;
/// The longest a condition waits for what it asks.
pub const MAX_WITHIN_DAYS: u32 = 90;
pub const MIN_VARIANTS: usize = 2;
pub const MAX_VARIANTS: usize = 5;
/// The most a sequence's steps hold in all, in bytes of their JSON: 20 steps of 5 variants of
/// 8,000 characters would be megabytes, and a sequence must fit in one answer (100 KB, what an
/// MCP host takes) with room for the rest of it.
pub const MAX_STEPS_BYTES: usize = 64 * 1024;
pub const MAX_WEIGHT: u32 = 100;
/// The target that ends the enrollment (`completed_steps`).
pub const FINISH: &str = "finish";
const MAX_KEY_CHARS: usize = 40;
const MAX_CONTAINS_CHARS: usize = 200;

outreach_runtime::prelude::text_enum! {
    /// What a step does.
    pub enum StepType {
        /// Visit the person's profile.
        ViewProfile => "view_profile",
        /// Send an invitation, with an optional `note` of at most 300 characters.
        ConnectionRequest => "connection_request",
        /// Send a message (`text`, at most 8,000 characters); only first-degree connections receive messages.
        Message => "message",
        /// Send an InMail (`subject`, at most 200 characters, and `text`, at most 1,900) to someone
        /// who need not be a connection; it spends one of the sender's InMail credits on the network.
        Inmail => "inmail",
        /// Decide where the enrollment goes next (`condition`, `then_step`, `else_step`); sends nothing.
        Condition => "condition",
    }
}

impl StepType {
    /// What the step counts against among the sender's limits; a condition counts against none.
    pub fn quota_kind(self) -> Option<crate::senders::QuotaKind> {
        use crate::senders::QuotaKind;
        match self {
            Self::ViewProfile => Some(QuotaKind::ProfileView),
            Self::ConnectionRequest => Some(QuotaKind::ConnectionRequest),
            Self::Message => Some(QuotaKind::Message),
            Self::Inmail => Some(QuotaKind::Inmail),
            Self::Condition => None,
        }
    }

    /// Whether the step reaches the network (every kind but a condition).
    pub fn sends(self) -> bool {
        self != Self::Condition
    }
}

/// The history entry of a performed step.
impl From<StepType> for crate::enrollments::EnrollmentEventKind {
    fn from(step: StepType) -> Self {
        match step {
            StepType::ViewProfile => Self::ViewProfile,
            StepType::ConnectionRequest => Self::ConnectionRequest,
            StepType::Message => Self::Message,
            StepType::Inmail => Self::Inmail,
            StepType::Condition => Self::Branched,
        }
    }
}

outreach_runtime::prelude::text_enum! {
    /// What a `condition` step asks.
    pub enum ConditionKind {
        /// The person accepted the enrollment's invitation (or was already a connection).
        Connected => "connected",
        /// The person replied during this enrollment (an out-of-office answer is not a reply).
        Replied => "replied",
        /// A field of the prospect contains a text (`field`, `contains`; letter case ignored).
        ProfileHas => "profile_has",
    }
}

outreach_runtime::prelude::text_enum! {
    /// A prospect field a `profile_has` condition reads (each name is the prospects table's column).
    pub enum ProfileField {
        Headline => "headline",
        Title => "title",
        Seniority => "seniority",
        Department => "department",
        CompanyName => "company_name",
        CompanyIndustry => "company_industry",
        Location => "location",
        Country => "country",
    }
}

/// What a `condition` step asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "StepCondition")]
pub struct Condition {
    /// Invitation accepted, replied, or a prospect `field` `contains` a text.
    ///
    /// `connected`: the person accepted the enrollment's invitation (or was already a
    /// connection); `replied`: the person replied during this enrollment (an out-of-office answer
    /// is not a reply); `profile_has`: a field of the prospect contains a text.
    pub kind: ConditionKind,
    /// For `connected`/`replied`: days to wait for it to hold; without it, decided when due.
    ///
    /// The enrollment goes to `then_step` as soon as it holds, to `else_step` when the days have
    /// passed; without `within_days`, the answer at the moment the step comes due decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 90))]
    pub within_days: Option<u32>,
    /// For `profile_has`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<ProfileField>,
    /// For `profile_has`; any case.
    ///
    /// The text the field must contain, letter case ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub contains: Option<String>,
}

impl Condition {
    /// The sentence the history gives for this condition.
    pub fn describe(&self) -> String {
        match self.kind {
            ConditionKind::Connected => "the invitation was accepted".into(),
            ConditionKind::Replied => "the person replied".into(),
            ConditionKind::ProfileHas => format!(
                "`{}` contains \"{}\"",
                self.field.map_or("?", ProfileField::as_str),
                self.contains.as_deref().unwrap_or("")
            ),
        }
    }
}

/// One A/B variant of a `message` or `connection_request` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The list field that holds it describes it; a tool shows no line per item.
#[schemars(description = "")]
#[schemars(rename = "StepVariant")]
pub struct Variant {
    /// Default `a`, `b`, ... by position.
    ///
    /// Unique in its step.
    #[serde(default)]
    #[schemars(length(min = 1, max = 40), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub key: Option<String>,
    /// For a `connection_request`.
    ///
    /// A template, at most 300 characters once rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 300))]
    pub note: Option<String>,
    /// For a `message`.
    ///
    /// A template, at most 8,000 characters once rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8000))]
    pub text: Option<String>,
    /// Its share against the other variants' weights.
    #[serde(default = "default_weight")]
    #[schemars(range(max = 100))]
    pub weight: u32,
    /// False: no new enrollment is given it.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
}

fn default_weight() -> u32 {
    1
}

fn default_enabled() -> bool {
    true
}

impl Variant {
    /// The variant's key (filled in by [`check_steps`]).
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or("")
    }

    /// Whether enrollments may be given this variant.
    pub fn live(&self) -> bool {
        self.enabled && self.weight > 0
    }
}

/// One step of a sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The list field that holds it describes it; a tool shows no line per item.
#[schemars(description = "")]
#[schemars(rename = "SequenceStep")]
pub struct Step {
    /// Default `s1`, `s2`, ... by position; not `finish`.
    ///
    /// Unique in the sequence. Letters, digits, `_` and `-`, at most 40. `then_step`, `else_step`
    /// and `next_step` name steps by their key.
    #[serde(default)]
    #[schemars(length(min = 1, max = 40), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub key: Option<String>,
    /// A `message` reaches only connections; an `inmail` anyone, for an InMail credit; a
    /// `condition` branches.
    ///
    /// `view_profile` visits the profile; `connection_request` sends an invitation with an
    /// optional `note`; `message` sends `text`; `inmail` sends `subject` and `text`; `condition`
    /// sends nothing and decides where the enrollment goes (`condition`, `then_step`,
    /// `else_step`).
    #[serde(rename = "type")]
    pub kind: StepType,
    /// From approval for the first step, else from the previous one.
    ///
    /// A condition is decided after its wait.
    #[serde(default)]
    #[schemars(range(max = 2160))]
    pub delay_hours: u32,
    /// A `connection_request`'s optional note.
    ///
    /// A template, at most 300 characters once rendered.
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub note: Option<String>,
    /// A `message`'s or `inmail`'s text, required unless `variants`; an InMail's at most 1,900
    /// rendered.
    ///
    /// A template; a message's text is at most 8,000 characters once rendered.
    #[serde(default)]
    #[schemars(length(max = 8000))]
    pub text: Option<String>,
    /// Required on an `inmail`.
    ///
    /// An InMail's subject: a template, at most 200 characters once rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub subject: Option<String>,
    /// A/B variants replacing `text` or `note`; each enrollment gets one, by weight.
    ///
    /// For a `message` or a `connection_request`, two to five; the variant is drawn at random by
    /// weight, and the enrollment keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 5))]
    pub variants: Option<Vec<Variant>>,
    /// What a `condition` step asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
    /// A condition's step if it holds: a `key` or `finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_step: Option<String>,
    /// If not (by `within_days`): a `key` or `finish`.
    ///
    /// A condition's step when it does not hold (by its deadline, with `within_days`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub else_step: Option<String>,
    /// Other steps' next: a `key` or `finish`; default the next one.
    ///
    /// Where a step other than a condition goes after it. Default: the next step in the list (or
    /// the end after the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

impl Step {
    /// A step of `kind` with nothing else set: what tests and examples start from.
    pub fn of(kind: StepType) -> Self {
        Self {
            key: None,
            kind,
            delay_hours: 0,
            note: None,
            text: None,
            subject: None,
            variants: None,
            condition: None,
            then_step: None,
            else_step: None,
            next_step: None,
        }
    }

    /// The step's key (filled in by [`check_steps`]).
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or("")
    }

    /// The limit of the step's text once rendered.
    pub fn limit(&self) -> usize {
        match self.kind {
            StepType::ConnectionRequest => MAX_NOTE_CHARS,
            StepType::Inmail => MAX_INMAIL_CHARS,
            _ => MAX_MESSAGE_CHARS,
        }
    }

    /// The template text of the step, or of its `variant` when it has variants, with its limit.
    pub fn template_of(&self, variant: Option<&str>) -> Option<(&str, usize)> {
        let (note, text) = match (&self.variants, variant) {
            (Some(variants), Some(key)) => {
                let variant = variants.iter().find(|v| v.key() == key)?;
                (variant.note.as_deref(), variant.text.as_deref())
            }
            (Some(_), None) | (None, Some(_)) => return None,
            (None, None) => (self.note.as_deref(), self.text.as_deref()),
        };
        match self.kind {
            StepType::ViewProfile | StepType::Condition => None,
            StepType::ConnectionRequest => note.map(|note| (note, MAX_NOTE_CHARS)),
            StepType::Message | StepType::Inmail => text.map(|text| (text, self.limit())),
        }
    }

    /// The texts the step renders: `(variant, template, limit)`, one per variant when it has
    /// variants (every one, enabled or not: one turned on again later was approved too). A
    /// connection request's variant without a note renders to an empty text: an invitation
    /// without a note, approved as such.
    pub fn templates(&self) -> Vec<(Option<&str>, &str, usize)> {
        match &self.variants {
            Some(variants) => variants
                .iter()
                .filter_map(|v| match self.template_of(Some(v.key())) {
                    Some((t, l)) => Some((Some(v.key()), t, l)),
                    None if self.kind == StepType::ConnectionRequest => {
                        Some((Some(v.key()), "", MAX_NOTE_CHARS))
                    }
                    None => None,
                })
                .collect(),
            None => self
                .template_of(None)
                .map(|(t, l)| vec![(None, t, l)])
                .unwrap_or_default(),
        }
    }
}

// ----- the graph -----

/// Where an enrollment goes after a step: another step (by index) or the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Step(usize),
    Finish,
}

/// The steps as a graph the engine walks. Built from checked steps, whose targets all exist.
pub struct Flow<'a> {
    steps: &'a [Step],
    by_key: HashMap<&'a str, usize>,
}

impl<'a> Flow<'a> {
    pub fn new(steps: &'a [Step]) -> Self {
        let by_key = steps
            .iter()
            .enumerate()
            .map(|(index, step)| (step.key(), index))
            .collect();
        Self { steps, by_key }
    }

    /// The step a target names.
    pub fn target(&self, target: &str) -> Next {
        match self.by_key.get(target) {
            Some(index) => Next::Step(*index),
            None => Next::Finish,
        }
    }

    /// Where a step other than a condition goes after it.
    pub fn after(&self, index: usize) -> Next {
        match self.steps.get(index).and_then(|s| s.next_step.as_deref()) {
            Some(target) => self.target(target),
            None if index + 1 < self.steps.len() => Next::Step(index + 1),
            None => Next::Finish,
        }
    }

    /// Where a condition step goes when it holds (`true`) or not.
    pub fn branch(&self, index: usize, holds: bool) -> Next {
        let step = self.steps.get(index);
        let target = step.and_then(|s| {
            if holds {
                s.then_step.as_deref()
            } else {
                s.else_step.as_deref()
            }
        });
        target.map_or(Next::Finish, |t| self.target(t))
    }

    /// The steps an enrollment may go to from `index`.
    fn successors(&self, index: usize) -> Vec<Next> {
        match self.steps.get(index) {
            Some(step) if step.kind == StepType::Condition => {
                vec![self.branch(index, true), self.branch(index, false)]
            }
            Some(_) => vec![self.after(index)],
            None => Vec::new(),
        }
    }
}

/// Fills the keys a stored step list lacks (one written before steps had keys): `s1`, `s2`, ...
/// by position, and `a`, `b`, ... for variants, as [`check_steps`] does.
pub fn fill_keys(steps: &mut [Step]) {
    for (index, step) in steps.iter_mut().enumerate() {
        if step.key.is_none() {
            step.key = Some(format!("s{}", index + 1));
        }
        for (position, variant) in step.variants.iter_mut().flatten().enumerate() {
            if variant.key.is_none() {
                variant.key =
                    Some(char::from(b'a' + u8::try_from(position).unwrap_or(0)).to_string());
            }
        }
    }
}

// ----- checks -----

fn invalid(message: String) -> ApiError {
    ApiError::invalid_request(message)
}

/// Checks and normalises a step list: shapes, limits, templates, variants, keys and the graph.
pub fn check_steps(steps: Vec<Step>) -> Result<Vec<Step>, ApiError> {
    if steps.len() > MAX_STEPS {
        return Err(invalid(format!(
            "`steps` holds {} steps; a sequence has at most {MAX_STEPS}.",
            steps.len()
        )));
    }
    let mut checked = Vec::with_capacity(steps.len());
    let mut keys = HashSet::new();
    for (index, step) in steps.into_iter().enumerate() {
        let step = check_step(index, step)?;
        if !keys.insert(step.key().to_owned()) {
            return Err(invalid(format!(
                "`steps[{index}].key` is `{}`, which an earlier step has; keys are unique in a sequence (a step without one is `s` and its position: `s1`, `s2`, ...).",
                step.key()
            )));
        }
        checked.push(step);
    }
    check_graph(&checked)?;
    let bytes = serde_json::to_vec(&checked)
        .map_err(ApiError::internal)?
        .len();
    if bytes > MAX_STEPS_BYTES {
        return Err(invalid(format!(
            "`steps` is {bytes} bytes of JSON; a sequence's steps hold at most {MAX_STEPS_BYTES} \
             (64 KB), so that the sequence fits in one answer. Shorten the texts, or use fewer \
             variants."
        )));
    }
    Ok(checked)
}

fn check_key(key: &str, field: &str) -> Result<(), ApiError> {
    let well_formed = !key.is_empty()
        && key.chars().count() <= MAX_KEY_CHARS
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !well_formed {
        return Err(invalid(format!(
            "{field} is `{key}`; a key is 1 to {MAX_KEY_CHARS} letters, digits, `_` or `-`."
        )));
    }
    if key == FINISH {
        return Err(invalid(format!(
            "{field} is `finish`, which names the end of the sequence; choose another key."
        )));
    }
    Ok(())
}

/// Trims an optional text; an empty one is none.
fn trimmed(text: Option<String>) -> Option<String> {
    text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

fn check_step(index: usize, mut step: Step) -> Result<Step, ApiError> {
    let at = |field: &str| format!("`steps[{index}].{field}`");
    let kind = step.kind;
    let key = match step.key.take().map(|k| k.trim().to_owned()) {
        Some(key) => {
            check_key(&key, &at("key"))?;
            key
        }
        None => format!("s{}", index + 1),
    };
    step.key = Some(key.clone());
    let name = format!("step {index} (`{key}`)");
    if step.delay_hours > MAX_DELAY_HOURS {
        return Err(invalid(format!(
            "{} is {}; it must be between 0 and {MAX_DELAY_HOURS} (90 days).",
            at("delay_hours"),
            step.delay_hours
        )));
    }
    let only_for = |field: &str, kinds: &str| {
        invalid(format!(
            "{} is only for {kinds}; {name} is a `{kind}`.",
            at(field)
        ))
    };
    if kind != StepType::ConnectionRequest && step.note.is_some() {
        return Err(only_for("note", "a `connection_request` step"));
    }
    if !matches!(kind, StepType::Message | StepType::Inmail) && step.text.is_some() {
        return Err(invalid(format!(
            "{} is only for a `message` or `inmail` step; {name} is a `{kind}` (a connection request takes a `note`).",
            at("text")
        )));
    }
    if kind != StepType::Inmail && step.subject.is_some() {
        return Err(only_for("subject", "an `inmail` step"));
    }
    if !matches!(kind, StepType::Message | StepType::ConnectionRequest) && step.variants.is_some() {
        return Err(only_for(
            "variants",
            "a `message` or `connection_request` step",
        ));
    }
    if kind != StepType::Condition {
        for (field, set) in [
            ("condition", step.condition.is_some()),
            ("then_step", step.then_step.is_some()),
            ("else_step", step.else_step.is_some()),
        ] {
            if set {
                return Err(only_for(field, "a `condition` step"));
            }
        }
    } else if step.next_step.is_some() {
        return Err(invalid(format!(
            "{} is not for a `condition` step; {name} goes to `then_step` or `else_step`.",
            at("next_step")
        )));
    }
    step.note = trimmed(step.note);
    step.text = trimmed(step.text);
    step.subject = trimmed(step.subject);
    if let Some(variants) = step.variants.take() {
        step.variants = Some(check_variants(index, &name, kind, variants)?);
        let own = if kind == StepType::Message {
            ("text", step.text.is_some())
        } else {
            ("note", step.note.is_some())
        };
        if own.1 {
            return Err(invalid(format!(
                "{} and `variants` are both set on {name}; with variants each variant carries its own {}.",
                at(own.0),
                own.0
            )));
        }
    }
    match kind {
        StepType::ViewProfile => {}
        StepType::ConnectionRequest => {
            if let Some(note) = &step.note {
                check_template(
                    note,
                    MAX_NOTE_CHARS,
                    &at("note"),
                    "a connection request note",
                )?;
            }
        }
        StepType::Message => {
            if step.variants.is_none() {
                let text = step.text.as_deref().ok_or_else(|| {
                    invalid(format!(
                        "{} is required and must not be empty on a `message` step.",
                        at("text")
                    ))
                })?;
                check_template(text, MAX_MESSAGE_CHARS, &at("text"), "a message")?;
            }
        }
        StepType::Inmail => {
            let subject = step.subject.as_deref().ok_or_else(|| {
                invalid(format!(
                    "{} is required and must not be empty on an `inmail` step.",
                    at("subject")
                ))
            })?;
            check_template(
                subject,
                MAX_SUBJECT_CHARS,
                &at("subject"),
                "an InMail subject",
            )?;
            let text = step.text.as_deref().ok_or_else(|| {
                invalid(format!(
                    "{} is required and must not be empty on an `inmail` step.",
                    at("text")
                ))
            })?;
            check_template(text, MAX_INMAIL_CHARS, &at("text"), "an InMail")?;
        }
        StepType::Condition => check_condition(index, &name, &mut step)?,
    }
    for (field, target) in [
        ("then_step", &mut step.then_step),
        ("else_step", &mut step.else_step),
        ("next_step", &mut step.next_step),
    ] {
        if let Some(value) = target.take() {
            let value = value.trim().to_owned();
            if value == key {
                return Err(invalid(format!(
                    "{} names {name} itself; a step cannot go to itself.",
                    at(field)
                )));
            }
            if value != FINISH {
                check_key(&value, &at(field))?;
            }
            *target = Some(value);
        }
    }
    Ok(step)
}

fn check_condition(index: usize, name: &str, step: &mut Step) -> Result<(), ApiError> {
    let at = |field: &str| format!("`steps[{index}].{field}`");
    let Some(condition) = step.condition.as_mut() else {
        return Err(invalid(format!(
            "{} is required on a `condition` step: `{{\"kind\": \"connected\" | \"replied\" | \"profile_has\", ...}}`.",
            at("condition")
        )));
    };
    for (field, set) in [
        ("then_step", step.then_step.is_some()),
        ("else_step", step.else_step.is_some()),
    ] {
        if !set {
            return Err(invalid(format!(
                "{} is required on a `condition` step: a step's `key`, or `finish`.",
                at(field)
            )));
        }
    }
    match condition.kind {
        ConditionKind::Connected | ConditionKind::Replied => {
            if condition.field.is_some() || condition.contains.is_some() {
                return Err(invalid(format!(
                    "{} and `contains` are only for a `profile_has` condition; {name} asks `{}`.",
                    at("condition.field"),
                    condition.kind
                )));
            }
            if let Some(days) = condition.within_days
                && !(1..=MAX_WITHIN_DAYS).contains(&days)
            {
                return Err(invalid(format!(
                    "{} is {days}; it must be between 1 and {MAX_WITHIN_DAYS}.",
                    at("condition.within_days")
                )));
            }
        }
        ConditionKind::ProfileHas => {
            if condition.within_days.is_some() {
                return Err(invalid(format!(
                    "{} is only for a `connected` or `replied` condition; a profile is read once, when {name} comes due.",
                    at("condition.within_days")
                )));
            }
            if condition.field.is_none() {
                return Err(invalid(format!(
                    "{} is required on a `profile_has` condition.",
                    at("condition.field")
                )));
            }
            let contains = trimmed(condition.contains.take()).ok_or_else(|| {
                invalid(format!(
                    "{} is required and must not be empty on a `profile_has` condition.",
                    at("condition.contains")
                ))
            })?;
            if contains.chars().count() > MAX_CONTAINS_CHARS {
                return Err(invalid(format!(
                    "{} is longer than {MAX_CONTAINS_CHARS} characters.",
                    at("condition.contains")
                )));
            }
            condition.contains = Some(contains);
        }
    }
    Ok(())
}

fn check_variants(
    index: usize,
    name: &str,
    kind: StepType,
    variants: Vec<Variant>,
) -> Result<Vec<Variant>, ApiError> {
    let at = |field: String| format!("`steps[{index}].{field}`");
    if !(MIN_VARIANTS..=MAX_VARIANTS).contains(&variants.len()) {
        return Err(invalid(format!(
            "{} holds {} variants; a step has {MIN_VARIANTS} to {MAX_VARIANTS}.",
            at("variants".into()),
            variants.len()
        )));
    }
    let mut keys = HashSet::new();
    let mut checked = Vec::with_capacity(variants.len());
    for (position, mut variant) in variants.into_iter().enumerate() {
        let field = |f: &str| at(format!("variants[{position}].{f}"));
        let key = match variant.key.take().map(|k| k.trim().to_owned()) {
            Some(key) => {
                check_key(&key, &field("key"))?;
                key
            }
            None => char::from(b'a' + u8::try_from(position).unwrap_or(0)).to_string(),
        };
        if !keys.insert(key.clone()) {
            return Err(invalid(format!(
                "{} is `{key}`, which another variant of {name} has; variant keys are unique in a step.",
                field("key")
            )));
        }
        variant.key = Some(key.clone());
        if variant.weight > MAX_WEIGHT {
            return Err(invalid(format!(
                "{} is {}; it must be between 0 and {MAX_WEIGHT}.",
                field("weight"),
                variant.weight
            )));
        }
        variant.note = trimmed(variant.note);
        variant.text = trimmed(variant.text);
        match kind {
            StepType::ConnectionRequest => {
                if variant.text.is_some() {
                    return Err(invalid(format!(
                        "{} is for a message variant; variant `{key}` of {name} (a connection request) takes a `note`.",
                        field("text")
                    )));
                }
                if let Some(note) = &variant.note {
                    check_template(
                        note,
                        MAX_NOTE_CHARS,
                        &field("note"),
                        "a connection request note",
                    )?;
                }
            }
            _ => {
                if variant.note.is_some() {
                    return Err(invalid(format!(
                        "{} is for a connection request variant; variant `{key}` of {name} (a message) takes a `text`.",
                        field("note")
                    )));
                }
                let text = variant.text.as_deref().ok_or_else(|| {
                    invalid(format!(
                        "{} is required and must not be empty on variant `{key}` of {name}.",
                        field("text")
                    ))
                })?;
                check_template(text, MAX_MESSAGE_CHARS, &field("text"), "a message")?;
            }
        }
        checked.push(variant);
    }
    if !checked.iter().any(Variant::live) {
        return Err(invalid(format!(
            "{}: no variant of {name} can be given (every one is turned off or weighs 0); give at least one a weight above 0 and leave it enabled.",
            at("variants".into())
        )));
    }
    Ok(checked)
}

/// The graph rules: every target names a step, no cycle (so every path ends), every step is
/// reached from the first, and no path reaches a message before an invitation.
fn check_graph(steps: &[Step]) -> Result<(), ApiError> {
    let keys: HashSet<&str> = steps.iter().map(Step::key).collect();
    for (index, step) in steps.iter().enumerate() {
        for (field, target) in [
            ("then_step", &step.then_step),
            ("else_step", &step.else_step),
            ("next_step", &step.next_step),
        ] {
            if let Some(target) = target
                && target != FINISH
                && !keys.contains(target.as_str())
            {
                return Err(invalid(format!(
                    "`steps[{index}].{field}` names `{target}`, which no step of this sequence is; name a step's `key`, or `finish`."
                )));
            }
        }
    }
    if steps.is_empty() {
        return Ok(());
    }
    let flow = Flow::new(steps);
    // Depth-first from the first step: a step met again on the path in hand closes a cycle.
    let mut state = vec![0u8; steps.len()]; // 0 unseen, 1 on the path, 2 done
    let mut stack = vec![(0usize, 0usize)];
    state[0] = 1;
    while let Some(&mut (node, ref mut next)) = stack.last_mut() {
        let successors = flow.successors(node);
        if let Some(successor) = successors.get(*next) {
            *next += 1;
            let Next::Step(to) = *successor else { continue };
            match state[to] {
                0 => {
                    state[to] = 1;
                    stack.push((to, 0));
                }
                1 => {
                    return Err(invalid(format!(
                        "`steps[{node}]` (`{}`) goes back to `{}`, which leads to it again: a cycle never ends. Send it to a later step or to `finish`.",
                        steps[node].key(),
                        steps[to].key()
                    )));
                }
                _ => {}
            }
        } else {
            state[node] = 2;
            stack.pop();
        }
    }
    if let Some(unreached) = state.iter().position(|s| *s == 0) {
        return Err(invalid(format!(
            "`steps[{unreached}]` (`{}`) is never reached: no step goes to it. Name it in a `then_step`, `else_step` or `next_step`, or remove it.",
            steps[unreached].key()
        )));
    }
    // Every (step, invited so far) state reachable from the start.
    let mut seen = HashSet::new();
    let mut todo = vec![(0usize, false)];
    while let Some((node, invited)) = todo.pop() {
        if !seen.insert((node, invited)) {
            continue;
        }
        let step = &steps[node];
        if step.kind == StepType::Message && !invited {
            let path = if steps[..node].iter().all(|s| s.kind != StepType::Condition) {
                String::new()
            } else {
                " on some path".to_owned()
            };
            return Err(invalid(format!(
                "`steps[{node}]` (`{}`) is a message before any `connection_request` step{path}; messages reach only first-degree connections, so put a `connection_request` step (or a `connected` condition's `then_step`) before it.",
                step.key()
            )));
        }
        let invited = invited || step.kind == StepType::ConnectionRequest;
        if step.kind == StepType::Condition {
            let connected = step
                .condition
                .as_ref()
                .is_some_and(|c| c.kind == ConditionKind::Connected);
            for (holds, next) in [
                (true, flow.branch(node, true)),
                (false, flow.branch(node, false)),
            ] {
                if let Next::Step(to) = next {
                    todo.push((to, invited || (holds && connected)));
                }
            }
        } else if let Next::Step(to) = flow.after(node) {
            todo.push((to, invited));
        }
    }
    Ok(())
}

fn check_template(text: &str, limit: usize, field: &str, what: &str) -> Result<(), ApiError> {
    let chars = text.chars().count();
    if chars > limit {
        return Err(invalid(format!(
            "{field} is {chars} characters; {what} holds at most {limit}."
        )));
    }
    Template::parse(text)
        .map(|_| ())
        .map_err(|error: TemplateError| invalid(error.sentence(field)))
}

// ----- rendering -----

outreach_runtime::prelude::text_enum! {
    /// Who wrote a drafted text.
    pub enum DraftedBy {
        /// The drafting model; its text passed the checks a rendered template passes.
        Llm => "llm",
        /// The step's template, rendered for the prospect: no model is configured, or the model's
        /// answer could not be used.
        Template => "template",
    }
}

/// A prospect's rendered text of one step (of one of its variants, when it has variants).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RenderedText {
    /// The step's index (0-based).
    pub step_index: u32,
    /// The step's type.
    #[serde(rename = "type")]
    pub kind: StepType,
    /// The variant's key, on a step with A/B variants: the item holds one text per variant, and
    /// each enrollment is sent the one it is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// An InMail's subject as the prospect would receive it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The note or message as the prospect would receive it.
    pub text: String,
    /// Who wrote it, on an agent's draft: `llm` (the drafting model) or `template`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafted_by: Option<DraftedBy>,
    /// Why the template was used although a drafting model is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

/// Why a prospect's texts cannot be rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum RenderProblem {
    /// A variable without a value and without a fallback.
    MissingValue { step_index: usize, variable: String },
    /// The rendered text is over its step's limit.
    TooLong {
        step_index: usize,
        chars: usize,
        limit: usize,
    },
}

impl RenderProblem {
    pub fn sentence(&self) -> String {
        match self {
            RenderProblem::MissingValue {
                step_index,
                variable,
            } => format!(
                "step {step_index} uses `{{{{{variable}}}}}`, which this prospect has no value for; add a fallback (`{{{{{variable}|...}}}}`) or fill the field"
            ),
            RenderProblem::TooLong {
                step_index,
                chars,
                limit,
            } => format!(
                "step {step_index} renders to {chars} characters for this prospect; its limit is {limit}"
            ),
        }
    }
}

fn render_one(
    template: &str,
    limit: usize,
    step_index: usize,
    prospect: &Prospect,
) -> Result<Option<String>, RenderProblem> {
    // Stored steps were parsed when written; a failure here would be a stored bad row.
    let Ok(template) = Template::parse(template) else {
        return Ok(None);
    };
    let text = template
        .render_for(prospect)
        .map_err(|missing| RenderProblem::MissingValue {
            step_index,
            variable: missing.0,
        })?;
    let chars = text.chars().count();
    if chars > limit {
        return Err(RenderProblem::TooLong {
            step_index,
            chars,
            limit,
        });
    }
    Ok(Some(text))
}

/// Renders every step's note or text (every variant's, and an InMail's subject) for one
/// prospect; the first problem is reported.
pub fn render_steps(
    steps: &[Step],
    prospect: &Prospect,
) -> Result<Vec<RenderedText>, RenderProblem> {
    let mut texts = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let subject = match (&step.subject, step.kind) {
            (Some(subject), StepType::Inmail) => {
                render_one(subject, MAX_SUBJECT_CHARS, index, prospect)?
            }
            _ => None,
        };
        for (variant, template, limit) in step.templates() {
            let Some(text) = render_one(template, limit, index, prospect)? else {
                continue;
            };
            texts.push(RenderedText {
                step_index: u32::try_from(index).unwrap_or(u32::MAX),
                kind: step.kind,
                variant: variant.map(str::to_owned),
                subject: subject.clone(),
                text,
                drafted_by: None,
                fallback_reason: None,
            });
        }
    }
    Ok(texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: StepType, note: Option<&str>, text: Option<&str>) -> Step {
        Step {
            note: note.map(str::to_owned),
            text: text.map(str::to_owned),
            ..Step::of(kind)
        }
    }

    fn condition(kind: ConditionKind, then_step: &str, else_step: &str) -> Step {
        Step {
            condition: Some(Condition {
                kind,
                within_days: Some(7),
                field: None,
                contains: None,
            }),
            then_step: Some(then_step.into()),
            else_step: Some(else_step.into()),
            ..Step::of(StepType::Condition)
        }
    }

    fn message(steps: Vec<Step>) -> String {
        check_steps(steps)
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    }

    #[test]
    fn a_message_needs_a_connection_request_before_it() {
        let error = message(vec![
            step(StepType::ViewProfile, None, None),
            step(StepType::Message, None, Some("Hi")),
        ]);
        assert!(error.contains("`steps[1]`"), "{error}");
        assert!(
            check_steps(vec![
                step(StepType::ConnectionRequest, None, None),
                step(StepType::Message, None, Some("Hi {{first_name|there}}")),
            ])
            .is_ok()
        );
    }

    #[test]
    fn notes_texts_and_templates_are_checked_naming_the_step() {
        let long = "x".repeat(301);
        assert!(
            message(vec![step(StepType::ConnectionRequest, Some(&long), None)])
                .contains("`steps[0].note` is 301 characters")
        );
        assert!(
            message(vec![
                step(StepType::ConnectionRequest, None, None),
                step(StepType::Message, None, Some("  "))
            ])
            .contains("`steps[1].text` is required")
        );
        assert!(
            message(vec![step(
                StepType::ConnectionRequest,
                Some("Hi {{nickname}}"),
                None
            )])
            .contains("`{{nickname}}`")
        );
        assert!(
            message(vec![step(StepType::ViewProfile, Some("hi"), None)])
                .contains("`steps[0].note` is only for")
        );
        // An empty note is no note.
        let steps = check_steps(vec![step(StepType::ConnectionRequest, Some("  "), None)]);
        assert_eq!(steps.ok().map(|s| s[0].note.clone()), Some(None));
    }

    #[test]
    fn keys_default_by_position_and_must_be_unique() {
        let steps = check_steps(vec![
            step(StepType::ViewProfile, None, None),
            step(StepType::ConnectionRequest, None, None),
        ])
        .unwrap_or_default();
        assert_eq!(
            steps.iter().map(Step::key).collect::<Vec<_>>(),
            ["s1", "s2"]
        );
        let mut named = step(StepType::ConnectionRequest, None, None);
        named.key = Some("s1".into());
        assert!(
            message(vec![step(StepType::ViewProfile, None, None), named])
                .contains("`steps[1].key` is `s1`")
        );
    }

    #[test]
    fn the_graph_is_checked_naming_the_step() {
        let invite = step(StepType::ConnectionRequest, None, None);
        let hello = step(StepType::Message, None, Some("Hi"));
        // A branch to a missing step.
        let error = message(vec![
            invite.clone(),
            condition(ConditionKind::Connected, "s3", "nowhere"),
            hello.clone(),
        ]);
        assert!(
            error.contains("`steps[1].else_step` names `nowhere`"),
            "{error}"
        );
        // A cycle.
        let error = message(vec![
            invite.clone(),
            condition(ConditionKind::Connected, "s3", "finish"),
            Step {
                next_step: Some("s2".into()),
                ..hello.clone()
            },
        ]);
        assert!(error.contains("a cycle"), "{error}");
        // A message on the else branch of `connected`, with no invitation before it.
        let error = message(vec![
            step(StepType::ViewProfile, None, None),
            condition(ConditionKind::Connected, "s3", "s3"),
            hello.clone(),
        ]);
        assert!(error.contains("`steps[2]` (`s3`) is a message"), "{error}");
        // A step nobody goes to.
        let error = message(vec![
            invite.clone(),
            condition(ConditionKind::Connected, "s4", "finish"),
            hello.clone(),
            hello.clone(),
        ]);
        assert!(
            error.contains("`steps[2]` (`s3`) is never reached"),
            "{error}"
        );
        // The issue's branching sequence is fine.
        let inmail = Step {
            subject: Some("Quick question".into()),
            text: Some("Hi".into()),
            ..Step::of(StepType::Inmail)
        };
        let ok = check_steps(vec![
            invite,
            condition(ConditionKind::Connected, "s3", "s4"),
            Step {
                next_step: Some("s5".into()),
                ..hello.clone()
            },
            inmail,
            condition(ConditionKind::Replied, "finish", "s6"),
            hello,
        ]);
        assert!(ok.is_ok(), "{:?}", ok.err());
    }

    #[test]
    fn variants_are_checked() {
        let variant = |text: &str, weight: u32| Variant {
            key: None,
            note: None,
            text: Some(text.into()),
            weight,
            enabled: true,
        };
        let with = |variants: Vec<Variant>| {
            vec![
                step(StepType::ConnectionRequest, None, None),
                Step {
                    variants: Some(variants),
                    ..Step::of(StepType::Message)
                },
            ]
        };
        assert!(message(with(vec![variant("a", 0), variant("b", 0)])).contains("weighs 0"));
        assert!(message(with(vec![variant("a", 1); 6])).contains("holds 6 variants"));
        let steps = check_steps(with(vec![variant("a", 1), variant("b", 3)])).unwrap_or_default();
        let keys: Vec<&str> = steps[1]
            .variants
            .iter()
            .flatten()
            .map(Variant::key)
            .collect();
        assert_eq!(keys, ["a", "b"]);
        assert!(
            message(vec![Step {
                variants: Some(vec![variant("a", 1), variant("b", 1)]),
                ..Step::of(StepType::ViewProfile)
            }])
            .contains("`steps[0].variants` is only for")
        );
        assert!(
            message(vec![Step {
                text: Some("Hi".into()),
                ..Step::of(StepType::Inmail)
            }])
            .contains("`steps[0].subject` is required")
        );
    }

    #[test]
    fn rendering_reports_the_step_over_its_limit() {
        let prospect = crate::sequences::tests::blank_prospect();
        let mut long = crate::sequences::tests::blank_prospect();
        long.company_name = Some("y".repeat(400));
        let steps = vec![step(
            StepType::ConnectionRequest,
            Some("At {{company_name|your company}}"),
            None,
        )];
        assert_eq!(
            render_steps(&steps, &prospect).map(|t| t[0].text.clone()),
            Ok("At your company".to_owned())
        );
        assert_eq!(
            render_steps(&steps, &long),
            Err(RenderProblem::TooLong {
                step_index: 0,
                chars: 403,
                limit: 300
            })
        );
    }
}
