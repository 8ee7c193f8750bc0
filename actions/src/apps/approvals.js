  // ----- The queue -----
  const itemsNode = document.getElementById("items");
  const summaryNode = document.getElementById("summary");
  const noticeNode = document.getElementById("notice");
  const refreshButton = document.getElementById("refresh");
  let listArguments = {};
  let canCall = true;

  function say(text, kind) {
    noticeNode.textContent = text;
    noticeNode.className = "notice " + (kind || "info");
  }

  function personOf(item) {
    const person = item.prospect || {};
    const name = person.full_name || "(no name)";
    let headline = "";
    if (person.title && person.company_name) headline = person.title + " at " + person.company_name;
    else headline = person.title || person.company_name || "";
    return { name, headline };
  }

  function fitOf(reasons) {
    if (!reasons) return "";
    const parts = [];
    if (reasons.tier) parts.push("Tier " + String(reasons.tier).toUpperCase());
    if (typeof reasons.score === "number") parts.push("score " + reasons.score);
    return parts.join(" \u00b7 ");
  }

  function textLabel(text) {
    let label = "Step " + (Number(text.step_index) + 1) + " \u00b7 " + String(text.type || "text").replace(/_/g, " ");
    if (text.variant) label += " \u00b7 variant " + text.variant;
    return label;
  }

  function proposer(item) {
    const by = item.proposed_by || {};
    const name = by.name || by.id || "someone";
    return by.type === "agent" ? name + " (agent)" : name;
  }

  function render(data) {
    itemsNode.replaceChildren();
    if (!data || !Array.isArray(data.items)) {
      summaryNode.textContent = "The answer held no approval items.";
      return;
    }
    const status = listArguments.status || "pending";
    const total = typeof data.total === "number" ? data.total : data.items.length;
    let summary = total + (status === "pending" ? " waiting for approval" : " " + status);
    if (total > data.items.length) summary += "; the newest " + data.items.length + " are shown";
    summaryNode.textContent = summary + ". Nothing reaches a person before it is approved.";
    if (data.items.length === 0) {
      itemsNode.append(el("p", { class: "empty", id: "queue-empty", text: "Nothing waits for approval." }));
      return;
    }
    for (const item of data.items) itemsNode.append(card(item));
  }

  function card(item) {
    const { name, headline } = personOf(item);
    const headingId = "item-" + item.id;
    const outcome = el("p", { class: "outcome", role: "status" });
    const article = el("article", { class: "card", "data-approval-id": item.id, "aria-labelledby": headingId });
    const fit = fitOf(item.reasons);
    const tier = item.reasons && item.reasons.tier ? "tier-" + String(item.reasons.tier) : "";
    article.append(el("header", { class: "card-head" },
      el("div", null,
        el("h2", { id: headingId, text: name }),
        headline ? el("p", { class: "headline", text: headline }) : null),
      fit ? el("span", { class: "badge " + tier, text: fit }) : null));

    const what = item.kind === "reply"
      ? "A reply in a conversation"
      : (item.sequence_name ? "Outreach in " + item.sequence_name : "Outreach");
    const facts = el("dl", { class: "facts" }, el("dt", { text: "What" }), el("dd", { text: what }),
      el("dt", { text: "Proposed by" }), el("dd", { text: proposer(item) }));
    if (item.expires_at) facts.append(el("dt", { text: "Expires" }), el("dd", { text: when(item.expires_at) }));
    if (item.edited_at) facts.append(el("dt", { text: "Edited" }), el("dd", { text: when(item.edited_at) }));
    article.append(facts);

    if (item.reasons && (item.reasons.summary || (item.reasons.matched || []).length)) {
      const why = el("section", { "aria-label": "Why " + name + " fits" }, el("h3", { text: "Why they fit" }));
      if (item.reasons.summary) why.append(el("p", { text: item.reasons.summary }));
      const matched = item.reasons.matched || [];
      if (matched.length) {
        why.append(el("ul", { class: "chips" }, ...matched.map((match) =>
          el("li", { text: match.criterion + ": " + match.value + " in " + match.field + " (+" + match.points + ")" }))));
      }
      article.append(why);
    }

    const texts = el("section", { "aria-label": "Drafted texts for " + name }, el("h3", { text: "Drafted texts" }));
    for (const text of item.texts || []) texts.append(draft(item, name, text, outcome));
    article.append(texts);

    if (item.status === "pending") {
      const approve = el("button", { type: "button", class: "primary approve" }, "Approve",
        el("span", { class: "visually-hidden", text: " " + name }));
      const reject = el("button", { type: "button", class: "danger reject" }, "Reject",
        el("span", { class: "visually-hidden", text: " " + name }));
      approve.disabled = reject.disabled = !canCall;
      approve.addEventListener("click", () => decide(article, item, name, "approve", outcome));
      reject.addEventListener("click", () => decide(article, item, name, "reject", outcome));
      article.append(el("div", { class: "actions" }, approve, reject));
    }
    article.append(outcome);
    return article;
  }

  function draft(item, name, text, outcome) {
    const label = textLabel(text);
    const written = text.drafted_by === "llm" ? "written by the drafting model"
      : (text.drafted_by === "template" ? "from the template" : "");
    const head = el("div", { class: "text-head" }, el("span", { text: label + (written ? " \u00b7 " + written : "") }));
    const body = el("p", { class: "text-body", text: text.text });
    const block = el("div", { class: "text", "data-step-index": text.step_index, "data-variant": text.variant || "" }, head);
    if (text.subject) block.append(el("p", { class: "subject", text: "Subject: " + text.subject }));
    block.append(body);
    if (item.status !== "pending") return block;
    const edit = el("button", { type: "button", class: "quiet edit" }, "Edit",
      el("span", { class: "visually-hidden", text: " " + label + " for " + name }));
    edit.disabled = !canCall;
    head.append(edit);
    edit.addEventListener("click", () => {
      const areaId = "edit-" + item.id + "-" + text.step_index + "-" + (text.variant || "");
      const area = el("textarea", { id: areaId, rows: 5 });
      area.value = text.text;
      const count = el("span", { class: "count", "aria-live": "polite" });
      const counted = () => { count.textContent = area.value.length + " characters"; };
      area.addEventListener("input", counted);
      counted();
      const save = el("button", { type: "button", class: "primary save" }, "Save",
        el("span", { class: "visually-hidden", text: " " + label + " for " + name }));
      const cancel = el("button", { type: "button", class: "cancel" }, "Cancel");
      const form = el("div", { class: "editor" },
        el("label", { for: areaId, class: "visually-hidden", text: label + " for " + name }),
        area, el("div", { class: "edit-actions" }, save, cancel, count));
      body.replaceWith(form);
      edit.hidden = true;
      area.focus();
      cancel.addEventListener("click", () => { form.replaceWith(body); edit.hidden = false; edit.focus(); });
      save.addEventListener("click", async () => {
        const edited = { step_index: text.step_index, text: area.value };
        if (text.variant) edited.variant = text.variant;
        save.disabled = cancel.disabled = true;
        show(outcome, "Saving\u2026", "");
        try {
          await callTool("service_update_approval",
            { id: item.id, texts: [edited], idempotency_key: freshKey() });
          say("Saved " + name + ": the item waits with the new text.", "ok");
          await refresh();
        } catch (error) {
          save.disabled = cancel.disabled = false;
          show(outcome, error.message, "bad");
        }
      });
    });
    return block;
  }

  function show(node, text, kind) {
    node.textContent = text;
    node.className = "outcome " + (kind || "");
    node.setAttribute("role", kind === "bad" ? "alert" : "status");
  }

  function approvedSentence(name, done) {
    // Only an answer that says it approved the item counts (a host could relay something else,
    // such as a question it did not put to the person).
    if (typeof done.approved !== "number") {
      return { text: "The host did not say whether " + name + " was approved; the list below shows what stands.", kind: "bad" };
    }
    const refused = (done.not_approved || [])[0];
    if (refused) {
      const reason = refused.reason === "do_not_contact"
        ? "the person was marked do-not-contact since it was proposed"
        : refused.reason;
      return { text: "Not approved " + name + ": " + reason + ".", kind: "bad" };
    }
    const reply = (done.replies || [])[0];
    if (reply) return { text: "Approved " + name + ": the reply goes out from " + when(reply.send_at) + ".", kind: "ok" };
    const enrolled = (done.items || [])[0];
    const from = enrolled ? ", the first step from " + when(enrolled.next_step_at) : "";
    return { text: "Approved " + name + ": it goes out within the sender's hours and limits" + from + ".", kind: "ok" };
  }

  async function decide(article, item, name, decision, outcome) {
    const buttons = Array.from(article.querySelectorAll("button"));
    buttons.forEach((button) => { button.disabled = true; });
    show(outcome, decision === "approve" ? "Approving\u2026" : "Rejecting\u2026", "");
    try {
      const tool = decision === "approve" ? "service_approve_outreach" : "service_reject_outreach";
      const done = await callTool(tool, { ids: [item.id], idempotency_key: freshKey() });
      const sentence = decision === "approve"
        ? approvedSentence(name, done || {})
        : typeof (done || {}).rejected === "number"
          ? { text: "Rejected " + name + ": nothing of it will be sent.", kind: "ok" }
          : { text: "The host did not say whether " + name + " was rejected; the list below shows what stands.", kind: "bad" };
      say(sentence.text, sentence.kind);
      await refresh();
      noticeNode.focus();
    } catch (error) {
      buttons.forEach((button) => { button.disabled = !canCall; });
      show(outcome, error.message, "bad");
    }
  }

  async function refresh() {
    refreshButton.disabled = true;
    try {
      render(await callTool("service_list_approvals", listArguments));
    } catch (error) {
      say("The queue could not be read again: " + error.message, "bad");
    } finally {
      refreshButton.disabled = !canCall;
    }
  }

  refreshButton.addEventListener("click", refresh);

  handlers.set("ui/notifications/tool-input", (params) => {
    const args = Object.assign({}, params.arguments || {});
    delete args.idempotency_key;
    listArguments = args;
  });
  handlers.set("ui/notifications/tool-result", (result) => {
    if (result.isError) {
      summaryNode.textContent = "The queue could not be read.";
      say(sentenceOf(result), "bad");
      return;
    }
    render(dataOf(result));
  });
  handlers.set("ui/notifications/tool-cancelled", (params) => {
    summaryNode.textContent = "The call was cancelled" + (params.reason ? ": " + params.reason : ".");
  });
  handlers.set("ui/notifications/host-context-changed", applyContext);

  applyContext({});
  request("ui/initialize", {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: APP_INFO,
    appCapabilities: { availableDisplayModes: ["inline"] },
  }).then((result) => {
    hostCapabilities = (result && result.hostCapabilities) || {};
    canCall = Boolean(hostCapabilities.serverTools);
    applyContext((result && result.hostContext) || {});
    refreshButton.disabled = !canCall;
    if (!canCall) {
      say("This host does not let the view call tools: ask the assistant to approve, reject or edit.", "info");
    }
    notify("ui/notifications/initialized", {});
    watchSize();
  }, (error) => {
    say("The host did not start the view: " + error.message, "bad");
  });
})();
</script>
</body>
</html>
