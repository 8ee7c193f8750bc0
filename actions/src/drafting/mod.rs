//! Drafting: the optional model that writes a `writer` agent's texts in place of its templates.
//!
//! A draft waits for a person's approval whoever wrote it, so the model may only make a text more
//! personal; it must never be the reason a prospect gets no draft, or a worse one than the
//! template. Hence the shape: [`Drafter::draft`] cannot fail. The template rendered for the
//! prospect is always at hand (it passed the sequence's checks when it was rendered), and every
//! way the model can let us down (an error status, an answer we cannot read, a text that fails the
//! checks a rendered template passes, the timeout) falls back to it, with the reason kept on the
//! draft for the person approving it and logged once.
//!
//! The model is a third party. It is sent what a profile shows publicly (name, title, headline,
//! company, industry, size, location), never a prospect's email or phone, and its key is never
//! logged. The request is a pure function of its input with `temperature` 0, so the same draft
//! request sends the same body, and a draft can be reproduced as far as the model allows.
//!
//! The endpoint is OpenAI's chat-completions shape, which most hosted and local model servers
//! speak: `POST {base_url}/chat/completions` and the text at `choices[0].message.content`.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

mod model;

pub use model::DraftingModel;

use crate::prospects::Prospect;
use crate::sequences::{DraftedBy, StepType};

/// What the model is asked to write: one step's text for one prospect.
#[derive(Debug, Clone, Copy)]
pub struct DraftRequest<'a> {
    pub prospect: &'a Prospect,
    /// `ConnectionRequest` (a note) or `Message`; a profile view has no text to draft.
    pub step_kind: StepType,
    /// The step's template as written, e.g. `Hi {{first_name|there}}, ...`: it tells the model
    /// what the sequence's author meant to say.
    pub template: &'a str,
    /// The template rendered for this prospect: the fallback, already checked.
    pub rendered: &'a str,
    /// The step's limit in characters (`chars()`, as the network counts).
    pub limit: usize,
    pub sequence_name: &'a str,
}

/// One drafted text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub text: String,
    pub drafted_by: DraftedBy,
    /// Why the template was used although a model is configured (`None` when the model wrote it,
    /// or none is configured).
    pub fallback_reason: Option<String>,
}

/// The drafting model of a configuration, with one HTTP client reused across drafts.
///
/// Make one per agent run, not one per draft: the client holds the connection pool, so the
/// drafts of a run share connections (and TLS sessions) to the endpoint.
#[derive(Debug)]
pub struct Drafter {
    endpoint: Option<Endpoint>,
}

/// A configured model and what is needed to call it. `Debug` shows the key masked, through
/// [`DraftingModel`]'s own `Debug`.
#[derive(Debug)]
struct Endpoint {
    settings: DraftingModel,
    url: String,
    /// Building a client can only fail on a broken TLS setup; then every draft falls back, with
    /// this as the reason, rather than refusing the agent run.
    http: Result<reqwest::Client, String>,
}

/// The largest answer read from the model: a message is at most 8,000 characters, so anything
/// near this is not an answer we could use, and reading it all would only cost memory.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

impl Drafter {
    pub fn new(model: Option<&DraftingModel>) -> Self {
        Self {
            endpoint: model.map(|settings| Endpoint {
                url: settings.chat_completions_url(),
                http: http_client(settings),
                settings: settings.clone(),
            }),
        }
    }

    pub fn is_configured(&self) -> bool {
        self.endpoint.is_some()
    }

    /// The model's text for this request when it passes the checks, the rendered template
    /// otherwise. Waits at most the configured timeout.
    pub async fn draft(&self, request: &DraftRequest<'_>) -> Draft {
        let Some(endpoint) = &self.endpoint else {
            return template_draft(request, None);
        };
        match endpoint.ask(request).await {
            Ok(text) => Draft {
                text,
                drafted_by: DraftedBy::Llm,
                fallback_reason: None,
            },
            Err(fallback) => {
                let reason = format!("{}; the template was used", fallback.problem);
                tracing::warn!(
                    prospect_id = %request.prospect.id,
                    %reason,
                    cause = fallback.cause.as_deref().unwrap_or(""),
                    "drafting model not used"
                );
                template_draft(request, Some(reason))
            }
        }
    }
}

fn template_draft(request: &DraftRequest<'_>, fallback_reason: Option<String>) -> Draft {
    Draft {
        text: request.rendered.to_owned(),
        drafted_by: DraftedBy::Template,
        fallback_reason,
    }
}

/// Why the model's text was not used: `problem` for the draft and the log, `cause` (the HTTP
/// client's own words, without the URL) for the log only.
struct Fallback {
    problem: String,
    cause: Option<String>,
}

impl From<String> for Fallback {
    fn from(problem: String) -> Self {
        Self {
            problem,
            cause: None,
        }
    }
}

/// The client's timeout covers the whole exchange, connecting and reading the body included.
/// Redirects are not followed: a chat-completions endpoint does not redirect, and following one
/// would turn the POST into a GET somewhere else.
fn http_client(settings: &DraftingModel) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "outreach/",
            env!("CARGO_PKG_VERSION"),
            " (drafting)"
        ))
        .build()
        .map_err(|error| format!("the drafting model's HTTP client could not be made ({error})"))
}

impl Endpoint {
    async fn ask(&self, request: &DraftRequest<'_>) -> Result<String, Fallback> {
        if request.step_kind == StepType::ViewProfile {
            return Err("a profile view has no text to draft".to_owned().into());
        }
        let http = self.http.as_ref().map_err(|problem| problem.clone())?;
        let failed = |error: reqwest::Error| self.transport_fallback(error);
        let mut response = http
            .post(&self.url)
            .bearer_auth(&self.settings.api_key)
            .json(&chat_request(&self.settings.model, request))
            .send()
            .await
            .map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the model's endpoint answered HTTP {status}").into());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(format!(
                    "the model's answer was larger than {} KiB",
                    MAX_ANSWER_BYTES / 1024
                )
                .into());
            }
            body.extend_from_slice(&chunk);
        }
        let answer = answer_text(&body)?;
        Ok(checked_text(&answer, request.limit)?)
    }

    fn transport_fallback(&self, error: reqwest::Error) -> Fallback {
        let problem = if error.is_timeout() {
            format!(
                "the model did not answer within {}",
                readable(self.settings.timeout)
            )
        } else if error.is_connect() {
            "the model's endpoint could not be reached".to_owned()
        } else {
            "the request to the model failed".to_owned()
        };
        // The start-up line names the endpoint once; each fallback line needs only what failed.
        let error = error.without_url();
        let mut cause = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(current) = source {
            let _ = write!(cause, ": {current}");
            source = current.source();
        }
        Fallback {
            problem,
            cause: Some(cause),
        }
    }
}

/// The body of a chat-completions request.
#[derive(Debug, Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatMessage; 2],
    /// The most likely text, so the same request drafts the same text as far as the model allows.
    temperature: u8,
}

#[derive(Debug, Serialize)]
struct ChatMessage {
    role: &'static str,
    content: String,
}

fn chat_request<'a>(model: &'a str, request: &DraftRequest<'_>) -> ChatRequest<'a> {
    ChatRequest {
        model,
        messages: [
            ChatMessage {
                role: "system",
                content: instructions(request),
            },
            ChatMessage {
                role: "user",
                content: brief(request),
            },
        ],
        temperature: 0,
    }
}

/// What the model writes, and the rules its text is checked against afterwards.
fn instructions(request: &DraftRequest<'_>) -> String {
    let what = match request.step_kind {
        StepType::ConnectionRequest => "the note sent with a connection request",
        StepType::Inmail => "an InMail (its body; the subject is the template's)",
        StepType::Message | StepType::ViewProfile | StepType::Condition => "a message",
    };
    format!(
        "You write {what} on a professional network, from the sender to the person described \
         below: short, plain and personal. Use what the template says and the facts given about \
         the person; invent nothing. No placeholders, no subject line, no quotes around the text. \
         At most {limit} characters. Answer with the text only.",
        limit = request.limit
    )
}

/// The template, its rendering and the prospect's public fields, one per line, in a fixed order.
/// Contact details (email, phone) are left out on purpose: the model is a third party.
fn brief(request: &DraftRequest<'_>) -> String {
    let prospect = request.prospect;
    let mut text = format!(
        "Sequence: {}\n\nThe step's template:\n{}\n\nThe template rendered for this person:\n{}\n\nAbout the person:",
        request.sequence_name, request.template, request.rendered
    );
    let size = prospect
        .company_size
        .map(|employees| format!("{employees} employees"));
    let fields = [
        ("first name", prospect.first_name.as_deref()),
        ("last name", prospect.last_name.as_deref()),
        ("title", prospect.title.as_deref()),
        ("headline", prospect.headline.as_deref()),
        ("company", prospect.company_name.as_deref()),
        ("industry", prospect.company_industry.as_deref()),
        ("company size", size.as_deref()),
        ("location", prospect.location.as_deref()),
    ];
    for (label, value) in fields {
        if let Some(value) = value.map(str::trim).filter(|value| !value.is_empty()) {
            let _ = write!(text, "\n- {label}: {value}");
        }
    }
    text
}

/// `choices[0].message.content` of a chat-completions answer.
fn answer_text(body: &[u8]) -> Result<String, String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|_| "the model's answer was not JSON".to_owned())?;
    answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "the model's answer had no text at choices[0].message.content".to_owned())
}

/// Quote pairs a model may wrap its whole answer in although told not to.
const QUOTES: [(char, char); 4] = [('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’')];

/// The model's text, trimmed, if it passes what a rendered template passes: not empty, within
/// the step's limit, no variable left unfilled; and no NUL, which no network delivers.
fn checked_text(answer: &str, limit: usize) -> Result<String, String> {
    let mut text = answer.trim();
    for (open, close) in QUOTES {
        if let Some(inner) = text
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
        {
            text = inner.trim();
            break;
        }
    }
    if text.is_empty() {
        return Err("the model's text was empty".to_owned());
    }
    if text.contains('\0') {
        return Err("the model's text held a NUL character".to_owned());
    }
    if text.contains("{{") {
        return Err("the model's text still held a template variable (`{{`)".to_owned());
    }
    let chars = text.chars().count();
    if chars > limit {
        return Err(format!(
            "the model's text was {chars} characters, over the step's limit of {limit}"
        ));
    }
    Ok(text.to_owned())
}

/// `10 s` for whole seconds, `250 ms` otherwise.
fn readable(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use outreach_runtime::prelude::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::prospects::ProspectSource;

    const KEY: &str = "sk-test-drafting-key";
    const RENDERED: &str = "Hi Ada, I saw your work at Analytical Engines.";

    /// What the fake endpoint received.
    struct Received {
        authorization: Option<String>,
        body: Value,
    }

    /// A loopback chat-completions endpoint that gives every request the same answer.
    struct FakeModel {
        base_url: String,
        received: Arc<Mutex<Vec<Received>>>,
    }

    #[derive(Clone)]
    struct Answer {
        status: StatusCode,
        body: String,
        delay: Duration,
        received: Arc<Mutex<Vec<Received>>>,
    }

    impl FakeModel {
        async fn start(status: StatusCode, body: String, delay: Duration) -> Self {
            let received = Arc::new(Mutex::new(Vec::new()));
            let answer = Answer {
                status,
                body,
                delay,
                received: received.clone(),
            };
            let app = axum::Router::new()
                .route("/v1/chat/completions", post(respond))
                .with_state(answer);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a loopback port");
            let address = listener.local_addr().expect("the fake's address");
            tokio::spawn(async move { axum::serve(listener, app).await });
            Self {
                base_url: format!("http://{address}/v1"),
                received,
            }
        }

        /// An endpoint whose model writes `text`.
        async fn writing(text: &str) -> Self {
            let body = json!({
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            });
            Self::start(StatusCode::OK, body.to_string(), Duration::ZERO).await
        }

        fn drafter(&self, timeout: Duration) -> Drafter {
            Drafter::new(Some(&DraftingModel {
                base_url: self.base_url.clone(),
                api_key: KEY.to_owned(),
                model: "fake-model".to_owned(),
                timeout,
            }))
        }

        fn requests(&self) -> usize {
            self.received.lock().unwrap().len()
        }
    }

    async fn respond(
        State(answer): State<Answer>,
        headers: HeaderMap,
        body: String,
    ) -> (StatusCode, String) {
        let authorization = headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = serde_json::from_str(&body).unwrap_or(Value::Null);
        answer.received.lock().unwrap().push(Received {
            authorization,
            body,
        });
        tokio::time::sleep(answer.delay).await;
        (answer.status, answer.body)
    }

    fn ada() -> Prospect {
        Prospect {
            id: "prs_ada".into(),
            first_name: Some("Ada".into()),
            last_name: Some("Lovelace".into()),
            full_name: Some("Ada Lovelace".into()),
            headline: Some("Poet of numbers".into()),
            title: Some("Analyst".into()),
            seniority: None,
            department: None,
            company_name: Some("Analytical Engines".into()),
            company_domain: Some("engines.example".into()),
            company_industry: Some("Computing".into()),
            company_size: Some(12),
            location: Some("London".into()),
            country: None,
            timezone: None,
            profile_url: Some("network.example/in/ada".into()),
            email: Some("ada@engines.example".into()),
            phone: Some("+44 20 7946 0000".into()),
            tags: Vec::new(),
            custom_fields: Default::default(),
            score: None,
            tier: None,
            targeting_id: None,
            targeting_version: None,
            scored_at: None,
            do_not_contact: false,
            connection_state: None,
            last_contacted_at: None,
            last_replied_at: None,
            source: ProspectSource::Api,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    fn note_for(prospect: &Prospect) -> DraftRequest<'_> {
        DraftRequest {
            prospect,
            step_kind: StepType::ConnectionRequest,
            template: "Hi {{first_name|there}}, I saw your work at {{company_name}}.",
            rendered: RENDERED,
            limit: 300,
            sequence_name: "Founders in London",
        }
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    /// Asserts the draft is the rendered template, with a reason that says `problem`.
    fn assert_fell_back(draft: &Draft, problem: &str) {
        assert_eq!(draft.drafted_by, DraftedBy::Template, "{draft:?}");
        assert_eq!(draft.text, RENDERED);
        let reason = draft.fallback_reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains(problem) && reason.ends_with("the template was used"),
            "expected a reason naming `{problem}`: {draft:?}"
        );
    }

    #[tokio::test]
    async fn a_good_answer_is_the_draft_and_the_request_carries_no_contact_details() {
        let fake =
            FakeModel::writing("  \"Ada, your engines work is a joy to read. Connect?\"\n").await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_eq!(
            draft,
            Draft {
                text: "Ada, your engines work is a joy to read. Connect?".to_owned(),
                drafted_by: DraftedBy::Llm,
                fallback_reason: None,
            }
        );
        let received = fake.received.lock().unwrap();
        assert_eq!(received.len(), 1);
        let request = &received[0];
        assert_eq!(
            request.authorization.as_deref(),
            Some("Bearer sk-test-drafting-key")
        );
        assert_eq!(request.body["model"], "fake-model");
        assert_eq!(request.body["temperature"], 0);
        assert_eq!(request.body["messages"][0]["role"], "system");
        assert_eq!(request.body["messages"][1]["role"], "user");
        let system = request.body["messages"][0]["content"].as_str().unwrap();
        assert!(system.contains("At most 300 characters"), "{system}");
        let sent = request.body.to_string();
        assert!(
            sent.contains("Ada") && sent.contains("Analytical Engines"),
            "{sent}"
        );
        assert!(sent.contains(RENDERED), "{sent}");
        assert!(
            !sent.contains("ada@engines.example"),
            "the email was sent: {sent}"
        );
        assert!(!sent.contains("7946"), "the phone was sent: {sent}");
    }

    #[tokio::test]
    async fn the_same_request_sends_the_same_body() {
        let fake = FakeModel::writing("Ada, shall we connect?").await;
        let prospect = ada();
        let drafter = fake.drafter(TIMEOUT);
        drafter.draft(&note_for(&prospect)).await;
        drafter.draft(&note_for(&prospect)).await;
        let received = fake.received.lock().unwrap();
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].body, received[1].body);
    }

    #[tokio::test]
    async fn an_answer_that_is_not_json_falls_back_to_the_template() {
        let fake =
            FakeModel::start(StatusCode::OK, "<html>oops</html>".into(), Duration::ZERO).await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "not JSON");
    }

    #[tokio::test]
    async fn an_answer_without_choices_falls_back_to_the_template() {
        let body = json!({"object": "chat.completion", "choices": []}).to_string();
        let fake = FakeModel::start(StatusCode::OK, body, Duration::ZERO).await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "no text at choices[0].message.content");
    }

    #[tokio::test]
    async fn an_error_status_falls_back_to_the_template() {
        let body = json!({"error": {"message": "boom"}}).to_string();
        let fake = FakeModel::start(StatusCode::INTERNAL_SERVER_ERROR, body, Duration::ZERO).await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "HTTP 500");
    }

    #[tokio::test]
    async fn an_empty_text_falls_back_to_the_template() {
        let fake = FakeModel::writing(" \n\t ").await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "empty");
    }

    #[tokio::test]
    async fn a_text_over_the_limit_falls_back_to_the_template() {
        let fake = FakeModel::writing(&"é".repeat(301)).await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "301 characters, over the step's limit of 300");
    }

    #[tokio::test]
    async fn a_text_with_an_unfilled_variable_falls_back_to_the_template() {
        let fake = FakeModel::writing("Hi {{first_name}}, let's connect.").await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "template variable");
    }

    #[tokio::test]
    async fn a_text_with_a_nul_falls_back_to_the_template() {
        let fake = FakeModel::writing("Hi Ada\u{0}").await;
        let prospect = ada();
        let draft = fake.drafter(TIMEOUT).draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "NUL");
    }

    #[tokio::test]
    async fn a_slow_answer_falls_back_to_the_template_after_the_timeout() {
        let body = json!({"choices": [{"message": {"content": "Too late"}}]}).to_string();
        let fake = FakeModel::start(StatusCode::OK, body, Duration::from_secs(2)).await;
        let prospect = ada();
        let started = Instant::now();
        let draft = fake
            .drafter(Duration::from_millis(200))
            .draft(&note_for(&prospect))
            .await;
        let took = started.elapsed();
        assert_fell_back(&draft, "did not answer within 200 ms");
        assert!(
            took < Duration::from_millis(1500),
            "the draft took {took:?}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_falls_back_to_the_template() {
        // A port that was just free: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let drafter = Drafter::new(Some(&DraftingModel {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            api_key: KEY.to_owned(),
            model: "fake-model".to_owned(),
            timeout: TIMEOUT,
        }));
        let prospect = ada();
        let draft = drafter.draft(&note_for(&prospect)).await;
        assert_fell_back(&draft, "could not be reached");
    }

    #[tokio::test]
    async fn without_a_model_the_template_is_the_draft_and_nothing_is_asked() {
        let fake = FakeModel::writing("never asked").await;
        let drafter = Drafter::new(None);
        assert!(!drafter.is_configured());
        assert!(fake.drafter(TIMEOUT).is_configured());
        let prospect = ada();
        let draft = drafter.draft(&note_for(&prospect)).await;
        assert_eq!(
            draft,
            Draft {
                text: RENDERED.to_owned(),
                drafted_by: DraftedBy::Template,
                fallback_reason: None,
            }
        );
        assert_eq!(fake.requests(), 0);
    }

    #[test]
    fn the_brief_names_only_non_empty_public_fields() {
        let mut prospect = ada();
        prospect.headline = Some("  ".into());
        let brief = brief(&note_for(&prospect));
        assert!(brief.contains("- first name: Ada\n- last name: Lovelace\n- title: Analyst\n- company: Analytical Engines"), "{brief}");
        assert!(
            brief.contains("- company size: 12 employees\n- location: London"),
            "{brief}"
        );
        assert!(!brief.contains("headline"), "{brief}");
        assert!(!brief.contains("engines.example"), "{brief}");
    }

    #[test]
    fn one_pair_of_surrounding_quotes_is_removed() {
        assert_eq!(checked_text("“Hello Ada”", 300), Ok("Hello Ada".to_owned()));
        assert_eq!(checked_text("'\"Hello\"'", 300), Ok("\"Hello\"".to_owned()));
        assert_eq!(checked_text("Say \"hi\"", 300), Ok("Say \"hi\"".to_owned()));
        assert!(checked_text("\"\"", 300).is_err());
    }

    #[test]
    fn the_limit_counts_characters_not_bytes() {
        assert_eq!(
            checked_text(&"é".repeat(300), 300).map(|text| text.chars().count()),
            Ok(300)
        );
    }
}
