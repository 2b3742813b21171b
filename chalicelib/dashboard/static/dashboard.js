/* Tally's dashboard: reads the API of the app that serves it and draws with uPlot. */
(() => {
  "use strict";

  const KEY_STORAGE = "tally.apiKey";
  const WINDOWS = {
    "1h": { resolution: "minute", label: "1 h" },
    "24h": { resolution: "hour", label: "24 h" },
    "7d": { resolution: "hour", label: "7 d" },
    "30d": { resolution: "day", label: "30 d" },
  };
  const MINUTE = 60_000;
  const HOUR = 60 * MINUTE;
  const DAY = 24 * HOUR;
  // A URL's views over the window are drawn from this many ranged counts (GET /views).
  const VIEW_SERIES = {
    "1h": { buckets: 12, ms: 5 * MINUTE, label: "5 min" },
    "24h": { buckets: 24, ms: HOUR, label: "hour" },
    "7d": { buckets: 28, ms: 6 * HOUR, label: "6 h" },
    "30d": { buckets: 30, ms: DAY, label: "day" },
  };
  const TOP_URLS = 100;
  const TOP_VALUES = 10;
  const BUSIEST_OF = 20; // the dashboard opens on the busiest of the first counters listed
  const DIMENSIONS_STORAGE = "tally.dimensions";
  const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const $ = (id) => document.getElementById(id);
  // Where the API is: this script is <API>dashboard/dashboard.js (dashboard/assets.py), and the
  // API is under a base path (the stage's name on API Gateway, /api/, or a custom domain's
  // mapping), so every path below ("/counters", written as the API documents it) goes there.
  const API = new URL("../", document.currentScript.src);
  const apiUrl = (path) => new URL(path.replace(/^\/+/, ""), API).href;
  // What is shown: the tab (document.body.dataset.view), the window, the time zone, whether to
  // compare with the previous period, the counter and the dimension it is broken down by, the
  // URL and the unique-count name. All of it is kept in the address bar's fragment (see "the
  // view in the address bar"), so a copied URL reopens it.
  const state = {
    window: "24h",
    tz: BROWSER_ZONE,
    compare: false,
    counter: null,
    by: null,
    url: null,
    unique: null,
    shown: new Set(),
    cursors: {},
  };

  // Only the latest load of a panel may paint it: an earlier answer arriving late (a click
  // while the first load is still out) would otherwise overwrite the newer one, or leave the
  // chart marked loaded under a total that still says "Loading…".
  const loads = {};
  function begin(panel, chart) {
    const n = (loads[panel] = (loads[panel] || 0) + 1);
    delete chart.dataset.window; // the chart is not showing the current choice until it lands
    return () => loads[panel] === n;
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // -- the API key: from the URL fragment (#key=...) or the key panel, kept for this tab ------

  function keyFromFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    const key = params.get("key");
    if (!key) return;
    sessionStorage.setItem(KEY_STORAGE, key);
    params.delete("key");
    // Keep the key out of the address bar and the history.
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }

  function askForKey(status) {
    const panel = $("key-panel");
    const hadKey = Boolean(sessionStorage.getItem(KEY_STORAGE));
    $("key-reason").textContent = hadKey
      ? `The API refused the key (HTTP ${status}): enter a key with read access.`
      : `This API needs a key (HTTP ${status}): enter one with read access.`;
    if (panel.hidden) {
      panel.hidden = false;
      $("key-input").focus();
    }
  }

  // API Gateway (and Chalice's local server) answer a route they do not have with a 403
  // "Missing Authentication Token": that is a missing route, not a refused key.
  async function routeMissing(response) {
    try {
      const body = await response.clone().json();
      return (body.message || body.Message) === "Missing Authentication Token";
    } catch (err) {
      return false;
    }
  }

  // `init` as fetch takes it; `quiet`: a refused key is the caller's answer (an admin-only
  // route read with a read key), not a reason to ask for another key.
  async function api(path, init = {}, quiet = false) {
    const headers = { Accept: "application/json", ...(init.headers || {}) };
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.Authorization = "Bearer " + key;
    let response;
    try {
      response = await fetch(apiUrl(path), { ...init, headers });
    } catch (err) {
      throw new ApiError(0, "the API cannot be reached");
    }
    if (response.status === 403 && (await routeMissing(response))) {
      throw new ApiError(404, "this server has no such route");
    }
    if ((response.status === 401 || response.status === 403) && !quiet) {
      askForKey(response.status);
      throw new ApiError(response.status, "the API needs a key");
    }
    if (!response.ok) {
      let message = response.statusText;
      try {
        message = (await response.json()).Message || message;
      } catch (err) {
        /* not a Chalice error body */
      }
      throw new ApiError(response.status, message);
    }
    return response;
  }

  const getJson = async (path) => (await api(path)).json();
  const sendJson = async (method, path, body, quiet = false) =>
    (await api(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }, quiet)).json();
  const getQuietly = async (path) => (await api(path, {}, true)).json();
  const enc = encodeURIComponent;
  // A name in a path: its characters (A-Z a-z 0-9 _ . : -) need no escape. API Gateway's REST
  // APIs hand path parameters to the function still percent-encoded, so a `%3A` would reach the
  // name check as three characters and be refused.
  const segment = (name) => enc(name).replace(/%3A/gi, ":");

  // -- the view in the address bar: #view=...&window=...&counter=...&by=...&url=...&name=... --

  const LINKED = ["view", "window", "tz", "compare", "counter", "by", "url", "name"];

  function linkedView() {
    const params = new URLSearchParams(location.hash.slice(1));
    return Object.fromEntries(LINKED.filter((k) => params.get(k)).map((k) => [k, params.get(k)]));
  }

  function link() {
    const values = {
      view: document.body.dataset.view,
      window: state.window,
      tz: state.tz === BROWSER_ZONE ? null : state.tz,
      compare: state.compare ? "previous_period" : null,
      counter: state.counter,
      by: state.by,
      url: state.url,
      name: state.unique,
    };
    const params = new URLSearchParams();
    for (const k of LINKED) if (values[k]) params.set(k, values[k]);
    history.replaceState(null, "", location.pathname + location.search + "#" + params.toString());
  }

  // -- small helpers -----------------------------------------------------------------------

  function say(id, text, isError = false) {
    const el = $(id);
    el.textContent = text;
    el.classList.toggle("error", isError);
  }

  function failure(id, err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      say(id, "Waiting for an API key.");
    } else {
      say(id, `Could not load: ${err.message}`, true);
    }
  }

  function when(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  }

  // -- time zones and comparisons: shared with sites.js ----------------------------------------

  // A zone picker's choices: UTC, the browser's zone, and every zone the browser knows.
  function fillZones(select) {
    if (select.options.length) return;
    const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
    for (const zone of new Set(["UTC", BROWSER_ZONE, ...zones])) select.add(new Option(zone, zone));
  }

  // "+12% vs previous (5)" against the previous period, or "" without one.
  function change(now, before) {
    if (before === undefined || before === null) return "";
    if (before === 0) return now === 0 ? "±0% vs previous" : "new vs previous";
    const pct = Math.round(((now - before) / before) * 100);
    return `${pct > 0 ? "+" : pct < 0 ? "−" : "±"}${Math.abs(pct)}% vs previous (${before.toLocaleString()})`;
  }

  // What a windowed read of the counters, unique counts and views tabs adds to its query: the
  // zone its buckets and calendar periods are in, and (for a total) the previous period.
  const zoned = () => `&tz=${enc(state.tz)}`;
  const compared = () => zoned() + (state.compare ? "&compare=previous_period" : "");

  function cell(row, text, className) {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function pickButton(row, text, onPick) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "pick";
    button.textContent = text;
    button.addEventListener("click", () => {
      for (const other of row.parentElement.rows) other.removeAttribute("aria-current");
      row.setAttribute("aria-current", "true");
      onPick();
    });
    row.insertCell().append(button);
  }

  // One series a line over the times `xs` (seconds), the x-axis labelled in `zone` (the
  // browser's own without one); `lines` are uPlot series, each with its values in `data`.
  function plot(el, xs, lines, data, zone) {
    if (el.plot) {
      el.plot.destroy();
      el.plot = null;
    }
    el.textContent = "";
    const fg = getComputedStyle(document.body).color;
    const axis = { stroke: fg, grid: { stroke: "rgba(128,128,128,0.2)" }, ticks: { stroke: "rgba(128,128,128,0.4)" } };
    const options = {
      width: Math.max(el.clientWidth, 260),
      height: 240,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      series: [{}, ...lines],
      axes: [axis, axis],
    };
    if (zone) options.tzDate = (ts) => uPlot.tzDate(new Date(ts * 1000), zone);
    el.plot = new uPlot(options, [xs, ...data], el);
    el.dataset.zone = zone || "";
    el.dataset.points = String(xs.length);
    el.hidden = false;
  }

  function accent() {
    return getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#1d4ed8";
  }

  function drawChart(el, buckets, valueOf, label, zone) {
    const xs = buckets.map((b) => Date.parse(b.start) / 1000);
    const line = { label, stroke: accent(), width: 2, fill: "rgba(96,165,250,0.18)", points: { show: xs.length <= 62 } };
    plot(el, xs, [line], [buckets.map(valueOf)], zone);
  }

  function clearChart(el) {
    if (el.plot) {
      el.plot.destroy();
      el.plot = null;
    }
    el.textContent = "";
    el.dataset.points = "0";
    el.hidden = true;
  }

  // Charts follow their box, not the window: a box resized while its tab was hidden (a phone
  // turned on another tab) is measured again when the tab is shown.
  const fitChart = new ResizeObserver((entries) => {
    for (const { target } of entries) {
      const width = Math.floor(target.clientWidth);
      if (target.plot && width && width !== target.plot.width) target.plot.setSize({ width, height: 240 });
    }
  });
  for (const el of document.querySelectorAll(".chart")) fitChart.observe(el);

  // A listing with a "More" button that follows the API's `next` cursor.
  async function loadPage({ name, path, field, table, more, message, empty, row, sort }) {
    const cursor = state.cursors[name];
    const separator = path.includes("?") ? "&" : "?";
    const body = await getJson(cursor ? `${path}${separator}cursor=${enc(cursor)}` : path);
    const tbody = $(table).tBodies[0];
    if (!cursor) tbody.textContent = "";
    const entries = body[field] || [];
    for (const entry of entries) row(tbody.insertRow(), entry);
    if (sort) sort(tbody);
    state.cursors[name] = body.next || null;
    $(more).hidden = !body.next;
    $(table).hidden = tbody.rows.length === 0;
    say(message, tbody.rows.length === 0 ? empty : "");
  }

  function pager(name, options) {
    const load = async (fromStart) => {
      if (fromStart) state.cursors[name] = null;
      try {
        await loadPage({ name, ...options });
      } catch (err) {
        failure(options.message, err);
      }
    };
    $(options.more).addEventListener("click", () => load(false));
    return () => load(true);
  }

  // -- counters -----------------------------------------------------------------------------

  const loadCounterPage = pager("counters", {
    path: "/counters?limit=100",
    field: "counters",
    table: "counter-list",
    more: "counters-more",
    message: "counters-message",
    empty: "No counters yet: send an event with POST /events and it shows here once counted.",
    row: (row, entry) => {
      row.dataset.name = entry.name;
      pickButton(row, entry.name, () => showCounter(entry.name));
      cell(row, when(entry.last_counted));
      if (entry.name === state.counter) row.setAttribute("aria-current", "true");
    },
  });

  async function loadCounters() {
    await loadCounterPage();
    if (!state.counter) await showBusiest();
  }

  // Something to look at from the start: the chart of the busiest counter in the window.
  async function showBusiest() {
    const rows = [...$("counter-list").tBodies[0].rows].slice(0, BUSIEST_OF);
    const names = rows.map((row) => row.dataset.name);
    if (!names.length) return;
    const counts = await Promise.all(
      names.map((name) =>
        getJson(`/counters/${segment(name)}?window=${state.window}${zoned()}`).then(
          (body) => body.count,
          () => -1,
        ),
      ),
    );
    if (state.counter) return; // chosen meanwhile
    let best = 0;
    counts.forEach((count, i) => {
      if (count > counts[best]) best = i;
    });
    showCounter(names[best]);
  }

  function markCurrent(tableId, attribute, value) {
    for (const row of $(tableId).tBodies[0].rows) {
      if (row.dataset[attribute] === value) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    }
  }

  async function showCounter(name) {
    if (state.counter !== name) {
      state.by = state.counter === null ? state.by : null; // a linked dimension belongs to its counter
      state.counter = name;
    }
    link();
    markCurrent("counter-list", "name", name);
    showBreakdowns(name);
    const spec = WINDOWS[state.window];
    const chart = $("counter-chart");
    const end = Date.now();
    const query = `window=${state.window}&end=${end}${zoned()}`;
    $("counter-title").textContent = name;
    say("counter-total", "Loading…");
    say("counter-change", "");
    const current = begin("counter", chart);
    try {
      const [count, histogram] = await Promise.all([
        getJson(`/counters/${segment(name)}?${query}${state.compare ? "&compare=previous_period" : ""}`),
        getJson(`/counters/${segment(name)}/histogram?${query}&resolution=${spec.resolution}`),
      ]);
      if (!current()) return;
      chart.dataset.counter = name;
      chart.dataset.end = String(end);
      chart.dataset.window = state.window;
      chart.dataset.resolution = spec.resolution;
      chart.dataset.total = String(count.count);
      let text = `${count.count.toLocaleString()} events in the last ${spec.label}`;
      if (count.complete === false) text += ` (events before ${when(count.retained_from)} are no longer kept)`;
      say("counter-total", text);
      say("counter-change", change(count.count, count.previous && count.previous.count));
      const empty = count.count === 0 && histogram.buckets.every((b) => b.count === 0);
      $("counter-empty").hidden = !empty;
      $("counter-empty").textContent = empty ? `No events for this counter in the last ${spec.label}.` : "";
      if (empty) clearChart(chart);
      else drawChart(chart, histogram.buckets, (b) => b.count, `events per ${spec.resolution}`, state.tz);
    } catch (err) {
      if (!current()) return;
      clearChart(chart);
      failure("counter-total", err);
    }
  }

  // -- a counter's breakdowns: one table per dimension it was broken down by -----------------
  //
  // The API does not list a counter's dimensions: the page offers the ones that gave values
  // for it before (kept in this browser), the linked one, and any the user types.

  function seenDimensions() {
    try {
      return JSON.parse(localStorage.getItem(DIMENSIONS_STORAGE) || "{}");
    } catch (err) {
      return {};
    }
  }

  function rememberDimension(counter, by) {
    const seen = seenDimensions();
    const dims = seen[counter] || [];
    if (dims.includes(by)) return;
    seen[counter] = [...dims, by].slice(-8);
    localStorage.setItem(DIMENSIONS_STORAGE, JSON.stringify(seen));
  }

  function dimensionsOf(counter) {
    const dims = [...(seenDimensions()[counter] || [])];
    if (state.by && !dims.includes(state.by)) dims.unshift(state.by);
    return dims;
  }

  async function showBreakdowns(counter) {
    $("breakdown").hidden = false;
    const list = $("breakdown-dimensions");
    list.textContent = "";
    for (const by of new Set(Object.values(seenDimensions()).flat())) list.append(new Option(by));
    const tables = $("breakdown-tables");
    tables.textContent = "";
    const dims = dimensionsOf(counter);
    say("breakdown-message", dims.length ? "" : "Type a dimension its events carry (for example provider) to break it down.");
    await Promise.all(dims.map((by) => showBreakdown(counter, by, tables)));
  }

  function sumsText(sums) {
    return Object.entries(sums || {})
      .map(([name, value]) => `${name} ${Number(value).toLocaleString()}`)
      .join(", ");
  }

  async function showBreakdown(counter, by, tables) {
    const table = document.createElement("table");
    table.dataset.by = by;
    table.className = "breakdown";
    table.createCaption().textContent = `By ${by}: loading…`;
    table.createTHead().innerHTML = '<tr><th scope="col"></th><th scope="col" class="num">Events</th><th scope="col">Sums</th></tr>';
    table.tHead.rows[0].cells[0].textContent = by;
    const tbody = table.createTBody();
    if (by === state.by) tables.prepend(table);
    else tables.append(table);
    try {
      const query = `by=${enc(by)}&window=${state.window}&limit=${TOP_VALUES}${zoned()}`;
      const body = await getJson(`/counters/${segment(counter)}/breakdown?${query}`);
      if (state.counter !== counter) return;
      for (const entry of body.values) {
        const row = tbody.insertRow();
        row.dataset.value = entry.value;
        cell(row, entry.value);
        cell(row, entry.count.toLocaleString(), "num");
        cell(row, sumsText(entry.sums));
      }
      if (body.others && body.others.count > 0) {
        const row = tbody.insertRow();
        row.className = "others";
        cell(row, body.others.values ? `${body.others.values.toLocaleString()} other values or none` : "without it");
        cell(row, body.others.count.toLocaleString(), "num");
        cell(row, "");
      }
      const exact = body.exact === false ? ` (ranking approximate: a value not listed has at most ${body.bound} events)` : "";
      table.caption.textContent = `By ${by}, in the last ${WINDOWS[state.window].label}${exact}`;
      if (body.values.length) rememberDimension(counter, by);
      else table.caption.textContent = `By ${by}: no events with this dimension in the last ${WINDOWS[state.window].label}`;
    } catch (err) {
      table.caption.textContent = `By ${by}: could not load (${err.message})`;
    }
  }

  $("breakdown-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const by = $("breakdown-by").value.trim();
    if (!by || !state.counter) return;
    state.by = by;
    $("breakdown-by").value = "";
    link();
    showBreakdowns(state.counter);
  });

  // -- unique counts ------------------------------------------------------------------------

  const UNIQUE_NAMES = {
    name: "uniques",
    path: "/hyperloglog",
    field: "names",
    table: "unique-list",
    more: "uniques-more",
    message: "uniques-message",
    empty: "No unique-count names yet: POST items to /hyperloglog/{name}.",
    row: (row, entry) => {
      pickButton(row, entry.name, () => showUnique(entry.name));
      cell(row, when(entry.last_seen));
    },
  };

  // The names listing is newer than the rest of the API: a server without it answers 400/404.
  async function loadUniqueNames(fromStart = true) {
    if (fromStart) state.cursors.uniques = null;
    try {
      await loadPage(UNIQUE_NAMES);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 400 || err.status === 404)) {
        $("unique-list").hidden = true;
        $("uniques-more").hidden = true;
        say("uniques-message", "This server cannot list unique-count names yet: type a name above to look it up.");
      } else {
        failure("uniques-message", err);
      }
    }
  }
  $("uniques-more").addEventListener("click", () => loadUniqueNames(false));

  async function showUnique(name) {
    state.unique = name;
    link();
    const spec = WINDOWS[state.window];
    const chart = $("unique-chart");
    $("unique-title").textContent = name;
    say("unique-total", "Loading…");
    say("unique-change", "");
    $("unique-empty").hidden = true;
    const current = begin("unique", chart);
    try {
      const count = await getJson(`/hyperloglog/${segment(name)}?window=${state.window}${compared()}`);
      if (!current()) return;
      const windowed = "window" in count || "start" in count;
      const n = Math.round(count.cardinality).toLocaleString();
      say(
        "unique-total",
        windowed
          ? `about ${n} different in the last ${spec.label}`
          : `about ${n} different, all time (this server does not count uniques over a window yet)`,
      );
      const before = count.previous && Math.round(count.previous.cardinality);
      say("unique-change", change(Math.round(count.cardinality), before));
    } catch (err) {
      if (!current()) return;
      failure("unique-total", err);
      clearChart(chart);
      return;
    }
    try {
      const resolution = spec.resolution === "day" ? "day" : "hour";
      const series = await getJson(
        `/hyperloglog/${segment(name)}/histogram?resolution=${resolution}&window=${state.window}${zoned()}`,
      );
      if (!current()) return;
      const buckets = series.buckets || [];
      const valueOf = (b) => Math.round(b.cardinality ?? b.count ?? 0);
      const empty = buckets.every((b) => valueOf(b) === 0);
      $("unique-empty").hidden = !empty;
      $("unique-empty").textContent = empty ? `No unique items for this name in the last ${spec.label}.` : "";
      chart.dataset.name = name;
      chart.dataset.window = state.window;
      if (empty) clearChart(chart);
      else drawChart(chart, buckets, valueOf, `different per ${resolution}`, state.tz);
    } catch (err) {
      if (!current()) return;
      clearChart(chart);
      $("unique-empty").hidden = false;
      if (err instanceof ApiError && (err.status === 400 || err.status === 404)) {
        $("unique-empty").textContent = "Unique counts over time are not available on this server yet.";
      } else {
        $("unique-empty").textContent = `Could not load the unique counts per day: ${err.message}`;
      }
    }
  }

  $("unique-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("unique-name").value.trim();
    if (name) showUnique(name);
  });

  // -- views: the top URLs of the window, and one URL's views over it ------------------------

  async function loadViews() {
    const spec = WINDOWS[state.window];
    const tbody = $("view-list").tBodies[0];
    try {
      const body = await getJson(`/views/top?window=${state.window}&limit=${TOP_URLS}${zoned()}`);
      tbody.textContent = "";
      for (const entry of body.urls) {
        const row = tbody.insertRow();
        row.dataset.url = entry.url;
        pickButton(row, entry.url, () => showViewUrl(entry.url));
        cell(row, entry.views.toLocaleString(), "num").dataset.views = String(entry.views);
        if (entry.url === state.url) row.setAttribute("aria-current", "true");
      }
      $("view-list").hidden = body.urls.length === 0;
      $("view-list").dataset.window = state.window;
      const exact = body.exact ? "" : ` (ranking approximate: a URL not listed has at most ${body.bound.toLocaleString()} views)`;
      $("view-list-caption").textContent = `Top URLs of the last ${spec.label}, most viewed first${exact}`;
      const others = body.others || { urls: 0, views: 0 };
      const atLeast = others.complete === false ? "at least " : "";
      say(
        "views-others",
        others.urls ? `and ${atLeast}${others.urls.toLocaleString()} more URLs with ${atLeast}${others.views.toLocaleString()} views` : "",
      );
      say("views-message", body.urls.length ? "" : `No views in the last ${spec.label}: POST /views sends some.`);
    } catch (err) {
      failure("views-message", err);
    }
    if (state.url) showViewUrl(state.url);
  }

  async function showViewUrl(url) {
    state.url = url;
    link();
    markCurrent("view-list", "url", url);
    const spec = WINDOWS[state.window];
    const series = VIEW_SERIES[state.window];
    const chart = $("view-chart");
    $("view-title").textContent = url;
    say("view-total", "Loading…");
    say("view-change", "");
    const current = begin("view", chart);
    const last = Math.floor(Date.now() / series.ms) * series.ms; // the bucket holding now
    const starts = Array.from({ length: series.buckets }, (_, i) => last - (series.buckets - 1 - i) * series.ms);
    try {
      const [total, ...buckets] = await Promise.all([
        getJson(`/views?url=${enc(url)}&window=${state.window}&end=${last + series.ms - 1}${compared()}`),
        ...starts.map((start) => getJson(`/views?url=${enc(url)}&start=${start}&end=${start + series.ms - 1}${zoned()}`)),
      ]);
      if (!current()) return;
      chart.dataset.url = url;
      chart.dataset.window = state.window;
      chart.dataset.total = String(total.views);
      say("view-total", `${total.views.toLocaleString()} views in the last ${spec.label}`);
      say("view-change", change(total.views, total.previous && total.previous.views));
      const empty = buckets.every((b) => b.views === 0);
      $("view-empty").hidden = !empty;
      $("view-empty").textContent = empty ? `No views of this URL in the last ${spec.label}.` : "";
      if (empty) clearChart(chart);
      else drawChart(chart, buckets, (b) => b.views, `views per ${series.label}`, state.tz);
    } catch (err) {
      if (!current()) return;
      clearChart(chart);
      failure("view-total", err);
    }
  }

  // -- reports ------------------------------------------------------------------------------

  async function download(path, filename) {
    try {
      const blob = await (await api(path)).blob();
      const url = URL.createObjectURL(blob);
      const link = document.createElement("a");
      link.href = url;
      link.download = filename;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      failure("reports-message", err);
    }
  }

  function downloadLink(td, text, path, filename) {
    const link = document.createElement("a");
    link.href = apiUrl(path);
    link.download = filename;
    link.textContent = text;
    link.setAttribute("aria-label", `${text} of ${filename.replace(/\.\w+$/, "")}`);
    // Fetched with the key (a plain link could not send it), then saved.
    link.addEventListener("click", (event) => {
      event.preventDefault();
      download(path, filename);
    });
    td.append(link);
  }

  async function loadReports() {
    try {
      const body = await getJson("/reports?limit=20");
      const tbody = $("report-list").tBodies[0];
      tbody.textContent = "";
      for (const report of body.reports) {
        const row = tbody.insertRow();
        row.dataset.id = report.id;
        cell(row, when(report.start));
        cell(row, when(report.end));
        cell(row, report.events.toLocaleString(), "num");
        const links = row.insertCell();
        downloadLink(links, "JSON", `/reports/${enc(report.id)}`, `${report.id}.json`);
        downloadLink(links, "CSV", `/reports/${enc(report.id)}.csv`, `${report.id}.csv`);
      }
      $("report-list").hidden = body.reports.length === 0;
      say("reports-message", body.reports.length ? "" : "No reports yet: one is written every interval (POST /reports runs one now).");
    } catch (err) {
      failure("reports-message", err);
    }
  }

  // -- quarantine ---------------------------------------------------------------------------

  async function loadQuarantine() {
    try {
      const body = await getJson("/quarantine/counts");
      const tbody = $("quarantine-list").tBodies[0];
      tbody.textContent = "";
      let total = 0;
      for (const source of body.sources) {
        const row = tbody.insertRow();
        cell(row, source.source);
        const prefix = source.complete === false ? "at least " : source.approximate ? "about " : "";
        cell(row, prefix + source.records.toLocaleString(), "num");
        total += source.records;
      }
      $("quarantine-list").hidden = body.sources.length === 0;
      say("quarantine-message", total === 0 ? "Nothing is set aside." : "");
    } catch (err) {
      failure("quarantine-message", err);
    }
  }

  // -- sections (tabs) ----------------------------------------------------------------------

  // Each tab's loader; a tab another script adds (sites.js) registers its own with addTab, or
  // listens for the "tally:show" event this dispatches for a tab without one.
  const LOADERS = {
    counters: loadCounters,
    uniques: loadUniqueNames,
    views: loadViews,
    reports: loadReports,
    quarantine: loadQuarantine,
    sites: () => document.dispatchEvent(new CustomEvent("tally:show", { detail: "sites" })), // sites.js
  };
  const tabs = [...document.querySelectorAll('[role="tab"]')];

  function show(name, focus = false) {
    for (const tab of tabs) {
      const selected = tab.getAttribute("aria-controls") === name;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      $(tab.getAttribute("aria-controls")).hidden = !selected;
      if (selected && focus) tab.focus();
    }
    document.body.dataset.view = name;
    link();
    const loader = LOADERS[name] || (() => document.dispatchEvent(new CustomEvent("tally:show", { detail: name })));
    loader();
  }

  for (const tab of tabs) {
    tab.addEventListener("click", () => show(tab.getAttribute("aria-controls")));
    tab.addEventListener("keydown", (event) => {
      const index = tabs.indexOf(tab);
      const target = {
        ArrowRight: (index + 1) % tabs.length,
        ArrowLeft: (index - 1 + tabs.length) % tabs.length,
        Home: 0,
        End: tabs.length - 1,
      }[event.key];
      if (target === undefined) return;
      event.preventDefault();
      show(tabs[target].getAttribute("aria-controls"), true);
    });
  }

  // A new window, zone or comparison: what is shown is read again.
  function reload() {
    link();
    if (state.counter) showCounter(state.counter);
    if (state.unique) showUnique(state.unique);
    if (document.body.dataset.view === "views") loadViews();
  }

  $("window").addEventListener("change", (event) => {
    state.window = event.target.value;
    reload();
    document.dispatchEvent(new CustomEvent("tally:window", { detail: state.window }));
  });
  $("zone").addEventListener("change", (event) => {
    state.tz = event.target.value;
    reload();
  });
  $("compare").addEventListener("change", (event) => {
    state.compare = event.target.checked;
    reload();
  });

  $("key-panel").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("key-input").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_STORAGE, key);
    $("key-input").value = "";
    $("key-panel").hidden = true;
    show(document.body.dataset.view || "counters");
    if (state.counter) showCounter(state.counter);
  });

  // What other tabs' scripts (sites.js) share.
  window.tallyDashboard = {
    getJson,
    sendJson,
    getQuietly,
    ApiError,
    say,
    failure,
    cell,
    enc,
    segment,
    drawChart,
    plot,
    accent,
    clearChart,
    state,
    link,
    WINDOWS,
    BROWSER_ZONE,
    fillZones,
    change,
    addTab: (name, loader) => {
      LOADERS[name] = loader;
    },
  };

  // Start once every deferred script ran, so a tab another script adds can be linked to.
  function start() {
    keyFromFragment();
    const linked = linkedView();
    if (linked.window && WINDOWS[linked.window]) {
      state.window = linked.window;
      $("window").value = linked.window;
    }
    fillZones($("zone"));
    if (linked.tz) {
      if (![...$("zone").options].some((o) => o.value === linked.tz)) $("zone").add(new Option(linked.tz, linked.tz));
      state.tz = linked.tz;
    }
    $("zone").value = state.tz;
    state.compare = linked.compare === "previous_period";
    $("compare").checked = state.compare;
    state.by = linked.by || null;
    state.url = linked.url || null;
    if (linked.counter) showCounter(linked.counter);
    if (linked.name) {
      $("unique-name").value = linked.name;
      showUnique(linked.name);
    }
    const known = tabs.some((tab) => tab.getAttribute("aria-controls") === linked.view);
    show(known ? linked.view : "counters");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
