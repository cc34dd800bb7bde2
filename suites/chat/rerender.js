  // Negative control (inserted by suites/chat into a copy of console.js, never shipped): after every event a part
  // of the history is rendered again from fresh copies: whole messages, their markdown or their avatars. The
  // console's own references are pointed at the copies (and the hand-over buttons get their handlers again), so
  // the console keeps working and only the DOM churns.
  function rerenderHistory() {
    const part = "__PART__";
    for (const entry of messages.values()) {
      if (part === "avatars") {
        const avatar = entry.article.querySelector(".avatar");
        avatar.replaceWith(avatar.cloneNode(true));
      } else if (part === "markdown") {
        entry.body.replaceChildren(...Array.from(entry.body.childNodes, (node) => node.cloneNode(true)));
      } else {
        const fresh = entry.article.cloneNode(true);
        entry.article.replaceWith(fresh);
        entry.article = fresh;
        entry.body = fresh.querySelector(".body");
        entry.cards = fresh.querySelector(".cards");
      }
      if (entry.draft) entry.draft = entry.body.querySelector("p.draft");
    }
    if (part !== "messages") return;
    for (const card of cards.values()) {
      const id = CSS.escape(card.article.dataset.callId);
      const fresh = history.querySelector(`article.card[data-call-id="${id}"]`);
      if (!fresh) continue;
      card.article = fresh;
      for (const name of Object.keys(card.fields)) card.fields[name] = fresh.querySelector("." + name);
      const buttons = [...fresh.querySelectorAll(".card-actions button")];
      for (const button of buttons) button.addEventListener("click", () => decide(button.className, buttons));
      card.buttons = buttons;
    }
  }

