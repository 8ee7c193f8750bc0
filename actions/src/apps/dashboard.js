  // ----- The dashboard -----
  const PERIODS = [["24h", "24 hours"], ["7d", "7 days"], ["30d", "30 days"], ["90d", "90 days"],
    ["365d", "365 days"], ["all", "All time"]];
  const TIERS = [["a", "Tier A"], ["b", "Tier B"], ["c", "Tier C"], ["d", "Tier D"],
    ["disqualified", "Disqualified"], ["unscored", "Not scored"]];
  const LIMITS = [["connection_requests_per_day", "invitations today"],
    ["connection_requests_per_week", "invitations this week"], ["messages_per_day", "messages today"],
    ["profile_views_per_day", "profile views today"], ["inmails_per_day", "InMails today"]];
  const figuresNode = document.getElementById("figures");
  const windowNode = document.getElementById("window");
  const noticeNode = document.getElementById("notice");
  const periodsNode = document.getElementById("periods");
  let canCall = true;
  let shownPeriod = "30d";

  function say(text, kind) {
    noticeNode.textContent = text;
    noticeNode.className = "notice " + (kind || "info");
  }

  const number = (value) => (typeof value === "number" ? value.toLocaleString(hostContext.locale || undefined) : "\u2014");
  const percent = (rate) => (typeof rate === "number" ? Math.round(rate * 1000) / 10 + "%" : "\u2014");
  const signed = (value) => (typeof value === "number" && value > 0 ? "+" + number(value) : number(value));

  function age(hours) {
    if (typeof hours !== "number") return "";
    if (hours < 1) return "the oldest under an hour";
    if (hours < 48) return "the oldest " + number(hours) + " h";
    return "the oldest " + number(Math.floor(hours / 24)) + " days";
  }

  function periodButtons() {
    periodsNode.replaceChildren();
    for (const [value, label] of PERIODS) {
      const button = el("button", { type: "button", "aria-pressed": String(value === shownPeriod), "data-period": value, text: label });
      button.disabled = !canCall;
      button.addEventListener("click", () => choose(value));
      periodsNode.append(button);
    }
  }

  async function choose(period) {
    for (const button of periodsNode.querySelectorAll("button")) button.disabled = true;
    say("Reading the figures for " + period + "\u2026", "info");
    try {
      render(await callTool("service_get_dashboard", { period }));
      say("", "info");
    } catch (error) {
      say("The figures could not be read: " + error.message, "bad");
      periodButtons();
    }
  }

  function kpi(label, value, detail) {
    return el("div", { class: "kpi" }, el("dt", { text: label }),
      el("dd", null, el("span", { class: "value", text: value }), detail ? el("span", { class: "detail", text: detail }) : null));
  }

  function table(caption, headings, rows, empty) {
    const section = el("section", { class: "panel", "aria-label": caption }, el("h2", { text: caption }));
    if (!rows.length) {
      section.append(el("p", { class: "none", text: empty }));
      return section;
    }
    section.append(el("table", null,
      el("thead", null, el("tr", null, ...headings.map((heading) => el("th", { scope: "col", text: heading })))),
      el("tbody", null, ...rows.map((cells) => el("tr", null, ...cells.map((cell, index) =>
        index === 0 ? el("th", { scope: "row", text: cell }) : (cell instanceof Node ? el("td", { class: "wrap" }, cell) : el("td", { text: cell }))))))));
    return section;
  }

  function tiers(byTier) {
    const counts = TIERS.map(([key, label]) => [key, label, Number(byTier[key]) || 0]);
    const total = counts.reduce((sum, [, , count]) => sum + count, 0);
    const section = el("section", { class: "panel", "aria-label": "Prospects by tier" }, el("h2", { text: "Prospects by tier" }));
    const bar = el("div", { class: "tiers", "aria-hidden": "true" });
    for (const [key, , count] of counts) {
      if (count === 0) continue;
      const part = el("span", { class: "t-" + key });
      part.style.width = (count * 100 / total) + "%";
      bar.append(part);
    }
    section.append(bar, el("ul", { class: "legend" }, ...counts.map(([key, label, count]) =>
      el("li", null, el("i", { class: "t-" + key, "aria-hidden": "true" }), label + ": " + number(count)))));
    return section;
  }

  function usage(sender) {
    const limits = sender.usage || {};
    const parts = [];
    for (const [key, label] of LIMITS) {
      const limit = limits[key];
      if (!limit) continue;
      parts.push(number(limit.used) + "/" + number(limit.limit) + " " + label);
    }
    const full = LIMITS.some(([key]) => limits[key] && limits[key].limit > 0 && limits[key].used >= limits[key].limit);
    return el("span", { class: full ? "full" : "", text: parts.join(", ") });
  }

  function render(data) {
    if (!data || !data.prospects) {
      windowNode.textContent = "The answer held no dashboard.";
      return;
    }
    const period = data.period || {};
    shownPeriod = period.name || shownPeriod;
    periodButtons();
    const label = (PERIODS.find(([value]) => value === shownPeriod) || [shownPeriod, shownPeriod])[1];
    windowNode.textContent = period.starts_at
      ? "Last " + label + ": " + when(period.starts_at) + " to " + when(period.ends_at) + ". Totals and tiers are current."
      : "All time, to " + when(period.ends_at) + ".";

    const outreach = data.outreach || {};
    const approvals = data.approvals || {};
    const credits = data.credits || {};
    const agents = data.agents || {};
    const hooks = data.webhooks || {};
    const kpis = el("dl", { class: "kpis" },
      kpi("Prospects", number(data.prospects.total), signed(data.prospects.new) + " new"),
      kpi("Lists", number((data.lists || {}).total), signed((data.lists || {}).new) + " new"),
      kpi("Waiting for approval", number(approvals.waiting),
        approvals.waiting ? number(approvals.proposed_by_agents) + " from agents, " + age(approvals.oldest_age_hours) : "nothing waits"),
      kpi("Invitations sent", number(outreach.invitations_sent), number(outreach.invitations_accepted) + " accepted (" + percent(outreach.acceptance_rate) + ")"),
      kpi("Messages sent", number(outreach.messages_sent), number(outreach.profile_views) + " profile views"),
      kpi("Replies", number(outreach.replies), percent(outreach.reply_rate) + " reply rate"),
      kpi("Credits", number(credits.balance), number(credits.granted) + " granted, " + number(credits.spent) + " spent"),
      kpi("Imports", number((data.imports || {}).count), number((data.imports || {}).rows_created) + " prospects created"),
      kpi("Scoring runs", number((data.scoring_runs || {}).count), number((data.scoring_runs || {}).prospects_scored) + " prospects scored"),
      kpi("Agent runs", number(agents.runs), number(agents.proposed) + " proposed, " + number(agents.credits_spent) + " credits"),
      kpi("Webhooks", number(hooks.endpoints), number(hooks.deliveries_succeeded) + " delivered, " + number(hooks.deliveries_failed) + " failed, " + number(hooks.deliveries_pending) + " pending"));

    // The answer is held to 100 KB: what it left out is said, never hidden.
    const leftOut = data.left_out || {};
    const missing = [["sequences", leftOut.sequences], ["agents", leftOut.agents], ["sender accounts", leftOut.senders]]
      .filter(([, count]) => count > 0)
      .map(([what, count]) => number(count) + " " + what);
    if (missing.length) {
      say("The least active " + missing.join(", ") + " are left out to keep the answer small; " +
        "ask for one sequence's figures with service_get_sequence_stats.", "info");
    }
    figuresNode.replaceChildren(kpis, tiers(data.prospects.by_tier || {}),
      table("Sequences", ["Sequence", "Invitations", "Accepted", "Acceptance", "Messages", "Replies", "Reply rate"],
        (outreach.by_sequence || []).map((row) => [row.name, number(row.invitations_sent), number(row.invitations_accepted),
          percent(row.acceptance_rate), number(row.messages_sent), number(row.replies), percent(row.reply_rate)]),
        "No sequence sent anything in this period."),
      table("Sender accounts", ["Sender", "Invitations", "Messages", "Views", "Replies", "Against the limits"],
        (outreach.by_sender || []).map((row) => [row.name, number(row.invitations_sent), number(row.messages_sent),
          number(row.profile_views), number(row.replies), usage(row)]),
        "No sender account yet."),
      table("Approval queue by age", ["Waiting", "Items"],
        approvals.by_age ? [["Under a day", number(approvals.by_age.under_1_day)],
          ["One to three days", number(approvals.by_age.from_1_to_3_days)],
          ["Three days or more", number(approvals.by_age.over_3_days)]] : [],
        "Nothing waits."),
      table("Agents", ["Agent", "Runs", "Prospects processed", "Credits"],
        (agents.by_agent || []).map((row) => [row.agent_name, number(row.runs), number(row.prospects_processed), number(row.credits_spent)]),
        "No agent ran in this period."),
      table("Credits spent", ["Spent by", "Credits"],
        (credits.spent_by_source || []).map((row) => [String(row.source).replace(/_/g, " "), number(row.credits)]),
        "No credits spent in this period."));
  }

  handlers.set("ui/notifications/tool-input", (params) => {
    const period = params.arguments && params.arguments.period;
    if (typeof period === "string") shownPeriod = period;
  });
  handlers.set("ui/notifications/tool-result", (result) => {
    if (result.isError) {
      windowNode.textContent = "The figures could not be read.";
      say(sentenceOf(result), "bad");
      return;
    }
    render(dataOf(result));
  });
  handlers.set("ui/notifications/tool-cancelled", (params) => {
    windowNode.textContent = "The call was cancelled" + (params.reason ? ": " + params.reason : ".");
  });
  handlers.set("ui/notifications/host-context-changed", applyContext);

  applyContext({});
  periodButtons();
  request("ui/initialize", {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: APP_INFO,
    appCapabilities: { availableDisplayModes: ["inline"] },
  }).then((result) => {
    hostCapabilities = (result && result.hostCapabilities) || {};
    canCall = Boolean(hostCapabilities.serverTools);
    applyContext((result && result.hostContext) || {});
    periodButtons();
    notify("ui/notifications/initialized", {});
    watchSize();
  }, (error) => {
    say("The host did not start the view: " + error.message, "bad");
  });
})();
</script>
</body>
</html>
