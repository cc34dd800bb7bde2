// The lab's watch over the console's history, installed by the lab in an isolated world of its own (the console's
// scripts cannot see or change it). It keeps every node the rule protects and counts each one that leaves:
// earlier messages (article.message), their avatars (.avatar), their cards (article.card, updated in place) and
// the rendered markdown of finished messages (every node inside their .body). Finished: not the last message, or
// the turn is not running, or its cards have started (a reply's text is complete before its tool calls run).
// It also counts the updates it saw: a card appearing or changing its data-status.
(() => {
  const history = document.querySelector("#history");
  const turn = document.querySelector("#turn");
  if (!history || !turn) throw new Error("the console has no #history or #turn");
  const watch = {
    kindOf: new Map(), // protected node -> "message" | "avatar" | "card" | "markdown"
    lost: new Set(),
    lostByKind: { message: 0, avatar: 0, card: 0, markdown: 0 },
    rewritten: 0, // characterData changes inside finished markdown (a re-render in place)
    status: new Map(), // data-call-id -> last data-status seen
    updates: 0,
    transitions: [],
    batches: 0,
  };

  const protect = (node, kind) => {
    if (node && !watch.kindOf.has(node) && !watch.lost.has(node)) watch.kindOf.set(node, kind);
  };
  const lose = (node) => {
    const kind = watch.kindOf.get(node);
    if (kind === undefined) return;
    watch.kindOf.delete(node);
    watch.lost.add(node);
    watch.lostByKind[kind] += 1;
  };
  const loseSubtree = (root) => {
    lose(root);
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ALL);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) lose(node);
  };

  const scan = () => {
    const messages = history.querySelectorAll("article.message");
    const running = turn.dataset.state === "running";
    messages.forEach((message, index) => {
      protect(message, "message");
      protect(message.querySelector(".avatar"), "avatar");
      message.querySelectorAll("article.card").forEach((card) => protect(card, "card"));
      const body = message.querySelector(".body");
      const finished = index < messages.length - 1 || !running || message.querySelector("article.card") !== null;
      if (body && finished) {
        protect(body, "markdown");
        const walker = document.createTreeWalker(body, NodeFilter.SHOW_ALL);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) protect(node, "markdown");
      }
    });
    history.querySelectorAll("article.card[data-call-id]").forEach((card) => {
      const id = card.dataset.callId;
      const now = card.dataset.status;
      const before = watch.status.get(id);
      if (before !== now) {
        watch.status.set(id, now);
        watch.updates += 1;
        if (watch.transitions.length < 200) watch.transitions.push([id.slice(0, 40), before ?? null, now]);
      }
    });
  };

  const observer = new MutationObserver((records) => {
    watch.batches += 1;
    for (const record of records) {
      if (record.type === "childList") record.removedNodes.forEach(loseSubtree);
      else if (record.type === "characterData" && watch.kindOf.get(record.target) === "markdown") {
        watch.rewritten += 1;
      }
    }
    // A node can leave without a record of ours naming it (an ancestor outside #history replaced it whole).
    for (const node of [...watch.kindOf.keys()]) if (!history.contains(node)) lose(node);
    scan();
  });
  observer.observe(history, { subtree: true, childList: true, characterData: true, attributes: true });
  observer.observe(turn, { attributes: true });
  scan();

  globalThis.__labWatch = {
    report() {
      const lostByKind = { ...watch.lostByKind };
      const removed = Object.values(lostByKind).reduce((a, b) => a + b, 0);
      return {
        updates: watch.updates,
        removed_or_replaced: removed + watch.rewritten,
        lost_by_kind: lostByKind,
        markdown_rewritten: watch.rewritten,
        protected: watch.kindOf.size,
        messages: history.querySelectorAll("article.message").length,
        cards: history.querySelectorAll("article.card").length,
        transitions: watch.transitions,
        batches: watch.batches,
      };
    },
    stop() {
      observer.disconnect();
    },
  };
  return true;
})()
