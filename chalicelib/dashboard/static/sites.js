/* The dashboard's Sites tab (docs/tracker.md, docs/dashboard.md): a site's visitors right now
   (refreshed every REALTIME_MS), its visitors and page views over the window in the chosen time
   zone as a chart, against the previous period when asked, then its goals, its top pages,
   referrers, sources and devices, a note when the window reaches past what is kept, and its
   settings (time zone, goals: an admin key edits them). It uses the helpers dashboard.js exposes
   as window.tallyDashboard and loads when that tab is shown. */
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const LISTS = [
    ["pages", "path", "site-pages"],
    ["referrers", "referrer", "site-referrers"],
    ["sources", "source", "site-sources"],
    ["devices", "device", "site-devices"],
  ];
  const RESOLUTION = { "1h": "hour", "24h": "hour", "7d": "hour", "30d": "day" };
  const REALTIME_MS = 10_000;
  let chosen = null;
  let shown = 0; // the latest request: an older answer arriving late is dropped
  let zoneOf = {}; // the zone picked for a site in this page; else its settings' or the browser's
  let settings = null; // the chosen site's settings (null: not readable with this key)
  let draft = []; // the goals being edited
  let nowTimer = null;

  const board = () => window.tallyDashboard;
  const segment = (name) => board().segment(name);
  const windowValue = () => $("window").value;
  const when = (iso) => new Date(iso).toLocaleString();

  // What the window asks for and is no longer kept: one sentence per answer that says so.
  function notKept(summary, views, uniques, resolution) {
    const notes = [];
    if (summary.complete === false) notes.push("The totals and top lists count only what is still kept.");
    if (views.complete === false) notes.push(`Page views before ${when(views.retained_from)} are no longer kept.`);
    if (uniques.complete === false) {
      notes.push(`Visitors per ${resolution} before ${when(uniques.retained_from)} are no longer kept: the chart shows none before then.`);
    }
    return notes.join(" ");
  }

  // The zone a site's answers are asked in: the one picked here, else the site's, else the browser's.
  function zoneFor(site) {
    if (zoneOf[site]) return zoneOf[site];
    return settings && settings.site === site && settings.updated ? settings.timezone : board().BROWSER_ZONE;
  }

  const change = (now, before) => board().change(now, before);

  async function showNow(site) {
    const { getJson } = board();
    try {
      const now = await getJson(`/sites/${segment(site)}/realtime`);
      if (site !== chosen) return;
      $("site-now-visitors").textContent = (now.visitors_exact ? "" : "about ") + now.visitors.toLocaleString();
      $("site-now").dataset.time = now.time;
    } catch (err) {
      $("site-now-visitors").textContent = "–";
    }
  }

  function keepNowFresh() {
    clearInterval(nowTimer);
    nowTimer = setInterval(() => {
      if (document.body.dataset.view === "sites" && chosen && !document.hidden) showNow(chosen);
    }, REALTIME_MS);
  }

  async function loadSettings(site) {
    const { getQuietly, ApiError } = board();
    try {
      settings = await getQuietly(`/sites/${segment(site)}`);
    } catch (err) {
      if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) throw err;
      settings = null;
    }
    showSettings();
  }

  function showSettings() {
    const form = $("site-settings");
    if (!settings) {
      form.hidden = true;
      return;
    }
    form.hidden = false;
    $("settings-zone").textContent = settings.updated ? settings.timezone : `${settings.timezone} (not set)`;
    draft = settings.goals.map((g) => ({ name: g.name, kind: g.event !== undefined ? "event" : "page", target: g.event ?? g.page }));
    drawDraft();
  }

  function drawDraft() {
    const tbody = $("settings-goals").tBodies[0];
    tbody.textContent = "";
    draft.forEach((goal, index) => {
      const row = tbody.insertRow();
      const name = document.createElement("input");
      name.value = goal.name;
      name.setAttribute("aria-label", "Goal name");
      name.addEventListener("input", () => (goal.name = name.value));
      row.insertCell().append(name);
      const kind = document.createElement("select");
      kind.setAttribute("aria-label", "Goal kind");
      for (const [value, label] of [["event", "custom event"], ["page", "page path"]]) kind.add(new Option(label, value));
      kind.value = goal.kind;
      kind.addEventListener("change", () => (goal.kind = kind.value));
      row.insertCell().append(kind);
      const target = document.createElement("input");
      target.value = goal.target;
      target.setAttribute("aria-label", "Event or page path");
      target.placeholder = "signup or /pricing";
      target.addEventListener("input", () => (goal.target = target.value));
      row.insertCell().append(target);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "Remove";
      remove.addEventListener("click", () => {
        draft.splice(index, 1);
        drawDraft();
      });
      row.insertCell().append(remove);
    });
  }

  async function saveSettings(timezone) {
    const { sendJson, say, failure } = board();
    const goals = draft.map((g) => ({ name: g.name.trim(), [g.kind]: g.target.trim() }));
    try {
      settings = await sendJson("PUT", `/sites/${segment(chosen)}`, { timezone, goals }, true);
      say("settings-message", "Saved.");
      showSettings();
      await showSite(chosen, false);
    } catch (err) {
      failure("settings-message", err);
    }
  }

  async function loadSites() {
    const { getJson, say, failure } = board();
    const select = $("site-select");
    try {
      const body = await getJson("/sites?limit=1000");
      const names = body.sites.map((entry) => entry.site);
      select.textContent = "";
      for (const name of names) select.add(new Option(name, name));
      if (names.length === 0) {
        say("sites-message", "No site has sent page views yet: add tally.js to a page (docs/tracker.md).");
        $("site-detail").hidden = true;
        return;
      }
      say("sites-message", "");
      chosen = names.includes(chosen) ? chosen : names[0];
      select.value = chosen;
      await showSite(chosen);
    } catch (err) {
      failure("sites-message", err);
    }
  }

  function drawSeries(el, starts, visitors, pageviews, zone) {
    const lines = [
      { label: "Visitors", stroke: "#16a34a", width: 2 },
      { label: "Page views", stroke: board().accent(), width: 2, fill: "rgba(96,165,250,0.18)" },
    ];
    // The axis reads the site's zone, as its buckets are.
    board().plot(el, starts, lines, [visitors, pageviews], zone);
  }

  async function showSite(site, withSettings = true) {
    const { getJson, failure, cell, enc } = board();
    const name = segment("site:" + site);
    const win = windowValue();
    const resolution = RESOLUTION[win] || "hour";
    const ticket = ++shown;
    try {
      if (withSettings) await loadSettings(site);
      const zone = zoneFor(site);
      board().fillZones($("site-zone"));
      if (![...$("site-zone").options].some((o) => o.value === zone)) $("site-zone").add(new Option(zone, zone));
      $("site-zone").value = zone;
      const local = `&tz=${enc(zone)}`;
      const compare = $("site-compare").checked ? "&compare=previous_period" : "";
      showNow(site);
      const [summary, views, uniques] = await Promise.all([
        getJson(`/sites/${segment(site)}/summary?window=${enc(win)}&limit=10${local}${compare}`),
        getJson(`/counters/${name}/histogram?window=${enc(win)}&resolution=${resolution}${local}`),
        getJson(`/hyperloglog/${name}/histogram?window=${enc(win)}&resolution=${resolution}${local}`),
      ]);
      if (ticket !== shown) return;
      $("site-detail").hidden = false;
      $("site-title").textContent = site;
      $("site-visitors").textContent = summary.visitors.toLocaleString();
      $("site-pageviews").textContent = summary.pageviews.toLocaleString();
      const previous = summary.previous || {};
      $("site-visitors-change").textContent = change(summary.visitors, previous.visitors);
      $("site-pageviews-change").textContent = change(summary.pageviews, previous.pageviews);
      showGoals(summary.goals || [], previous.goals || []);
      $("site-bots").textContent = `${summary.bots.toLocaleString()} page views refused as bots`;
      const note = notKept(summary, views, uniques, resolution);
      $("site-retained").textContent = note;
      $("site-retained").hidden = note === "";
      const visitorsAt = new Map(uniques.buckets.map((b) => [Date.parse(b.start), b.cardinality]));
      const starts = views.buckets.map((b) => Date.parse(b.start));
      // Before what is kept, no value (a gap in the line), not a zero.
      const keptFrom = uniques.complete === false ? Date.parse(uniques.retained_from) : -Infinity;
      drawSeries(
        $("site-chart"),
        starts.map((t) => t / 1000),
        starts.map((t) => (t < keptFrom ? null : visitorsAt.get(t) || 0)),
        views.buckets.map((b) => b.count),
        zone,
      );
      for (const [field, label, table] of LISTS) {
        const tbody = $(table).tBodies[0];
        tbody.textContent = "";
        for (const entry of summary[field]) {
          const row = tbody.insertRow();
          cell(row, entry[label]);
          cell(row, entry.pageviews.toLocaleString(), "num");
        }
        $(table).hidden = summary[field].length === 0;
      }
    } catch (err) {
      failure("sites-message", err);
    }
  }

  function showGoals(goals, before) {
    const { cell } = board();
    const tbody = $("site-goals").tBodies[0];
    tbody.textContent = "";
    const previous = new Map(before.map((g) => [g.name, g]));
    for (const goal of goals) {
      const row = tbody.insertRow();
      row.dataset.goal = goal.name;
      cell(row, goal.name);
      cell(row, goal.event !== undefined ? `event ${goal.event}` : `page ${goal.page}`);
      const was = previous.get(goal.name);
      cell(row, goal.conversions.toLocaleString(), "num").title = was ? change(goal.conversions, was.conversions) : "";
      cell(row, goal.visitors.toLocaleString(), "num");
      cell(row, `${(goal.conversion_rate * 100).toFixed(1)}%`, "num");
    }
    $("site-goals").hidden = goals.length === 0;
  }

  document.addEventListener("tally:show", (event) => {
    if (event.detail === "sites") {
      loadSites();
      keepNowFresh();
    }
  });
  $("site-zone").addEventListener("change", (event) => {
    zoneOf[chosen] = event.target.value;
    showSite(chosen, false);
  });
  $("site-compare").addEventListener("change", () => chosen && showSite(chosen, false));
  $("settings-add-goal").addEventListener("click", () => {
    draft.push({ name: "", kind: "event", target: "" });
    drawDraft();
  });
  $("settings-use-zone").addEventListener("click", () => saveSettings($("site-zone").value));
  $("site-settings").addEventListener("submit", (event) => {
    event.preventDefault();
    saveSettings(settings ? settings.timezone : "UTC");
  });
  $("window").addEventListener("change", () => {
    if (document.body.dataset.view === "sites" && chosen) showSite(chosen);
  });
  $("site-select").addEventListener("change", (event) => {
    chosen = event.target.value;
    showSite(chosen);
  });
})();
