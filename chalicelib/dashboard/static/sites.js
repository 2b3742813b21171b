/* The dashboard's Sites tab (docs/tracker.md): a site's visitors and page views over the
   window as a chart, then its top pages, referrers, sources and devices, and a note when the
   window reaches past what is kept (hourly visitors are kept shorter than page views). It uses
   the helpers dashboard.js exposes as window.tallyDashboard and loads when that tab is shown. */
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
  let chosen = null;
  let shown = 0; // the latest request: an older answer arriving late is dropped

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

  function drawSeries(el, starts, visitors, pageviews) {
    if (el.plot) el.plot.destroy();
    el.textContent = "";
    const fg = getComputedStyle(document.body).color;
    const accent = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#1d4ed8";
    const axis = { stroke: fg, grid: { stroke: "rgba(128,128,128,0.2)" }, ticks: { stroke: "rgba(128,128,128,0.4)" } };
    el.plot = new uPlot(
      {
        width: Math.max(el.clientWidth, 260),
        height: 240,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
        series: [
          {},
          { label: "Visitors", stroke: "#16a34a", width: 2 },
          { label: "Page views", stroke: accent, width: 2, fill: "rgba(96,165,250,0.18)" },
        ],
        axes: [axis, axis],
      },
      [starts, visitors, pageviews],
      el,
    );
    el.dataset.points = String(starts.length);
  }

  async function showSite(site) {
    const { getJson, failure, cell, enc } = board();
    const name = segment("site:" + site);
    const win = windowValue();
    const resolution = RESOLUTION[win] || "hour";
    const ticket = ++shown;
    try {
      const [summary, views, uniques] = await Promise.all([
        getJson(`/sites/${segment(site)}/summary?window=${enc(win)}&limit=10`),
        getJson(`/counters/${name}/histogram?window=${enc(win)}&resolution=${resolution}`),
        getJson(`/hyperloglog/${name}/histogram?window=${enc(win)}&resolution=${resolution}`),
      ]);
      if (ticket !== shown) return;
      $("site-detail").hidden = false;
      $("site-title").textContent = site;
      $("site-visitors").textContent = summary.visitors.toLocaleString();
      $("site-pageviews").textContent = summary.pageviews.toLocaleString();
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

  document.addEventListener("tally:show", (event) => {
    if (event.detail === "sites") loadSites();
  });
  $("window").addEventListener("change", () => {
    if (document.body.dataset.view === "sites" && chosen) showSite(chosen);
  });
  $("site-select").addEventListener("change", (event) => {
    chosen = event.target.value;
    showSite(chosen);
  });
})();
