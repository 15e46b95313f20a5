// memgate console: browse and curate memories through the admin API.
//
// The admin token lives in this module's memory only (never in storage or
// a cookie) and goes out as a bearer header. Everything a server sends is
// put on the page as text (textContent, input values), never as markup.

const api = new URL("../admin/v1/", document.baseURI);
const pageSize = 50;

let token = "";

// ---- the admin API ----

class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  const init = {
    method,
    headers: { Authorization: "Bearer " + token },
    credentials: "omit",
    cache: "no-store",
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(new URL(path, api), init);
  } catch {
    throw new APIError(0, "unavailable", "The server cannot be reached.");
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = (data && data.error) || {};
    throw new APIError(res.status, e.code || "http_" + res.status, e.message || res.statusText);
  }
  return data;
}

const ns = (name) => "namespaces/" + encodeURIComponent(name);
const tool = (name, t, args) => call("POST", ns(name) + "/tools/" + t, args);

// ---- elements ----

// el makes an element: attributes (on* are listeners, text is textContent)
// and children (strings become text nodes).
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "value") e.value = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) e.append(c);
  }
  return e;
}

const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const statusLine = document.getElementById("status");
const signOut = document.getElementById("sign-out");

function say(text, kind = "info") {
  statusLine.textContent = text;
  statusLine.className = kind;
  statusLine.hidden = !text;
}

function fail(err) {
  if (err instanceof APIError && (err.status === 401 || err.status === 403)) {
    token = "";
    render();
    say(err.status === 403 ? "This token has no admin rights (memory:admin)." : "This token is not valid (any more).", "error");
    return;
  }
  say(err instanceof APIError ? err.message + " (" + err.code + ")" : String(err), "error");
}

function show(...children) {
  view.replaceChildren(...children);
}

function setCrumbs(...parts) {
  crumbs.replaceChildren(...parts.flatMap((p, i) => (i ? [el("span", { text: "/", class: "sep" }), p] : [p])));
}

const link = (text, hash) => el("a", { href: hash, text });
const when = (t) => (t ? new Date(t).toLocaleString() : "");
const bytes = (n) => (n < 1024 ? n + " B" : n < 1 << 20 ? (n / 1024).toFixed(1) + " KiB" : (n / (1 << 20)).toFixed(1) + " MiB");

function tagList(tags) {
  return el("ul", { class: "tags" }, (tags || []).map((t) => el("li", { text: t })));
}

// ---- routes: #/, #/ns/NAME[/memories|/candidates|/trash], #/ns/NAME/memory/ID ----

function route() {
  const decode = (p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p; // a hash typed by hand, not one of ours
    }
  };
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decode);
  if (parts[0] !== "ns" || !parts[1]) return { page: "namespaces" };
  if (parts[2] === "memory" && parts[3] !== undefined) return { page: "memory", ns: parts[1], id: parts.slice(3).join("/") };
  return { page: parts[2] || "memories", ns: parts[1] };
}

const hashOf = (...parts) => "#/" + parts.map(encodeURIComponent).join("/");

async function render() {
  signOut.hidden = !token;
  if (!token) {
    setCrumbs();
    return showSignIn();
  }
  const r = route();
  try {
    switch (r.page) {
      case "namespaces":
        return await showNamespaces();
      case "memory":
        return await showMemory(r.ns, r.id);
      case "candidates":
        return await showCandidates(r.ns);
      case "trash":
        return await showTrash(r.ns);
      default:
        return await showMemories(r.ns);
    }
  } catch (err) {
    // Not the page before: what this one would have shown is not there.
    show(el("p", { class: "empty", text: "This page could not be loaded." }));
    fail(err);
  }
}

// ---- sign in ----

function showSignIn() {
  const input = el("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true, spellcheck: "false" });
  const form = el(
    "form",
    { class: "card narrow", id: "sign-in" },
    el("h1", { text: "Sign in" }),
    el("p", { text: "An admin token: MEMGATE_ADMIN_TOKEN, or a token with the memory:admin scope. It stays in this page only; reloading it signs you out." }),
    el("label", { for: "token", text: "Admin token" }),
    input,
    el("button", { type: "submit", text: "Sign in" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    token = input.value.trim();
    input.value = "";
    try {
      await call("GET", "namespaces?limit=1");
      say("");
      render();
    } catch (err) {
      fail(err);
      if (!(err instanceof APIError && (err.status === 401 || err.status === 403))) token = "";
    }
  });
  show(form);
  input.focus();
}

signOut.addEventListener("click", () => {
  token = "";
  go("#/", "Signed out.");
});

// ---- namespaces ----

async function showNamespaces() {
  setCrumbs(el("span", { text: "Namespaces" }));
  const body = el("tbody");
  const more = el("button", { type: "button", text: "More", hidden: true });
  let cursor = "";
  async function page() {
    const q = "namespaces?limit=" + pageSize + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
    const p = await call("GET", q);
    for (const n of p.namespaces) {
      body.append(
        el(
          "tr",
          {},
          el("td", {}, link(n.namespace, hashOf("ns", n.namespace))),
          el("td", { class: "num", text: String(n.count) }),
          el("td", { class: "num", text: bytes(n.bytes) }),
          el("td", { class: "num", text: bytes(n.store_bytes) }),
          el("td", { text: n.error ? "cannot be read (" + n.error + ")" : n.open ? "open" : "closed" }),
        ),
      );
    }
    cursor = p.next_cursor || "";
    more.hidden = !cursor;
  }
  more.addEventListener("click", () => page().catch(fail));
  const input = el("input", { type: "text", name: "namespace", placeholder: "namespace", pattern: "[a-z0-9_\\-]{1,64}", required: true });
  const open = el("form", { class: "inline" }, input, el("button", { type: "submit", text: "Open" }));
  open.addEventListener("submit", (ev) => {
    ev.preventDefault();
    go(hashOf("ns", input.value));
  });
  await page();
  show(
    el("h1", { text: "Namespaces" }),
    open,
    el(
      "table",
      { id: "namespaces" },
      el("thead", {}, el("tr", {}, ["Namespace", "Memories", "Text", "Store", "Store file"].map((h) => el("th", { text: h })))),
      body,
    ),
    body.children.length ? more : el("p", { class: "empty", text: "No namespace has a store yet." }),
  );
}

// ---- one namespace ----

function nsHeader(name, active) {
  setCrumbs(link("Namespaces", "#/"), el("span", { text: name }));
  const tab = (page, label) =>
    el("a", { href: hashOf("ns", name, page), class: page === active ? "tab active" : "tab", "aria-current": page === active ? "page" : false, text: label });
  return [el("h1", { text: name }), el("nav", { class: "tabs" }, tab("memories", "Memories"), tab("candidates", "Candidates"), tab("trash", "Trash"))];
}

function memoryCard(name, m, ...actions) {
  return el(
    "article",
    { class: "memory" },
    el("h2", {}, link(m.title || m.id, hashOf("ns", name, "memory", m.id))),
    el("p", { class: "text", text: m.text.length > 400 ? m.text.slice(0, 400) + "…" : m.text }),
    tagList(m.tags),
    el("p", { class: "meta", text: "version " + m.version + " · updated " + when(m.updated_at) }),
    actions.length ? el("div", { class: "actions" }, actions) : null,
  );
}

async function showMemories(name) {
  const stats = await call("GET", ns(name));
  const query = el("input", { type: "search", name: "query", placeholder: "Search memories" });
  const form = el("form", { class: "inline", id: "search" }, query, el("button", { type: "submit", text: "Search" }));
  const list = el("div", { class: "list" });
  const more = el("button", { type: "button", text: "More", hidden: true });
  let cursor = "";
  async function load(reset) {
    if (reset) {
      list.replaceChildren();
      cursor = "";
    }
    const q = query.value.trim();
    const res = q ? await tool(name, "search", { query: q, limit: 50 }) : await tool(name, "list", cursor ? { limit: pageSize, cursor } : { limit: pageSize });
    const items = q ? res.hits : res.memories;
    for (const m of items) list.append(memoryCard(name, m));
    cursor = q ? "" : res.next_cursor || "";
    more.hidden = !cursor;
    if (!list.children.length) list.append(el("p", { class: "empty", text: q ? "No memory matches." : "No memories." }));
  }
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    load(true).catch(fail);
  });
  more.addEventListener("click", () => load(false).catch(fail));
  await load(true);
  show(
    ...nsHeader(name, "memories"),
    el("p", { class: "meta", text: stats.count + " memories · " + bytes(stats.bytes) + " of text · store " + bytes(stats.store_bytes) }),
    form,
    list,
    more,
  );
}

async function showMemory(name, id) {
  let m;
  try {
    m = (await tool(name, "get", { id })).memory;
  } catch (err) {
    if (err instanceof APIError && err.code === "not_found") {
      show(...nsHeader(name, ""), el("p", { class: "empty", text: "This memory is gone (forgotten, or never was)." }));
      return;
    }
    throw err;
  }
  const [h1, tabs] = nsHeader(name, "");
  const text = el("textarea", { id: "text", name: "text", rows: 10, value: m.text });
  const title = el("input", { id: "title", name: "title", type: "text", value: m.title || "" });
  const tags = el("input", { id: "tags", name: "tags", type: "text", value: (m.tags || []).join(", ") });
  const conflict = el("div", { class: "conflict", role: "alert", hidden: true });
  const save = el("button", { type: "submit", text: "Save" });
  const form = el(
    "form",
    { class: "card", id: "edit" },
    el("p", { class: "meta", text: "id " + m.id + " · version " + m.version + " · created " + when(m.created_at) + " · updated " + when(m.updated_at) }),
    el("label", { for: "title", text: "Title" }),
    title,
    el("label", { for: "text", text: "Text" }),
    text,
    el("label", { for: "tags", text: "Tags (comma-separated)" }),
    tags,
    m.source ? el("p", { class: "meta", text: "source: " + m.source.kind + " · " + m.source.reference + " · " + m.source.actor }) : null,
    m.expires_at ? el("p", { class: "meta", text: "expires " + when(m.expires_at) }) : null,
    conflict,
    el("div", { class: "actions" }, save, forgetButton(name, m)),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // A replace writes the whole memory: what the form does not edit
    // (metadata, source, expiry) goes back as it was read.
    const args = { id: m.id, text: text.value, tags: tags.value.split(",").map((t) => t.trim()).filter(Boolean), metadata: m.metadata || {}, if_version: m.version };
    if (title.value.trim()) args.title = title.value.trim();
    if (m.source) args.source = m.source;
    if (m.expires_at) args.expires_at = m.expires_at;
    if (!text.value.trim()) args.allow_empty = true;
    try {
      const res = await tool(name, "remember", args);
      say("Saved: version " + res.memory.version + ".", "ok");
      showMemory(name, id).catch(fail);
    } catch (err) {
      if (err instanceof APIError && err.code === "version_conflict") {
        conflict.replaceChildren(
          el("p", { text: "Another writer changed this memory after you opened it; your edit was not saved. Your text is still in the form." }),
          el("button", { type: "button", text: "Load the latest version", onclick: () => showMemory(name, id).catch(fail) }),
        );
        conflict.hidden = false;
        say("Version conflict: not saved.", "error");
        return;
      }
      fail(err);
    }
  });
  show(h1, tabs, form);
}

function forgetButton(name, m) {
  const button = el("button", { type: "button", class: "danger", text: "Forget" });
  button.addEventListener("click", async () => {
    if (button.dataset.armed !== "yes") {
      button.dataset.armed = "yes";
      button.textContent = "Forget: click again";
      return;
    }
    try {
      await tool(name, "forget", { id: m.id, if_version: m.version });
      go(hashOf("ns", name, "memories"), "Forgotten.");
    } catch (err) {
      fail(err);
    }
  });
  return button;
}

// action is a button that posts to path and, once that is done, says so
// and takes its card away.
function action(label, path, done, danger) {
  const button = el("button", { type: "button", class: danger ? "danger" : undefined, text: label });
  button.addEventListener("click", () =>
    call("POST", path)
      .then(() => {
        say(done, "ok");
        button.closest("article").remove();
      })
      .catch(fail),
  );
  return button;
}

// showWaiting shows a page of what waits for an administrator in ns
// (candidates, the trash): card makes each one's card, empty is what an
// empty page says.
async function showWaiting(name, tab, card, empty) {
  const page = await call("GET", ns(name) + "/" + tab + "?limit=" + pageSize);
  const list = el("div", { class: "list" }, page.memories.map(card));
  if (!list.children.length) list.append(el("p", { class: "empty", text: empty }));
  show(...nsHeader(name, tab), list);
}

// waitingCard is a memory's card without a link: a candidate or a
// forgotten memory is no memory to open.
function waitingCard(name, m, meta, ...actions) {
  const card = memoryCard(name, m, ...actions);
  card.querySelector("h2").replaceChildren(m.title || m.id);
  if (meta) card.querySelector(".meta").textContent = meta;
  return card;
}

function showCandidates(name) {
  const path = (c, verb) => ns(name) + "/candidates/" + encodeURIComponent(c.id) + "/" + verb;
  return showWaiting(name, "candidates", (c) =>
    waitingCard(name, c, "proposed " + when(c.created_at), action("Approve", path(c, "approve"), "Approved: now a memory."), action("Reject", path(c, "reject"), "Rejected.", true)),
    "No candidates await approval.");
}

function showTrash(name) {
  return showWaiting(name, "trash", ({ memory: m, deleted_at }) =>
    waitingCard(name, m, "version " + m.version + " · forgotten " + when(deleted_at),
      action("Restore", ns(name) + "/trash/" + encodeURIComponent(m.id) + "/restore", "Restored.")),
    "The trash is empty.");
}

// go navigates to hash and says message there (a change of page clears
// what the last one said).
let arrival = "";
function go(hash, message) {
  arrival = message || "";
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}

window.addEventListener("hashchange", () => {
  say(arrival, "ok");
  arrival = "";
  render();
});
render();
