// The console: the chat, the Pages and the settings of `computer-use app`.
//
// Everything shown comes from one event stream (api/events), replayed from the start when the page loads. Every
// string in it may come from a web page or a model, so the DOM is built with createElement and textContent only.
// Updates only ever append a node or change the one card they are about: earlier messages, their avatars and their
// rendered markdown are never removed, replaced or rendered again (a person may be reading or selecting them).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const history = $("history");
  const notice = $("notice");
  const turn = $("turn");
  const messageBox = $("message");
  const turnPages = $("turn-pages");
  const pagesList = $("pages");
  const backendSelect = $("backend");
  const grantsList = $("grants");

  const TURN_WORDS = {
    idle: "Idle",
    running: "Working…",
    needs_user: "Waiting for you",
    error: "Provider error",
  };
  const AT_BOTTOM = 24; // px: closer than this to the bottom counts as "at the bottom"

  const BOUND_WORDS = {
    revoke: "until you revoke it",
    time: "for a time limit",
    page: "until one of its Pages changes",
  };
  let currentPages = []; // the Pages as last announced: what a grant may name
  let currentClients = []; // the MCP clients as last announced

  const messages = new Map(); // message id -> {article, body, cards, draft, raw, committed}
  let sentWith = new Set(); // the Pages the last message was sent with: ticked until the person unticks them
  const cards = new Map(); // call id -> {article, fields, buttons}

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== "") node.textContent = text;
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  // -- markdown: paragraphs, **bold**, *emphasis*, `code`, fenced code, lists, headings, http(s) links -----------

  const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|\*(?=\S)([^*]*?\S)\*|\[([^\]\n]+)\]\(([^()\s]+)\)/g;

  function inline(text, into) {
    let last = 0;
    for (const match of text.matchAll(INLINE)) { // matchAll works on a copy: the recursion below has its own
      if (match.index > last) appendLines(text.slice(last, match.index), into);
      if (match[1] !== undefined) {
        into.append(el("code", "", match[2]));
      } else if (match[3] !== undefined) {
        const strong = el("strong");
        inline(match[3], strong);
        into.append(strong);
      } else if (match[4] !== undefined) {
        const em = el("em");
        inline(match[4], em);
        into.append(em);
      } else {
        into.append(link(match[5], match[6]));
      }
      last = match.index + match[0].length;
    }
    if (last < text.length) appendLines(text.slice(last), into);
  }

  function appendLines(text, into) {
    text.split("\n").forEach((line, index) => {
      if (index > 0) into.append(el("br"));
      if (line) into.append(document.createTextNode(line));
    });
  }

  function link(text, href) {
    let url = null;
    try {
      url = new URL(href);
    } catch (error) {
      url = null;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
      return document.createTextNode(text); // only http(s) links are links; anything else is just its text
    }
    const anchor = el("a", "", text);
    anchor.href = url.href;
    anchor.target = "_blank";
    anchor.rel = "noopener noreferrer";
    anchor.title = url.href;
    return anchor;
  }

  const FENCE = /^\s*(```|~~~)/;
  const HEADING = /^(#{1,6})\s+(.*)$/;
  const BULLET = /^\s*[-*+]\s+(.*)$/;
  const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;

  function blocks(text) {
    const out = document.createDocumentFragment();
    const lines = text.replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const fence = FENCE.exec(line);
      if (fence) {
        const code = [];
        i += 1;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
        i += 1; // the closing fence (or the end)
        const pre = el("pre");
        pre.append(el("code", "", code.join("\n")));
        out.append(pre);
        continue;
      }
      if (!line.trim()) {
        i += 1;
        continue;
      }
      const heading = HEADING.exec(line);
      if (heading) {
        const node = el("h" + Math.min(heading[1].length + 2, 6));
        inline(heading[2], node);
        out.append(node);
        i += 1;
        continue;
      }
      const listKind = BULLET.test(line) ? BULLET : NUMBERED.test(line) ? NUMBERED : null;
      if (listKind) {
        const list = el(listKind === BULLET ? "ul" : "ol");
        while (i < lines.length && listKind.test(lines[i])) {
          const item = el("li");
          let content = listKind.exec(lines[i])[1];
          i += 1;
          while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !BULLET.test(lines[i]) && !NUMBERED.test(lines[i])) {
            content += "\n" + lines[i].trim();
            i += 1;
          }
          inline(content, item);
          list.append(item);
        }
        out.append(list);
        continue;
      }
      const paragraph = [];
      while (
        i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) &&
        !(paragraph.length && (BULLET.test(lines[i]) || NUMBERED.test(lines[i])))
      ) {
        paragraph.push(lines[i]);
        i += 1;
      }
      const p = el("p");
      inline(paragraph.join("\n"), p);
      out.append(p);
    }
    return out;
  }

  // Where streamed text may be cut: after a blank line outside a fenced block. Everything before it is final.
  function boundary(text, from) {
    let inFence = null;
    let cut = from;
    let start = from;
    for (let end = text.indexOf("\n", start); end !== -1; end = text.indexOf("\n", start)) {
      const line = text.slice(start, end);
      const fence = FENCE.exec(line);
      if (inFence) {
        if (line.trim().startsWith(inFence)) {
          inFence = null;
          cut = end + 1;
        }
      } else if (fence) {
        inFence = fence[1];
      } else if (!line.trim()) {
        cut = end + 1;
      }
      start = end + 1;
    }
    return cut;
  }

  // -- scrolling: follow the bottom only when the user is there -------------------------------------------------

  function keepingScroll(change) {
    const atBottom = history.scrollHeight - history.scrollTop - history.clientHeight <= AT_BOTTOM;
    change();
    if (atBottom) history.scrollTop = history.scrollHeight;
  }

  // -- history --------------------------------------------------------------------------------------------------

  function addMessage(event) {
    if (messages.has(event.id)) return;
    const article = el("article", "message");
    article.dataset.id = event.id;
    article.dataset.role = event.role === "user" ? "user" : "assistant";
    const avatar = el("div", "avatar", event.role === "user" ? "You" : "AI");
    avatar.setAttribute("aria-hidden", "true");
    const content = el("div", "content");
    const who = el("div", "who", event.role === "user" ? "You" : "Assistant");
    const body = el("div", "body");
    const cardList = el("div", "cards");
    content.append(who, body, cardList);
    article.append(avatar, content);
    const entry = {article, body, cards: cardList, draft: null, raw: "", committed: 0};
    messages.set(event.id, entry);
    if (event.text) body.append(blocks(event.text));
    history.append(article);
    if (Array.isArray(event.pages)) {
      sentWith = new Set(event.pages.map(String));
      for (const box of turnPages.querySelectorAll("input[data-page]")) box.checked = sentWith.has(box.dataset.page);
    }
  }

  function addText(event) {
    const entry = messages.get(event.id);
    if (!entry) return;
    entry.raw += event.delta;
    if (!entry.draft) {
      const draft = el("p", "draft");
      draft.append(document.createTextNode(""));
      entry.body.append(draft);
      entry.draft = draft;
    }
    const cut = boundary(entry.raw, entry.committed);
    if (cut > entry.committed) {
      entry.body.insertBefore(blocks(entry.raw.slice(entry.committed, cut)), entry.draft);
      entry.committed = cut;
    }
    entry.draft.firstChild.data = entry.raw.slice(entry.committed);
  }

  function finishText(event) {
    const entry = messages.get(event.id);
    if (!entry || !entry.draft) return;
    const rest = entry.raw.slice(entry.committed);
    if (rest.trim()) entry.body.insertBefore(blocks(rest), entry.draft);
    entry.committed = entry.raw.length;
    entry.draft.firstChild.data = "";
  }

  function field(className, label) {
    const node = el("div", "field " + className);
    if (label) node.dataset.label = label;
    return node;
  }

  // A card's fields: the person's words first, the raw call and what the runtime told the model in its details.
  const CARD_FIELDS = ["headline", "backend", "page", "detail", "command", "result", "reason", "hint"];

  function updateCard(event) {
    let card = cards.get(event.call_id);
    if (!card) {
      const entry = messages.get(event.message);
      if (!entry) return;
      const article = el("article", event.kind === "provider_error" ? "card provider-error" : "card");
      article.dataset.callId = event.call_id;
      const head = el("div", "card-head");
      const fields = {
        headline: el("span", "headline"),
        backend: el("span", "backend"),
        page: field("page", "Page"),
        detail: field("detail"),
        command: field("command", "Call"),
        result: field("result", "Runtime said"),
        reason: field("reason", "Reason"),
        hint: field("hint", "Hint to the model"),
      };
      head.append(fields.headline, fields.backend);
      const raw = el("details", "raw");
      raw.append(el("summary", "", "Details"), fields.command, fields.result, fields.reason, fields.hint);
      article.append(head, fields.page, fields.detail, raw);
      card = {article, fields, buttons: []};
      cards.set(event.call_id, card);
      entry.cards.append(article);
    }
    card.article.dataset.status = event.status;
    for (const name of CARD_FIELDS) setText(card.fields[name], event[name === "result" ? "summary" : name] || "");
    if (card.buttons.length) return;
    if (event.status === "needs_user") {
      if (event.approval) card.article.insertBefore(approvalField(event.approval), card.article.querySelector(".raw"));
      card.buttons = actions(card.article, [
        ...(event.approval ? [["allow", "Allow once"]] : []),
        ["continue", "Done — continue"],
        ["stop", "Stop turn"],
      ]);
    } else if (event.kind === "provider_error" && event.retryable) {
      card.buttons = actions(card.article, [
        ["retry", "Retry"],
        ["stop", "Stop turn"],
      ]);
    }
  }

  function approvalField(approval) {
    // Exactly what "Allow once" would let the runtime commit, as the runtime read it (the control's words are the
    // Page's: shown as text, never as markup).
    const what = field("approval", "Allow once commits");
    const where = approval.commits_to ? ` to ${approval.commits_to}` : "";
    what.textContent = `${approval.control || "the address"}${where} (${approval.concept}), this once`;
    return what;
  }

  function actions(article, buttons) {
    const row = el("div", "card-actions");
    const made = buttons.map(([decision, label]) => {
      const button = el("button", decision, label);
      button.type = "button";
      button.addEventListener("click", () => decide(decision, made));
      return button;
    });
    row.append(...made);
    article.append(row);
    return made;
  }

  function resolveCards() {
    // The turn moved on: the hand-over and retry buttons of every card waiting for the user are spent.
    for (const card of cards.values()) {
      if (card.buttons.length && !card.article.dataset.resolved) {
        card.article.dataset.resolved = "true";
        for (const button of card.buttons) button.disabled = true;
      }
    }
  }

  // -- turn, notice, Pages, settings ----------------------------------------------------------------------------

  function setTurn(state) {
    turn.dataset.state = state;
    setText(turn, TURN_WORDS[state] || state);
    if (state !== "needs_user" && state !== "error") resolveCards();
    if (state === "idle") clearNotice("busy"); // the turn it was about has ended
  }

  function newChat() {
    // The app started a new chat: the old history goes (the event log dropped it too, so a reload agrees).
    history.replaceChildren();
    messages.clear();
    cards.clear();
    clearNotice("turn");
    clearNotice("busy");
  }

  // -- notices: each has a cause, and goes when its cause is gone --------------------------------------------
  //
  // app: what the app says of itself (a missing key, a settings file): until it says otherwise.
  // turn: what a turn left to say (it stopped, the chat was closed): until the next message is sent.
  // busy: a request refused because a turn runs or waits: until that turn ends.
  // input: a refused input (a time limit out of range, an empty message): until the field changes or the next action.
  // no-page: a message sent with no Page ticked: until a Page is ticked or the message is sent.
  // offline: the app did not answer: until it answers again.

  const notices = new Map(); // cause -> {text, field, action}

  function showNotice(cause, text, options = {}) {
    if (!text) {
      clearNotice(cause);
      return;
    }
    notices.set(cause, {text, field: options.field || null, action: options.action || null});
    renderNotices();
  }

  function clearNotice(cause) {
    if (notices.delete(cause)) renderNotices();
  }

  function renderNotices() {
    const shown = [];
    for (const [cause, entry] of notices) {
      const line = el("p", "notice-line", entry.text);
      line.dataset.cause = cause;
      if (entry.action) {
        const button = el("button", entry.action.className, entry.action.label);
        button.type = "button";
        button.addEventListener("click", entry.action.run);
        line.append(" ", button);
      }
      shown.push(line);
    }
    notice.replaceChildren(...shown);
  }

  function clearInputNotice(field) {
    const entry = notices.get("input");
    if (entry && (!field || (entry.field && entry.field.contains(field)))) clearNotice("input");
  }

  function setPages(pages) {
    const seen = new Set();
    for (const page of pages) {
      seen.add(page.handle);
      pageItem(page);
      turnPage(page);
    }
    for (const item of [...pagesList.children]) {
      if (!seen.has(item.dataset.page)) item.remove();
    }
    for (const box of [...turnPages.querySelectorAll("input[data-page]")]) {
      if (!seen.has(box.dataset.page)) box.closest("label").remove();
    }
    $("pages-empty").hidden = pages.length > 0;
    $("turn-pages-empty").hidden = pages.length > 0;
    currentPages = pages;
    for (const item of grantsList.children) grantPages(item);
    setGrants(currentClients); // granted Pages are named from this list, which a replay may bring after the clients
  }

  function pageItem(page) {
    let item = [...pagesList.children].find((node) => node.dataset.page === page.handle);
    if (!item) {
      item = el("li", "page");
      item.dataset.page = page.handle;
      const text = el("div", "page-text");
      const top = el("div", "page-top");
      top.append(el("span", "relation"), el("span", "title"));
      text.append(top, el("span", "url"));
      const access = el("label", "access-label");
      const box = el("input", "access");
      box.type = "checkbox";
      box.addEventListener("change", () => setAccess(page.handle, box));
      access.append(box, document.createTextNode(" Access"));
      item.append(text, access);
      pagesList.append(item);
    }
    setText(item.querySelector(".relation"), page.relation);
    setText(item.querySelector(".title"), page.title || "(untitled)");
    item.querySelector(".title").title = page.title || "";
    setText(item.querySelector(".url"), page.url);
    item.querySelector(".url").title = page.url;
    const box = item.querySelector("input.access");
    if (!box.disabled) box.checked = page.access;
    item.dataset.access = page.access ? "on" : "off";
  }

  function turnPage(page) {
    let box = turnPages.querySelector(`input[data-page="${CSS.escape(page.handle)}"]`);
    if (!box) {
      const label = el("label", "turn-page");
      box = el("input");
      box.type = "checkbox";
      box.dataset.page = page.handle;
      box.checked = sentWith.has(page.handle);
      box.addEventListener("change", () => {
        if (box.checked) clearNotice("no-page");
      });
      label.append(box, el("span", "turn-page-name"));
      turnPages.append(label);
    }
    const name = box.nextElementSibling;
    setText(name, `${page.relation}: ${page.title || page.handle}`);
    box.closest("label").title = page.title ? `${page.title}\n${page.url}` : page.url;
    box.disabled = !page.access;
    if (!page.access) box.checked = false;
  }

  function setSettings(event) {
    // The installed backends, as the app lists them (a backend installed later appears without a console change).
    if (Array.isArray(event.backends)) {
      const names = event.backends.map(String);
      const shown = Array.from(backendSelect.options, (option) => option.value);
      if (names.join("\n") !== shown.join("\n")) {
        backendSelect.replaceChildren(...names.map((name) => Object.assign(el("option", "", name), {value: name})));
      }
    }
    if (event.backend) backendSelect.value = event.backend;
  }

  // -- MCP clients: a paired `computer-use connect` asks, the user grants named Pages with a bound, or revokes ----

  function setGrants(clients) {
    currentClients = clients;
    const seen = new Set();
    for (const client of clients) {
      seen.add(client.id);
      clientItem(client);
    }
    for (const item of [...grantsList.children]) {
      if (!seen.has(item.dataset.client)) item.remove();
    }
    $("grants-empty").hidden = clients.length > 0;
  }

  function pageName(handle) {
    const page = currentPages.find((p) => p.handle === handle);
    return page ? `${page.relation}: ${page.title || handle}` : handle;
  }

  function clientItem(client) {
    let item = [...grantsList.children].find((node) => node.dataset.client === client.id);
    const key = JSON.stringify([
      client.client, client.process, client.state, client.pages.map(pageName), client.bound, client.until,
      client.ended,
    ]);
    if (item && item.dataset.key === key) return;
    if (!item) {
      item = el("li", "client");
      item.dataset.client = client.id;
      grantsList.append(item);
    }
    item.dataset.key = key;
    item.dataset.state = client.state;
    item.replaceChildren();
    if (client.state === "granted") {
      item.append(el("p", "ask", `${client.client} has browser access to: ${client.pages.map(pageName).join(", ")}`));
      item.append(processLine(client));
      let until = BOUND_WORDS[client.bound] || client.bound;
      if (client.bound === "time" && typeof client.until === "number") {
        until = "until " + new Date(client.until).toLocaleTimeString();
      }
      item.append(el("p", "bound-text", until));
      const revoke = el("button", "revoke", "Revoke");
      revoke.type = "button";
      revoke.addEventListener("click", async () => {
        revoke.disabled = true;
        if (!(await post("api/revoke", {client: client.id}))) revoke.disabled = false;
      });
      item.append(revoke);
      return;
    }
    item.append(el("p", "ask", `${client.client} asks for browser access`));
    item.append(processLine(client));
    if (client.ended) item.append(el("p", "ended", `Its last grant ended: ${client.ended}.`));
    const fieldset = el("fieldset", "grant-pages");
    fieldset.append(el("legend", "", "Pages it may use"));
    item.append(fieldset);
    grantPages(item);
    const row = el("div", "grant-row");
    const bound = el("select", "bound");
    for (const [value, words] of Object.entries(BOUND_WORDS)) {
      bound.append(Object.assign(el("option", "", words), {value}));
    }
    const minutes = el("input", "minutes");
    minutes.type = "number";
    minutes.min = "1";
    minutes.max = "1440";
    minutes.value = "30";
    minutes.title = "minutes";
    minutes.hidden = true;
    bound.addEventListener("change", () => {
      minutes.hidden = bound.value !== "time";
    });
    const grant = el("button", "grant", "Grant");
    grant.type = "button";
    grant.addEventListener("click", async () => {
      const pages = [...fieldset.querySelectorAll("input[data-page]:checked")].map((box) => box.dataset.page);
      const body = {client: client.id, pages, bound: bound.value};
      if (bound.value === "time") body.minutes = Number(minutes.value);
      grant.disabled = true;
      const field = bound.value === "time" ? minutes : fieldset;
      if (!(await post("api/grant", body, field))) grant.disabled = false;
    });
    const deny = el("button", "deny", "Deny");
    deny.type = "button";
    deny.addEventListener("click", async () => {
      deny.disabled = true;
      if (!(await post("api/deny", {client: client.id}))) deny.disabled = false;
    });
    row.append(bound, minutes, grant, deny);
    item.append(row);
  }

  function processLine(client) {
    // What the kernel says of the asking process (its name above is its own claim): pid and executable.
    const known = typeof client.process === "string" && client.process;
    return el("p", "process", known ? `Process: ${client.process}` : "Process: unknown");
  }

  function grantPages(item) {
    // The grantable Pages, kept current (ticks survive a Pages update).
    const fieldset = item.querySelector("fieldset.grant-pages");
    if (!fieldset) return;
    const ticked = new Set([...fieldset.querySelectorAll("input[data-page]:checked")].map((box) => box.dataset.page));
    for (const label of [...fieldset.querySelectorAll("label")]) label.remove();
    for (const page of currentPages) {
      if (!page.access) continue;
      const label = el("label");
      const box = el("input");
      box.type = "checkbox";
      box.dataset.page = page.handle;
      box.checked = ticked.has(page.handle);
      label.append(box, document.createTextNode(" " + pageName(page.handle)));
      label.title = page.url;
      fieldset.append(label);
    }
  }

  const HANDLERS = {
    message: addMessage,
    text: addText,
    text_done: finishText,
    card: updateCard,
    turn: (event) => setTurn(event.state),
    notice: (event) => showNotice(event.cause || "app", event.text),
    new_chat: newChat,
    pages: (event) => setPages(event.pages),
    settings: setSettings,
    grants: (event) => {
      setGrants(Array.isArray(event.clients) ? event.clients : []);
      setText($("grants-socket"), event.socket ? `Clients pair over ${event.socket}.` : "");
    },
  };

  function handle(event) {
    const handler = HANDLERS[event.type];
    if (handler) keepingScroll(() => handler(event));
  }

  // -- talking to the app ---------------------------------------------------------------------------------------

  function screenArea() {
    // The screen's work area as this browser sees it: where the app may put windows.
    return {
      availLeft: Math.round(screen.availLeft || 0),
      availTop: Math.round(screen.availTop || 0),
      availWidth: Math.round(screen.availWidth),
      availHeight: Math.round(screen.availHeight),
    };
  }

  async function post(path, body, field) {
    clearInputNotice(); // a new action: the last refused input is past
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (error) {
      showNotice("offline", "The app did not answer (is `computer-use app` still running?).");
      return false;
    }
    clearNotice("offline");
    if (response.ok) return true;
    let message = `The app refused the request (${response.status}).`;
    try {
      const answer = await response.json();
      if (answer && typeof answer.error === "string") message = answer.error;
    } catch (error) {
      // not JSON: keep the generic message
    }
    // 409: refused because of the turn's state, which ends with the turn; anything else is about the input.
    if (response.status === 409) showNotice("busy", message);
    else showNotice("input", message, {field});
    return false;
  }

  function tickedPages() {
    return [...turnPages.querySelectorAll("input[data-page]:checked")].map((box) => box.dataset.page);
  }

  async function send(withoutPage = false) {
    const pages = tickedPages();
    const text = messageBox.value;
    if (!pages.length && !withoutPage && text.trim()) {
      // The model works only on ticked Pages: with none, it can only talk. Say so, and send only if asked to.
      showNotice("no-page", "No Page is ticked: the model can only use the Pages you tick below this box.", {
        action: {className: "send-anyway", label: "Send without a Page", run: () => send(true)},
      });
      return;
    }
    clearNotice("no-page");
    if (await post("api/message", {text, pages}, messageBox)) {
      if (messageBox.value === text) messageBox.value = "";  // not what the user typed while it was on its way
    }
  }

  async function decide(decision, buttons) {
    for (const button of buttons) button.disabled = true;
    if (!(await post("api/decide", {decision}))) {
      for (const button of buttons) button.disabled = false;
    }
  }

  async function setAccess(handle, box) {
    const wanted = box.checked;
    box.disabled = true;
    const ok = await post("api/access", {page: handle, enabled: wanted}, box);
    box.disabled = false;
    if (!ok) box.checked = !wanted;
  }

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  messageBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $("open-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("open-url");
    const body = {url: input.value.trim(), placement: $("open-placement").value, screen: screenArea()};
    if (await post("api/open", body, input)) input.value = "";
  });
  $("new-chat").addEventListener("click", () => post("api/new_chat", {}));
  // A refused input's notice goes once the person corrects that input.
  document.addEventListener("input", (event) => clearInputNotice(event.target));
  document.addEventListener("change", (event) => clearInputNotice(event.target));
  let shownBackend = backendSelect.value;
  backendSelect.addEventListener("focus", () => {
    shownBackend = backendSelect.value;
  });
  backendSelect.addEventListener("change", async () => {
    if (!(await post("api/settings", {backend: backendSelect.value}))) backendSelect.value = shownBackend;
    shownBackend = backendSelect.value;
  });
  // Window moves have no event of their own: when the user comes back to the console, relations are re-read.
  window.addEventListener("focus", () => post("api/refresh", {screen: screenArea()}));

  function connect() {
    const stream = new EventSource("api/events");
    stream.onopen = () => {
      document.body.dataset.connection = "live";
      setText($("connection"), "");
    };
    stream.onerror = () => {
      document.body.dataset.connection = "lost";
      setText($("connection"), "Reconnecting…");
    };
    stream.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      if (event && typeof event === "object") handle(event);
    };
  }

  // The screen first: the app places the Pages it opens from now on (the demo's too) inside its work area.
  post("api/refresh", {screen: screenArea()}).finally(connect);
})();
