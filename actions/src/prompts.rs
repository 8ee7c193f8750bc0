//! The MCP prompts: the four workflows people ask an assistant for most, each written as the
//! staged steps of the tools, with the look-before-you-act step first wherever a call spends
//! credits or reaches people (`estimate_only`, `dry_run`). The runtime lists and renders them
//! (`outreach_runtime::prompts`); it checks at start that every tool named here exists.

use outreach_runtime::prelude::{Prompt, PromptArgument, Scope, prompt};

prompt!(Prompt {
    name: "prospect_to_sequence",
    title: "From an audience to a running sequence",
    description: "Find or import the people who fit an audience, score them against the \
                  ideal-customer profile, put the best in a list and a sequence, and (with a \
                  `send` credential) approve and start it, checking cost and effect first.",
    scope: Scope::Write,
    arguments: &[
        PromptArgument {
            name: "audience",
            description: "Who to reach, in words: e.g. founders of seed-stage fintechs in France.",
            default: None,
        },
        PromptArgument {
            name: "list_name",
            description: "The name of the list the chosen people go into.",
            default: Some("after the audience"),
        },
        PromptArgument {
            name: "sender",
            description: "The sender account to send from (its name or id).",
            default: Some("the workspace's connected sender"),
        },
    ],
    text: "Take this audience to a running outreach sequence: {{audience}}.

Work in stages and stop to show me what you found before anything spends credits or reaches \
anyone.

1. Targeting: read the ideal-customer profiles with service_list_targetings. If none fits the \
audience, draft one with service_create_targeting and show it to me.
2. People: look at who is already here with service_list_prospects. To bring in more, call \
service_import_prospects with `estimate_only: true` first, tell me the credits it costs, and \
import only when I agree.
3. Scoring: price a run over the new people with service_start_scoring_run and \
`estimate_only: true`, start it when I agree, follow it with service_get_scoring_run, and read the \
best with service_list_scoring_results.
4. List: put the people I pick in a list, named {{list_name}} (service_create_list, then \
service_add_prospects_to_list).
5. Sequence: choose the sender ({{sender}}) with service_list_senders, then draft a sequence \
with service_create_sequence (a profile view, an invitation with a short note, one follow-up \
message) and show me every text. Enroll the list with service_add_to_sequence.
6. Approval and start (needs a `send` credential): call service_approve_outreach with \
`dry_run: true` and show me who would be approved and when the first invitations go; only on \
my word approve for real, then start with service_activate_sequence. Pass an \
`idempotency_key` on every write so a retried call never acts twice.",
});

prompt!(Prompt {
    name: "review_approvals",
    title: "Review the approval queue",
    description: "Walk the outreach waiting for approval: who, why they fit, the drafted \
                  texts; edit, approve or reject each with the person's word.",
    scope: Scope::Send,
    arguments: &[
        PromptArgument {
            name: "sequence_id",
            description: "Only this sequence's items (its `seq_...` id); every sequence's otherwise.",
            default: Some("all"),
        },
        PromptArgument {
            name: "batch_size",
            description: "How many items to show me at once.",
            default: Some("10"),
        },
    ],
    text: "Help me review the approval queue (sequence: {{sequence_id}}).

1. Read the pending items with service_list_approvals (`status: pending`, and `sequence_id` set \
to the sequence unless it is `all`), {{batch_size}} at a time (`limit`), newest first; \
point out the ones that expire soonest (`expires_at`).
2. For each, show me the person (name, headline, tier), why they were proposed (the reasons), \
and every drafted text with its variant. Read more with service_get_approval or \
service_get_prospect when I ask.
3. When I want a text changed, change it with service_update_approval and show me the result.
4. Before approving, call service_approve_outreach with `dry_run: true` for the items I chose \
and tell me exactly who would be approved and when the first step goes out. Approve only after \
I confirm, with an `idempotency_key`; reject the ones I turn down with service_reject_outreach.
5. End with what was approved, rejected and left waiting.",
});

prompt!(Prompt {
    name: "triage_inbox",
    title: "Triage the inbox",
    description: "Sort the unread conversations by what the replies mean, draft answers for \
                  the interested, and send a reply only with the person's word.",
    scope: Scope::Write,
    arguments: &[PromptArgument {
        name: "sender_id",
        description: "Only this sender account's conversations (its `snd_...` id); every sender's otherwise.",
        default: Some("all"),
    }],
    text: "Triage my inbox (sender: {{sender_id}}).

1. Read the unread conversations with service_list_conversations (`unread: true`, and \
`sender_id` set to the sender unless it is `all`), newest first; open each with \
service_get_conversation.
2. Sort them: interested, a question, not now, not interested, out of office. When an inbox \
triage agent exists (service_list_agents), you may run it with service_run_agent and follow the \
run with service_get_run instead of sorting by hand.
3. For the interested and the questions, draft a short answer each and show it to me. Send \
nothing on your own: replying needs a `send` credential and my word, and goes through \
service_reply_to_conversation with an `idempotency_key`, so a retried call sends once.
4. Mark what we handled as read with service_mark_conversation_read, and tell me what is left.",
});

prompt!(Prompt {
    name: "weekly_report",
    title: "Weekly outreach report",
    description: "A report of the period: invitations, acceptances, replies and their rates \
                  by sequence, step and variant, the approval queue and the credits spent.",
    scope: Scope::Read,
    arguments: &[PromptArgument {
        name: "period",
        description: "The period: 24h, 7d, 30d, 90d, 365d or all.",
        default: Some("7d"),
    }],
    text: "Write my outreach report for the period {{period}}.

1. Read the dashboard with service_get_dashboard (`period: {{period}}`): outreach, replies, the \
approval queue and credits.
2. For each active sequence (service_list_sequences), read service_get_sequence_stats with the \
same period: sent, accepted and replied, and the rates by step and by variant. Say which \
variant leads and whether the lead is significant yet (the stats carry the test's verdict).
3. Read the credits spent with service_list_credit_transactions.
4. Write the report: the headline numbers, what worked, what did not, the items waiting for \
approval, and three concrete next steps. Change nothing.",
});
